// RUN: megatrain-opt %s --split-input-file --mt-fuse-matmul-epilogues | FileCheck %s

// A tanh GELU of a biased product whose pre-activation only the backward's
// gelu_grad reads: one mt.matmul_bias_gelu at the product's place; its z
// replaces the sum for the gelu_grad and its y the gelu.
// CHECK-LABEL: func.func @bias_gelu
// CHECK-NOT:     mt.add
// CHECK-NOT:     mt.gelu %
// CHECK:         %[[B:.*]] = mt.param {name = "bias", trainable = true} : tensor<16xf32>
// CHECK:         %[[Y:.*]], %[[Z:.*]] = mt.matmul_bias_gelu %{{.*}}, %{{.*}}, %[[B]] {precision = "tf32", transpose_b = true} : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> (tensor<6x16xf32>, tensor<6x16xf32>)
// CHECK-NEXT:    mt.output %[[Y]] {name = "y"}
// CHECK:         mt.gelu_grad %[[Z]], %{{.*}} {approximate = "tanh"}
func.func @bias_gelu() {
  %bias = mt.param {name = "bias", trainable = true} : tensor<16xf32>
  %x = mt.input {name = "x"} : tensor<6x8xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<16x8xf32>
  %p = mt.matmul %x, %w {precision = "tf32", transpose_b = true} : (tensor<6x8xf32>, tensor<16x8xf32>) -> tensor<6x16xf32>
  %h = mt.add %p, %bias : (tensor<6x16xf32>, tensor<16xf32>) -> tensor<6x16xf32>
  %y = mt.gelu %h {approximate = "tanh"} : tensor<6x16xf32>
  mt.output %y {name = "y"} : tensor<6x16xf32>
  %dy = mt.input {name = "dy"} : tensor<6x16xf32>
  %dh = mt.gelu_grad %h, %dy {approximate = "tanh"} : tensor<6x16xf32>
  mt.output %dh {name = "dh"} : tensor<6x16xf32>
  return
}

// -----

// GPT-2's Conv1D: the product of [B*T, C] rows, its bias, then a reshape to
// [B, T, 4C] that the gelu and the gelu_grad read. The reshape stays for the
// gelu_grad (on z); y is reshaped as the gelu's operand was.
// CHECK-LABEL: func.func @conv1d
// CHECK:         %[[Y:.*]], %[[Z:.*]] = mt.matmul_bias_gelu %{{.*}}, %{{.*}}, %{{.*}} {precision = "bf16"} : (tensor<6x8xbf16>, tensor<8x16xbf16>, tensor<16xf32>) -> (tensor<6x16xf32>, tensor<6x16xf32>)
// CHECK-NEXT:    %[[H:.*]] = mt.reshape %[[Z]] : (tensor<6x16xf32>) -> tensor<2x3x16xf32>
// CHECK-NEXT:    %[[G:.*]] = mt.reshape %[[Y]] : (tensor<6x16xf32>) -> tensor<2x3x16xf32>
// CHECK-NEXT:    mt.output %[[G]] {name = "y"}
// CHECK:         mt.gelu_grad %[[H]], %{{.*}} {approximate = "tanh"}
func.func @conv1d() {
  %x = mt.input {name = "x"} : tensor<6x8xbf16>
  %w = mt.param {name = "w", trainable = true} : tensor<8x16xbf16>
  %bias = mt.param {name = "bias", trainable = true} : tensor<16xf32>
  %p = mt.matmul %x, %w {precision = "bf16"} : (tensor<6x8xbf16>, tensor<8x16xbf16>) -> tensor<6x16xf32>
  %s = mt.add %p, %bias : (tensor<6x16xf32>, tensor<16xf32>) -> tensor<6x16xf32>
  %h = mt.reshape %s : (tensor<6x16xf32>) -> tensor<2x3x16xf32>
  %y = mt.gelu %h {approximate = "tanh"} : tensor<2x3x16xf32>
  mt.output %y {name = "y"} : tensor<2x3x16xf32>
  %dy = mt.input {name = "dy"} : tensor<2x3x16xf32>
  %dh = mt.gelu_grad %h, %dy {approximate = "tanh"} : tensor<2x3x16xf32>
  mt.output %dh {name = "dh"} : tensor<2x3x16xf32>
  return
}

// -----

