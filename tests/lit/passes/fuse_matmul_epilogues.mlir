// RUN: megatrain-opt %s --split-input-file --mt-fuse-matmul-epilogues | FileCheck %s

// The residual add of a Llama block (o_proj): the product's only reader is
// the add, so the add goes into the product's epilogue, which stands where
// the product stood (the residual comes before it) and keeps its precision
// and flags. The operand order of the add does not matter.
// CHECK-LABEL: func.func @residual
// CHECK-NOT:     mt.add
// CHECK:         %[[R:.*]] = mt.input {name = "r"} : tensor<2x3x4xf32>
// CHECK-NEXT:    %[[X:.*]] = mt.input {name = "x"} : tensor<2x3x8xbf16>
// CHECK-NEXT:    %[[W:.*]] = mt.param {name = "w", trainable = true} : tensor<4x8xbf16>
// CHECK-NEXT:    %[[Y:.*]] = mt.matmul_add %[[X]], %[[W]], %[[R]] {precision = "bf16", transpose_b = true} : (tensor<2x3x8xbf16>, tensor<4x8xbf16>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT:    %[[Z:.*]] = mt.matmul_add %[[X]], %[[W]], %[[Y]] {precision = "bf16", transpose_b = true}
// CHECK-NEXT:    mt.output %[[Z]] {name = "y"} : tensor<2x3x4xf32>
func.func @residual() {
  %r = mt.input {name = "r"} : tensor<2x3x4xf32>
  %x = mt.input {name = "x"} : tensor<2x3x8xbf16>
  %w = mt.param {name = "w", trainable = true} : tensor<4x8xbf16>
  %p = mt.matmul %x, %w {precision = "bf16", transpose_b = true} : (tensor<2x3x8xbf16>, tensor<4x8xbf16>) -> tensor<2x3x4xf32>
  %y = mt.add %r, %p : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %q = mt.matmul %x, %w {precision = "bf16", transpose_b = true} : (tensor<2x3x8xbf16>, tensor<4x8xbf16>) -> tensor<2x3x4xf32>
  %z = mt.add %q, %y : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  mt.output %z {name = "y"} : tensor<2x3x4xf32>
  return
}

// -----

