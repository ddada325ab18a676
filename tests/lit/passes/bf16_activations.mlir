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

// -----

// The query and key projections, read only as rotary's x (through the head
// reshape), write bf16; rotary reads them exactly with its f32 tables. A
// product that is also a rotary's table, or that something else reads too,
// keeps its f32 result.
// CHECK-LABEL: func.func @rotary_x
// CHECK:         %[[Q:.*]] = mt.matmul {{.*}} -> tensor<6x8xbf16>
// CHECK:         %[[QR:.*]] = mt.reshape %[[Q]] : (tensor<6x8xbf16>) -> tensor<1x6x2x4xbf16>
// CHECK:         mt.rotary %[[QR]], %{{.*}}, %{{.*}} {bshd = true} : (tensor<1x6x2x4xbf16>, tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>) -> tensor<1x6x2x4xbf16>
// CHECK:         %[[K:.*]] = mt.matmul {{.*}} -> tensor<6x8xbf16>
// CHECK:         mt.matmul {{.*}} -> tensor<6x4xf32>
// CHECK:         mt.matmul {{.*}} -> tensor<6x8xf32>
func.func @rotary_x() {
  %x = mt.input {name = "x"} : tensor<6x8xbf16>
  %wq = mt.param {name = "wq", trainable = true} : tensor<8x8xbf16>
  %cos = mt.input {name = "cos"} : tensor<1x1x6x4xf32>
  %sin = mt.input {name = "sin"} : tensor<1x1x6x4xf32>
  %q = mt.matmul %x, %wq {precision = "bf16", transpose_b = true} : (tensor<6x8xbf16>, tensor<8x8xbf16>) -> tensor<6x8xf32>
  %qr = mt.reshape %q : (tensor<6x8xf32>) -> tensor<1x6x2x4xf32>
  %qy = mt.rotary %qr, %cos, %sin {bshd = true} : (tensor<1x6x2x4xf32>, tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>) -> tensor<1x6x2x4xbf16>
  %wk = mt.param {name = "wk", trainable = true} : tensor<8x8xbf16>
  %k = mt.matmul %x, %wk {precision = "bf16", transpose_b = true} : (tensor<6x8xbf16>, tensor<8x8xbf16>) -> tensor<6x8xf32>
  %kr = mt.reshape %k : (tensor<6x8xf32>) -> tensor<1x6x2x4xf32>
  %ky = mt.rotary %kr, %cos, %sin {bshd = true} : (tensor<1x6x2x4xf32>, tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>) -> tensor<1x6x2x4xbf16>
  %wt = mt.input {name = "wt"} : tensor<8x4xbf16>
  %t = mt.matmul %x, %wt {precision = "bf16"} : (tensor<6x8xbf16>, tensor<8x4xbf16>) -> tensor<6x4xf32>
  %tr = mt.reshape %t : (tensor<6x4xf32>) -> tensor<1x1x6x4xf32>
  %y = mt.rotary %qr, %tr, %sin {bshd = true} : (tensor<1x6x2x4xf32>, tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>) -> tensor<1x6x2x4xf32>
  %wo = mt.param {name = "wo", trainable = true} : tensor<8x8xbf16>
  %o = mt.matmul %x, %wo {precision = "bf16", transpose_b = true} : (tensor<6x8xbf16>, tensor<8x8xbf16>) -> tensor<6x8xf32>
  %or = mt.reshape %o : (tensor<6x8xf32>) -> tensor<1x6x2x4xf32>
  %oy = mt.rotary %or, %cos, %sin {bshd = true} : (tensor<1x6x2x4xf32>, tensor<1x1x6x4xf32>, tensor<1x1x6x4xf32>) -> tensor<1x6x2x4xbf16>
  mt.output %qy {name = "qy"} : tensor<1x6x2x4xbf16>
  mt.output %ky {name = "ky"} : tensor<1x6x2x4xbf16>
  mt.output %y {name = "y"} : tensor<1x6x2x4xf32>
  mt.output %oy {name = "oy"} : tensor<1x6x2x4xbf16>
  mt.output %o {name = "o"} : tensor<6x8xf32>
  return
}
