// RUN: megatrain-opt %s --split-input-file --mt-bf16-activations | FileCheck %s

// The gate and up products of a SwiGLU MLP, read by the forward's program
// (through a reshape) and by the backward's: both write bf16, the reshape
// moves bf16, and the programs read them as they are.
// CHECK-LABEL: func.func @gate_up
// CHECK:         %[[G:.*]] = mt.matmul {{.*}} -> tensor<6x4xbf16>
// CHECK:         %[[U:.*]] = mt.matmul {{.*}} -> tensor<6x4xbf16>
// CHECK:         %[[R:.*]] = mt.reshape %[[G]] : (tensor<6x4xbf16>) -> tensor<2x3x4xbf16>
// CHECK:         %[[UR:.*]] = mt.reshape %[[U]] : (tensor<6x4xbf16>) -> tensor<2x3x4xbf16>
// CHECK:         mt.pointwise %[[R]], %[[UR]] {{.*}} : (tensor<2x3x4xbf16>, tensor<2x3x4xbf16>) -> tensor<2x3x4xbf16>
// CHECK:         mt.pointwise %[[R]], %[[UR]], %{{.*}} {{.*}} : (tensor<2x3x4xbf16>, tensor<2x3x4xbf16>, tensor<2x3x4xf32>) -> (tensor<2x3x4xbf16>, tensor<2x3x4xbf16>)
func.func @gate_up() {
  %x = mt.input {name = "x"} : tensor<6x8xbf16>
  %wg = mt.param {name = "wg", trainable = true} : tensor<4x8xbf16>
  %wu = mt.param {name = "wu", trainable = true} : tensor<4x8xbf16>
  %g = mt.matmul %x, %wg {precision = "bf16", transpose_b = true} : (tensor<6x8xbf16>, tensor<4x8xbf16>) -> tensor<6x4xf32>
  %u = mt.matmul %x, %wu {precision = "bf16", transpose_b = true} : (tensor<6x8xbf16>, tensor<4x8xbf16>) -> tensor<6x4xf32>
  %gr = mt.reshape %g : (tensor<6x4xf32>) -> tensor<2x3x4xf32>
  %ur = mt.reshape %u : (tensor<6x4xf32>) -> tensor<2x3x4xf32>
  %a = mt.pointwise %gr, %ur {code = array<i64: 22, 0, 1, -1, 21, 2, -1, -1>, constants = array<f64>, outputs = array<i64: 3>} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xbf16>
  %dy = mt.input {name = "dy"} : tensor<2x3x4xf32>
  %dg, %du = mt.pointwise %gr, %ur, %dy {code = array<i64: 24, 0, 1, 2, 25, 0, 1, 2, 21, 3, -1, -1, 21, 4, -1, -1>, constants = array<f64>, outputs = array<i64: 5, 6>} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> (tensor<2x3x4xbf16>, tensor<2x3x4xbf16>)
  mt.output %a {name = "a"} : tensor<2x3x4xbf16>
  mt.output %dg {name = "dg"} : tensor<2x3x4xbf16>
  mt.output %du {name = "du"} : tensor<2x3x4xbf16>
  return
}

// -----

// A product that a norm (or an output) also reads keeps its f32 result;
// so do f32 products and residual products (matmul_add).
// CHECK-LABEL: func.func @not_candidates
// CHECK:         mt.matmul {{.*}} -> tensor<3x4xf32>
// CHECK:         mt.matmul {{.*}} -> tensor<3x4xf32>
// CHECK:         mt.matmul_add {{.*}} -> tensor<3x4xf32>
func.func @not_candidates() {
  %xb = mt.input {name = "xb"} : tensor<3x8xbf16>
  %wb = mt.input {name = "wb"} : tensor<8x4xbf16>
  %y = mt.matmul %xb, %wb {precision = "bf16"} : (tensor<3x8xbf16>, tensor<8x4xbf16>) -> tensor<3x4xf32>
  %x = mt.input {name = "x"} : tensor<3x8xf32>
  %w = mt.input {name = "w"} : tensor<8x4xf32>
  %f = mt.matmul %x, %w : (tensor<3x8xf32>, tensor<8x4xf32>) -> tensor<3x4xf32>
  %r = mt.input {name = "r"} : tensor<3x4xf32>
  %z = mt.matmul_add %xb, %wb, %r {precision = "bf16"} : (tensor<3x8xbf16>, tensor<8x4xbf16>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %a = mt.pointwise %y, %f {code = array<i64: 0, 0, 1, -1, 2, 2, 0, -1>, constants = array<f64>, outputs = array<i64: 3>} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %b = mt.pointwise %z, %z {code = array<i64: 0, 0, 1, -1, 2, 2, 0, -1>, constants = array<f64>, outputs = array<i64: 3>} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  mt.output %a {name = "a"} : tensor<3x4xf32>
  mt.output %b {name = "b"} : tensor<3x4xf32>
  mt.output %y {name = "y"} : tensor<3x4xf32>
  return
}