// Must not fuse the GELU (the bias still goes into the product): the erf
// form (cuBLASLt's GELU is the tanh one), a pre-activation another op reads
// (an output, a gelu_grad reading it as dy), a residual addend instead of
// a bias, and a GELU read only by a cast to bf16 (mt-fuse-pointwise makes
// the gelu and the cast one program reading the f32 sum once; the fused op
// would write an f32 y for the cast to read).
// CHECK-LABEL: func.func @gelu_not_fused
// CHECK-NOT:     mt.matmul_bias_gelu
// CHECK-COUNT-5: mt.gelu %
// CHECK-NOT:     mt.matmul_bias_gelu
func.func @gelu_not_fused() {
  %x = mt.input {name = "x"} : tensor<6x8xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<8x16xf32>
  %bias = mt.param {name = "bias", trainable = true} : tensor<16xf32>
  %p1 = mt.matmul %x, %w : (tensor<6x8xf32>, tensor<8x16xf32>) -> tensor<6x16xf32>
  %h1 = mt.add %p1, %bias : (tensor<6x16xf32>, tensor<16xf32>) -> tensor<6x16xf32>
  %y1 = mt.gelu %h1 {approximate = "none"} : tensor<6x16xf32>
  mt.output %y1 {name = "y1"} : tensor<6x16xf32>
  %p2 = mt.matmul %x, %w : (tensor<6x8xf32>, tensor<8x16xf32>) -> tensor<6x16xf32>
  %h2 = mt.add %p2, %bias : (tensor<6x16xf32>, tensor<16xf32>) -> tensor<6x16xf32>
  %y2 = mt.gelu %h2 {approximate = "tanh"} : tensor<6x16xf32>
  mt.output %y2 {name = "y2"} : tensor<6x16xf32>
  mt.output %h2 {name = "h2"} : tensor<6x16xf32>
  %p3 = mt.matmul %x, %w : (tensor<6x8xf32>, tensor<8x16xf32>) -> tensor<6x16xf32>
  %h3 = mt.add %p3, %bias : (tensor<6x16xf32>, tensor<16xf32>) -> tensor<6x16xf32>
  %y3 = mt.gelu %h3 {approximate = "tanh"} : tensor<6x16xf32>
  mt.output %y3 {name = "y3"} : tensor<6x16xf32>
  %d3 = mt.gelu_grad %y3, %h3 {approximate = "tanh"} : tensor<6x16xf32>
  mt.output %d3 {name = "d3"} : tensor<6x16xf32>
  %r = mt.input {name = "r"} : tensor<6x16xf32>
  %p4 = mt.matmul %x, %w : (tensor<6x8xf32>, tensor<8x16xf32>) -> tensor<6x16xf32>
  %h4 = mt.add %p4, %r : (tensor<6x16xf32>, tensor<6x16xf32>) -> tensor<6x16xf32>
  %y4 = mt.gelu %h4 {approximate = "tanh"} : tensor<6x16xf32>
  mt.output %y4 {name = "y4"} : tensor<6x16xf32>
  %p5 = mt.matmul %x, %w : (tensor<6x8xf32>, tensor<8x16xf32>) -> tensor<6x16xf32>
  %h5 = mt.add %p5, %bias : (tensor<6x16xf32>, tensor<16xf32>) -> tensor<6x16xf32>
  %y5 = mt.gelu %h5 {approximate = "tanh"} : tensor<6x16xf32>
  %c5 = mt.cast %y5 : (tensor<6x16xf32>) -> tensor<6x16xbf16>
  mt.output %c5 {name = "y5"} : tensor<6x16xbf16>
  return
}

// -----

// f64: the bias is not fused (Dgemm has no bias epilogue), so neither is
// the GELU.
// CHECK-LABEL: func.func @gelu_f64
// CHECK-NOT:     mt.matmul_bias_gelu
// CHECK:         mt.add
// CHECK-NEXT:    mt.gelu %{{.*}} {approximate = "tanh"} : tensor<6x16xf64>
func.func @gelu_f64() {
  %x = mt.input {name = "x"} : tensor<6x8xf64>
  %w = mt.param {name = "w", trainable = true} : tensor<8x16xf64>
  %bias = mt.param {name = "bias", trainable = true} : tensor<16xf64>
  %p = mt.matmul %x, %w : (tensor<6x8xf64>, tensor<8x16xf64>) -> tensor<6x16xf64>
  %h = mt.add %p, %bias : (tensor<6x16xf64>, tensor<16xf64>) -> tensor<6x16xf64>
  %y = mt.gelu %h {approximate = "tanh"} : tensor<6x16xf64>
  mt.output %y {name = "y"} : tensor<6x16xf64>
  return
}
