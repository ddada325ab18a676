// RUN: megatrain-opt %s --split-input-file --mt-fold-transpose | FileCheck %s

// x @ W^T as exported: the weight's transpose folds into transpose_b of the
// forward product; the backward product that reads it transposed again reads
// the weight plain. The transpose, left without users, is erased. The
// weight gradient, a transpose of a product, becomes the product of the
// swapped operands with the flags swapped and negated (precision kept).
// CHECK-LABEL: func.func @linear
// CHECK-NOT:     mt.transpose
// CHECK:         %[[X:.*]] = mt.input {name = "x"} : tensor<2x3x8xbf16>
// CHECK-NEXT:    %[[W:.*]] = mt.param {name = "w", trainable = true} : tensor<4x8xbf16>
// CHECK-NEXT:    %[[Y:.*]] = mt.matmul %[[X]], %[[W]] {precision = "bf16", transpose_b = true} : (tensor<2x3x8xbf16>, tensor<4x8xbf16>) -> tensor<2x3x4xf32>
// CHECK-NEXT:    %[[DY:.*]] = mt.input {name = "dy"} : tensor<2x3x4xbf16>
// CHECK-NEXT:    %[[DX:.*]] = mt.matmul %[[DY]], %[[W]] {precision = "bf16"} : (tensor<2x3x4xbf16>, tensor<4x8xbf16>) -> tensor<2x3x8xf32>
// CHECK-NEXT:    %[[X2:.*]] = mt.reshape %[[X]] : (tensor<2x3x8xbf16>) -> tensor<6x8xbf16>
// CHECK-NEXT:    %[[DY2:.*]] = mt.reshape %[[DY]] : (tensor<2x3x4xbf16>) -> tensor<6x4xbf16>
// CHECK-NEXT:    %[[DW:.*]] = mt.matmul %[[DY2]], %[[X2]] {precision = "bf16", transpose_a = true} : (tensor<6x4xbf16>, tensor<6x8xbf16>) -> tensor<4x8xf32>
// CHECK-NEXT:    mt.param_grad %[[DW]] {param = "w"} : tensor<4x8xf32>
// CHECK-NEXT:    mt.output %[[Y]] {name = "y"} : tensor<2x3x4xf32>
// CHECK-NEXT:    mt.output %[[DX]] {name = "dx"} : tensor<2x3x8xf32>
func.func @linear() {
  %x = mt.input {name = "x"} : tensor<2x3x8xbf16>
  %w = mt.param {name = "w", trainable = true} : tensor<4x8xbf16>
  %wt = mt.transpose %w {perm = array<i64: 1, 0>} : (tensor<4x8xbf16>) -> tensor<8x4xbf16>
  %y = mt.matmul %x, %wt {precision = "bf16"} : (tensor<2x3x8xbf16>, tensor<8x4xbf16>) -> tensor<2x3x4xf32>
  %dy = mt.input {name = "dy"} : tensor<2x3x4xbf16>
  %dx = mt.matmul %dy, %wt {precision = "bf16", transpose_b = true} : (tensor<2x3x4xbf16>, tensor<8x4xbf16>) -> tensor<2x3x8xf32>
  %x2 = mt.reshape %x : (tensor<2x3x8xbf16>) -> tensor<6x8xbf16>
  %dy2 = mt.reshape %dy : (tensor<2x3x4xbf16>) -> tensor<6x4xbf16>
  %dwt = mt.matmul %x2, %dy2 {precision = "bf16", transpose_a = true} : (tensor<6x8xbf16>, tensor<6x4xbf16>) -> tensor<8x4xf32>
  %dw = mt.transpose %dwt {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  mt.param_grad %dw {param = "w"} : tensor<4x8xf32>
  mt.output %y {name = "y"} : tensor<2x3x4xf32>
  mt.output %dx {name = "dx"} : tensor<2x3x8xf32>
  return
}

// -----

// Batched: the keys transposed over their last two dims feed the scores as
// transpose_b; a transposed a toggles transpose_a off; a transpose of a
// transpose folds twice. A product with a broadcast rank-2 operand keeps its
// batch dims when swapped.
// CHECK-LABEL: func.func @batched
// CHECK-NOT:     mt.transpose
// CHECK:         %[[Q:.*]] = mt.input {name = "q"} : tensor<2x4x5x8xf32>
// CHECK-NEXT:    %[[K:.*]] = mt.input {name = "k"} : tensor<2x4x6x8xf32>
// CHECK-NEXT:    %[[S:.*]] = mt.matmul %[[Q]], %[[K]] {transpose_b = true} : (tensor<2x4x5x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x5x6xf32>
// CHECK-NEXT:    %[[A:.*]] = mt.matmul %[[Q]], %[[K]] {transpose_b = true} : (tensor<2x4x5x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x5x6xf32>
// CHECK-NEXT:    %[[M:.*]] = mt.input {name = "m"} : tensor<8x3xf32>
// CHECK-NEXT:    %[[R:.*]] = mt.matmul %[[M]], %[[Q]] {transpose_a = true, transpose_b = true} : (tensor<8x3xf32>, tensor<2x4x5x8xf32>) -> tensor<2x4x3x5xf32>
// CHECK-NEXT:    mt.output %[[S]] {name = "s"} : tensor<2x4x5x6xf32>
// CHECK-NEXT:    mt.output %[[A]] {name = "a"} : tensor<2x4x5x6xf32>
// CHECK-NEXT:    mt.output %[[R]] {name = "r"} : tensor<2x4x3x5xf32>
func.func @batched() {
  %q = mt.input {name = "q"} : tensor<2x4x5x8xf32>
  %k = mt.input {name = "k"} : tensor<2x4x6x8xf32>
  %kt = mt.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x6x8xf32>) -> tensor<2x4x8x6xf32>
  %s = mt.matmul %q, %kt : (tensor<2x4x5x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x5x6xf32>
  %qt = mt.transpose %q {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x5x8xf32>) -> tensor<2x4x8x5xf32>
  %ktt = mt.transpose %kt {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x8x6xf32>) -> tensor<2x4x6x8xf32>
  %a = mt.matmul %qt, %ktt {transpose_a = true, transpose_b = true} : (tensor<2x4x8x5xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x5x6xf32>
  %m = mt.input {name = "m"} : tensor<8x3xf32>
  %rt = mt.matmul %q, %m : (tensor<2x4x5x8xf32>, tensor<8x3xf32>) -> tensor<2x4x5x3xf32>
  %r = mt.transpose %rt {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x5x3xf32>) -> tensor<2x4x3x5xf32>
  mt.output %s {name = "s"} : tensor<2x4x5x6xf32>
  mt.output %a {name = "a"} : tensor<2x4x5x6xf32>
  mt.output %r {name = "r"} : tensor<2x4x3x5xf32>
  return
}

// -----

// Left alone: a transpose that moves a leading dim (the heads' [0, 2, 1, 3]
// or [1, 0, 2]); a transposed operand that another op also reads (folded
// into the matmul, kept for the other user); a transpose of a product that
// has another user.
// CHECK-LABEL: func.func @kept
// CHECK:         %[[X:.*]] = mt.input {name = "x"} : tensor<2x3x4x4xf32>
// CHECK-NEXT:    %[[H:.*]] = mt.transpose %[[X]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK-NEXT:    mt.matmul %[[H]], %[[H]] {transpose_b = true} : (tensor<2x4x3x4xf32>, tensor<2x4x3x4xf32>)
// CHECK-NEXT:    %[[W:.*]] = mt.input {name = "w"} : tensor<3x4x4xf32>
// CHECK-NEXT:    %[[L:.*]] = mt.transpose %[[W]] {perm = array<i64: 1, 0, 2>}
// CHECK-NEXT:    mt.matmul %[[L]], %[[L]] {transpose_b = true} : (tensor<4x3x4xf32>, tensor<4x3x4xf32>)
// CHECK-NEXT:    %[[V:.*]] = mt.input {name = "v"} : tensor<4x4xf32>
// CHECK-NEXT:    %[[VT:.*]] = mt.transpose %[[V]] {perm = array<i64: 1, 0>}
// CHECK-NEXT:    %[[P:.*]] = mt.matmul %[[V]], %[[V]] {transpose_a = true} :
// CHECK-NEXT:    mt.add %[[VT]], %[[P]]
// CHECK-NEXT:    mt.transpose %[[P]] {perm = array<i64: 1, 0>}
func.func @kept() {
  %x = mt.input {name = "x"} : tensor<2x3x4x4xf32>
  %h = mt.transpose %x {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x3x4x4xf32>) -> tensor<2x4x3x4xf32>
  %hh = mt.matmul %h, %h {transpose_b = true} : (tensor<2x4x3x4xf32>, tensor<2x4x3x4xf32>) -> tensor<2x4x3x3xf32>
  %w = mt.input {name = "w"} : tensor<3x4x4xf32>
  %l = mt.transpose %w {perm = array<i64: 1, 0, 2>} : (tensor<3x4x4xf32>) -> tensor<4x3x4xf32>
  %ll = mt.matmul %l, %l {transpose_b = true} : (tensor<4x3x4xf32>, tensor<4x3x4xf32>) -> tensor<4x3x3xf32>
  %v = mt.input {name = "v"} : tensor<4x4xf32>
  %vt = mt.transpose %v {perm = array<i64: 1, 0>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %p = mt.matmul %vt, %v : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %sum = mt.add %vt, %p : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %pt = mt.transpose %p {perm = array<i64: 1, 0>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  mt.output %hh {name = "hh"} : tensor<2x4x3x3xf32>
  mt.output %ll {name = "ll"} : tensor<4x3x3xf32>
  mt.output %sum {name = "sum"} : tensor<4x4xf32>
  mt.output %pt {name = "pt"} : tensor<4x4xf32>
  return
}