// A gradient sum of two products (dX = dY1 W1 + dY2 W2): the later product
// takes the earlier one as its addend, at its own place.
// CHECK-LABEL: func.func @gradient_sum
// CHECK:         %[[P1:.*]] = mt.matmul %{{.*}}, %{{.*}} : (tensor<6x4xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
// CHECK-NEXT:    %[[DY2:.*]] = mt.input {name = "dy2"} : tensor<6x5xf32>
// CHECK-NEXT:    %[[W2:.*]] = mt.param {name = "w2", trainable = true} : tensor<5x8xf32>
// CHECK-NEXT:    %[[DX:.*]] = mt.matmul_add %[[DY2]], %[[W2]], %[[P1]] : (tensor<6x5xf32>, tensor<5x8xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>
// CHECK-NEXT:    mt.output %[[DX]] {name = "dx"} : tensor<6x8xf32>
func.func @gradient_sum() {
  %dy1 = mt.input {name = "dy1"} : tensor<6x4xf32>
  %w1 = mt.param {name = "w1", trainable = true} : tensor<4x8xf32>
  %p1 = mt.matmul %dy1, %w1 : (tensor<6x4xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
  %dy2 = mt.input {name = "dy2"} : tensor<6x5xf32>
  %w2 = mt.param {name = "w2", trainable = true} : tensor<5x8xf32>
  %p2 = mt.matmul %dy2, %w2 : (tensor<6x5xf32>, tensor<5x8xf32>) -> tensor<6x8xf32>
  %dx = mt.add %p1, %p2 : (tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>
  mt.output %dx {name = "dx"} : tensor<6x8xf32>
  return
}

// -----

// The addend defined after the product: the fused op stands where the add
// stood, after the addend.
// CHECK-LABEL: func.func @late_addend
// CHECK:         mt.input {name = "x"}
// CHECK-NEXT:    mt.param {name = "w", trainable = true}
// CHECK-NEXT:    %[[R:.*]] = mt.input {name = "r"} : tensor<3x4xf64>
// CHECK-NEXT:    %[[Y:.*]] = mt.matmul_add %{{.*}}, %{{.*}}, %[[R]] : (tensor<3x8xf64>, tensor<8x4xf64>, tensor<3x4xf64>) -> tensor<3x4xf64>
// CHECK-NEXT:    mt.output %[[Y]]
func.func @late_addend() {
  %x = mt.input {name = "x"} : tensor<3x8xf64>
  %w = mt.param {name = "w", trainable = true} : tensor<8x4xf64>
  %p = mt.matmul %x, %w : (tensor<3x8xf64>, tensor<8x4xf64>) -> tensor<3x4xf64>
  %r = mt.input {name = "r"} : tensor<3x4xf64>
  %y = mt.add %p, %r : (tensor<3x4xf64>, tensor<3x4xf64>) -> tensor<3x4xf64>
  mt.output %y {name = "y"} : tensor<3x4xf64>
  return
}

// -----

// A bias over the product's last dim (an nn.Linear with a bias, GPT-2's
// Conv1D): cuBLASLt's BIAS epilogue adds it to every row.
// CHECK-LABEL: func.func @bias
// CHECK-NOT:     mt.add
// CHECK:         %[[B:.*]] = mt.param {name = "bias", trainable = true} : tensor<4xf32>
// CHECK:         %[[Y:.*]] = mt.matmul_add %{{.*}}, %{{.*}}, %[[B]] {precision = "bf16"} : (tensor<2x3x8xbf16>, tensor<8x4xbf16>, tensor<4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT:    mt.output %[[Y]]
func.func @bias() {
  %bias = mt.param {name = "bias", trainable = true} : tensor<4xf32>
  %x = mt.input {name = "x"} : tensor<2x3x8xbf16>
  %w = mt.param {name = "w", trainable = true} : tensor<8x4xbf16>
  %p = mt.matmul %x, %w {precision = "bf16"} : (tensor<2x3x8xbf16>, tensor<8x4xbf16>) -> tensor<2x3x4xf32>
  %y = mt.add %bias, %p : (tensor<4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  mt.output %y {name = "y"} : tensor<2x3x4xf32>
  return
}

// -----

// Must not fuse: a product with another reader (it is written anyway), a
// broadcast addend other than a bias (cuBLASLt's C has the product's layout,
// its bias runs along the last dim), an f64 bias (Dgemm has no bias
// epilogue), an add of a product to itself, and a product with a bf16 result.
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT:     mt.matmul_add
// CHECK-COUNT-5: mt.add
func.func @not_fused() {
  %x = mt.input {name = "x"} : tensor<3x8xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<8x4xf32>
  %r = mt.input {name = "r"} : tensor<3x4xf32>
  %p = mt.matmul %x, %w : (tensor<3x8xf32>, tensor<8x4xf32>) -> tensor<3x4xf32>
  %y = mt.add %p, %r : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  mt.output %p {name = "p"} : tensor<3x4xf32>
  mt.output %y {name = "y"} : tensor<3x4xf32>
  %column = mt.input {name = "column"} : tensor<3x1xf32>
  %q = mt.matmul %x, %w : (tensor<3x8xf32>, tensor<8x4xf32>) -> tensor<3x4xf32>
  %z = mt.add %q, %column : (tensor<3x4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
  mt.output %z {name = "z"} : tensor<3x4xf32>
  %xd = mt.input {name = "xd"} : tensor<3x8xf64>
  %wd = mt.param {name = "wd", trainable = true} : tensor<8x4xf64>
  %bd = mt.param {name = "bd", trainable = true} : tensor<4xf64>
  %pd = mt.matmul %xd, %wd : (tensor<3x8xf64>, tensor<8x4xf64>) -> tensor<3x4xf64>
  %yd = mt.add %pd, %bd : (tensor<3x4xf64>, tensor<4xf64>) -> tensor<3x4xf64>
  mt.output %yd {name = "yd"} : tensor<3x4xf64>
  %s = mt.matmul %x, %w : (tensor<3x8xf32>, tensor<8x4xf32>) -> tensor<3x4xf32>
  %d = mt.add %s, %s : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  mt.output %d {name = "d"} : tensor<3x4xf32>
  %xb = mt.input {name = "xb"} : tensor<3x8xbf16>
  %wb = mt.param {name = "wb", trainable = true} : tensor<8x4xbf16>
  %rb = mt.input {name = "rb"} : tensor<3x4xbf16>
  %pb = mt.matmul %xb, %wb : (tensor<3x8xbf16>, tensor<8x4xbf16>) -> tensor<3x4xbf16>
  %yb = mt.add %pb, %rb : (tensor<3x4xbf16>, tensor<3x4xbf16>) -> tensor<3x4xbf16>
  mt.output %yb {name = "yb"} : tensor<3x4xbf16>
  return
}

