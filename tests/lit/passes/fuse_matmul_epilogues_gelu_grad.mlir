// RUN: megatrain-opt %s --split-input-file --mt-fuse-matmul-epilogues | FileCheck %s

// The GELU's backward: gelu_grad of the pre-activation z and a product that
// only it reads becomes one mt.matmul_gelu_grad(a, b, z), at the product's
// place (z is defined before it), with the product's flags and precision.
// CHECK-LABEL: func.func @gelu_grad
// CHECK-NOT:     mt.gelu_grad
// CHECK:         %[[Z:.*]] = mt.input {name = "z"} : tensor<6x16xf32>
// CHECK:         %[[DZ:.*]] = mt.matmul_gelu_grad %{{.*}}, %{{.*}}, %[[Z]] {precision = "tf32", transpose_b = true} : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<6x16xf32>) -> tensor<6x16xf32>
// CHECK-NEXT:    mt.input {name = "other"}
// CHECK:         mt.output %[[DZ]] {name = "dz"}
// CHECK-NOT:     mt.matmul
func.func @gelu_grad() {
  %z = mt.input {name = "z"} : tensor<6x16xf32>
  %dy = mt.input {name = "dy"} : tensor<6x8xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<16x8xf32>
  %p = mt.matmul %dy, %w {precision = "tf32", transpose_b = true} : (tensor<6x8xf32>, tensor<16x8xf32>) -> tensor<6x16xf32>
  %other = mt.input {name = "other"} : tensor<6x16xf32>
  mt.output %other {name = "other"} : tensor<6x16xf32>
  %dz = mt.gelu_grad %z, %p {approximate = "tanh"} : tensor<6x16xf32>
  mt.output %dz {name = "dz"} : tensor<6x16xf32>
  return
}

// -----

// GPT-2's MLP backward: the product [B*T, 4C] reshaped to [B, T, 4C] for
// the gelu_grad, whose x is the forward's [B*T, 4C] pre-activation reshaped
// the same way. z is taken from under x's reshape (which, now unread, goes);
// dz is reshaped as the gelu_grad's result was. The forward and the
// backward both fuse, the backward reading the forward's z.
// CHECK-LABEL: func.func @mlp
// CHECK:         %[[Y:.*]], %[[Z:.*]] = mt.matmul_bias_gelu
// CHECK-NOT:     mt.reshape %[[Z]]
// CHECK:         %[[DZ:.*]] = mt.matmul_gelu_grad %{{.*}}, %{{.*}}, %[[Z]] {transpose_b = true} : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<6x16xf32>) -> tensor<6x16xf32>
// CHECK-NEXT:    %[[R:.*]] = mt.reshape %[[DZ]] : (tensor<6x16xf32>) -> tensor<2x3x16xf32>
// CHECK-NEXT:    mt.output %[[R]] {name = "dh"}
// CHECK-NOT:     mt.gelu_grad
func.func @mlp() {
  %x = mt.input {name = "x"} : tensor<6x8xf32>
  %w1 = mt.param {name = "w1", trainable = true} : tensor<8x16xf32>
  %b1 = mt.param {name = "b1", trainable = true} : tensor<16xf32>
  %p1 = mt.matmul %x, %w1 : (tensor<6x8xf32>, tensor<8x16xf32>) -> tensor<6x16xf32>
  %s = mt.add %p1, %b1 : (tensor<6x16xf32>, tensor<16xf32>) -> tensor<6x16xf32>
  %h = mt.reshape %s : (tensor<6x16xf32>) -> tensor<2x3x16xf32>
  %g = mt.gelu %h {approximate = "tanh"} : tensor<2x3x16xf32>
  mt.output %g {name = "g"} : tensor<2x3x16xf32>
  %dy = mt.input {name = "dy"} : tensor<6x8xf32>
  %w2 = mt.param {name = "w2", trainable = true} : tensor<16x8xf32>
  %p2 = mt.matmul %dy, %w2 {transpose_b = true} : (tensor<6x8xf32>, tensor<16x8xf32>) -> tensor<6x16xf32>
  %dg = mt.reshape %p2 : (tensor<6x16xf32>) -> tensor<2x3x16xf32>
  %dh = mt.gelu_grad %h, %dg {approximate = "tanh"} : tensor<2x3x16xf32>
  mt.output %dh {name = "dh"} : tensor<2x3x16xf32>
  return
}

// -----

// z defined after the product: the fused op stands where the gelu_grad
// stood. x has no value of the product's shape under it: a reshape of x
// to that shape is z.
// CHECK-LABEL: func.func @late_z
// CHECK:         %[[X:.*]] = mt.input {name = "x"} : tensor<2x3x16xf32>
// CHECK-NEXT:    %[[Z:.*]] = mt.reshape %[[X]] : (tensor<2x3x16xf32>) -> tensor<6x16xf32>
// CHECK-NEXT:    %[[DZ:.*]] = mt.matmul_gelu_grad %{{.*}}, %{{.*}}, %[[Z]] {precision = "bf16"} : (tensor<6x8xbf16>, tensor<8x16xbf16>, tensor<6x16xf32>) -> tensor<6x16xf32>
// CHECK-NEXT:    mt.reshape %[[DZ]] : (tensor<6x16xf32>) -> tensor<2x3x16xf32>
func.func @late_z() {
  %dy = mt.input {name = "dy"} : tensor<6x8xbf16>
  %w = mt.param {name = "w", trainable = true} : tensor<8x16xbf16>
  %p = mt.matmul %dy, %w {precision = "bf16"} : (tensor<6x8xbf16>, tensor<8x16xbf16>) -> tensor<6x16xf32>
  %dg = mt.reshape %p : (tensor<6x16xf32>) -> tensor<2x3x16xf32>
  %x = mt.input {name = "x"} : tensor<2x3x16xf32>
  %dh = mt.gelu_grad %x, %dg {approximate = "tanh"} : tensor<2x3x16xf32>
  mt.output %dh {name = "dh"} : tensor<2x3x16xf32>
  return
}

// -----

// Must not fuse: the erf form (cuBLASLt's DGELU is the tanh GELU's slope),
// a product another op reads (an output; through the reshape too: the
// product must be written anyway), a product as x rather than dy, and f64
// (cuBLASLt has no f64 epilogues).
// CHECK-LABEL: func.func @gelu_grad_not_fused
// CHECK-NOT:     mt.matmul_gelu_grad
// CHECK-COUNT-5: mt.gelu_grad %
// CHECK-NOT:     mt.matmul_gelu_grad
func.func @gelu_grad_not_fused() {
  %z = mt.input {name = "z"} : tensor<6x16xf32>
  %dy = mt.input {name = "dy"} : tensor<6x8xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<8x16xf32>
  %p1 = mt.matmul %dy, %w : (tensor<6x8xf32>, tensor<8x16xf32>) -> tensor<6x16xf32>
  %d1 = mt.gelu_grad %z, %p1 {approximate = "none"} : tensor<6x16xf32>
  mt.output %d1 {name = "d1"} : tensor<6x16xf32>
  %p2 = mt.matmul %dy, %w : (tensor<6x8xf32>, tensor<8x16xf32>) -> tensor<6x16xf32>
  %d2 = mt.gelu_grad %z, %p2 {approximate = "tanh"} : tensor<6x16xf32>
  mt.output %d2 {name = "d2"} : tensor<6x16xf32>
  mt.output %p2 {name = "p2"} : tensor<6x16xf32>
  %p3 = mt.matmul %dy, %w : (tensor<6x8xf32>, tensor<8x16xf32>) -> tensor<6x16xf32>
  %r3 = mt.reshape %p3 : (tensor<6x16xf32>) -> tensor<2x3x16xf32>
  %z3 = mt.reshape %z : (tensor<6x16xf32>) -> tensor<2x3x16xf32>
  %d3 = mt.gelu_grad %z3, %r3 {approximate = "tanh"} : tensor<2x3x16xf32>
  mt.output %d3 {name = "d3"} : tensor<2x3x16xf32>
  mt.output %r3 {name = "r3"} : tensor<2x3x16xf32>
  %p4 = mt.matmul %dy, %w : (tensor<6x8xf32>, tensor<8x16xf32>) -> tensor<6x16xf32>
  %d4 = mt.gelu_grad %p4, %z {approximate = "tanh"} : tensor<6x16xf32>
  mt.output %d4 {name = "d4"} : tensor<6x16xf32>
  %zd = mt.input {name = "zd"} : tensor<6x16xf64>
  %dyd = mt.input {name = "dyd"} : tensor<6x8xf64>
  %wd = mt.param {name = "wd", trainable = true} : tensor<8x16xf64>
  %p5 = mt.matmul %dyd, %wd : (tensor<6x8xf64>, tensor<8x16xf64>) -> tensor<6x16xf64>
  %d5 = mt.gelu_grad %zd, %p5 {approximate = "tanh"} : tensor<6x16xf64>
  mt.output %d5 {name = "d5"} : tensor<6x16xf64>
  return
}
