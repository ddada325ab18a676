// RUN: megatrain-opt %s --split-input-file --mt-fuse-pointwise | FileCheck %s

// A residual add whose sum is read again later and as a bf16 copy by a
// matmul: one kernel could write both, but it would hold x, r, the sum and its
// copy at one step, more bytes than the add alone holds; it stays unfused.
// CHECK-LABEL: func.func @residual_and_cast
// CHECK-NOT:     mt.pointwise
// CHECK:         mt.add
// CHECK-NEXT:    mt.cast
func.func @residual_and_cast(%x: tensor<4x8xf32>, %r: tensor<4x8xf32>, %w: tensor<8x2xbf16>) {
  %s = mt.add %x, %r : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = mt.cast %s : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  %y = mt.matmul %b, %w {precision = "bf16"} : (tensor<4x8xbf16>, tensor<8x2xbf16>) -> tensor<4x2xf32>
  mt.output %s {name = "s"} : tensor<4x8xf32>
  mt.output %y {name = "y"} : tensor<4x2xf32>
  return
}

// -----

// swiglu_grad and the bf16 casts of both gradients: two instructions for the
// two results (24 swiglu_grad_gate, 25 swiglu_grad_up), neither f32 gradient
// written to memory.
// CHECK-LABEL: func.func @swiglu_grad_casts
// CHECK:         %[[G:.*]]:2 = mt.pointwise %arg0, %arg1, %arg2 {code = array<i64: 24, 0, 1, 2, 25, 0, 1, 2, 21, 3, -1, -1, 21, 4, -1, -1>, constants = array<f64>, outputs = array<i64: 5, 6>} : (tensor<2x6xf32>, tensor<2x6xf32>, tensor<2x6xf32>) -> (tensor<2x6xbf16>, tensor<2x6xbf16>)
// CHECK-NEXT:    mt.output %[[G]]#0 {name = "dg"}
// CHECK-NEXT:    mt.output %[[G]]#1 {name = "du"}
func.func @swiglu_grad_casts(%g: tensor<2x6xf32>, %u: tensor<2x6xf32>, %dy: tensor<2x6xf32>) {
  %dg, %du = mt.swiglu_grad %g, %u, %dy : tensor<2x6xf32>
  %bg = mt.cast %dg : (tensor<2x6xf32>) -> tensor<2x6xbf16>
  %bu = mt.cast %du : (tensor<2x6xf32>) -> tensor<2x6xbf16>
  mt.output %bg {name = "dg"} : tensor<2x6xbf16>
  mt.output %bu {name = "du"} : tensor<2x6xbf16>
  return
}

// -----

// A bf16 input cast to f32 is no instruction (its register holds the value
// exactly); a bias broadcast into the chain's shape is an input read through
// its broadcast; scale takes its factor from `constants` (2 mul, 19 scale,
// 16 relu, 0 add).
// CHECK-LABEL: func.func @broadcast_scale_relu
// CHECK:         %[[P:.*]] = mt.pointwise %arg2, %arg1, %arg0 {code = array<i64: 2, 0, 1, -1, 19, 3, 0, -1, 16, 4, -1, -1, 0, 5, 2, -1>, constants = array<f64: 5.0{{0*}}e-01>, outputs = array<i64: 6>} : (tensor<4x8xbf16>, tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    mt.output %[[P]]
func.func @broadcast_scale_relu(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %h: tensor<4x8xbf16>) {
  %hf = mt.cast %h : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %m = mt.mul %hf, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %s = mt.scale %m {alpha = 5.000000e-01 : f64} : tensor<4x8xf32>
  %r = mt.relu %s : tensor<4x8xf32>
  %y = mt.add %r, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  mt.output %y {name = "y"} : tensor<4x8xf32>
  return
}

// -----

// Must not fuse: the sum is read by a reduction before the product that
// would join it, so one kernel at the product would be read before it is
// written.
// CHECK-LABEL: func.func @reader_in_between
// CHECK-NOT:     mt.pointwise
// CHECK:         mt.add
// CHECK:         mt.reduce_sum
// CHECK:         mt.mul
func.func @reader_in_between(%x: tensor<4x8xf32>, %r: tensor<4x8xf32>) {
  %s = mt.add %x, %r : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = mt.reduce_sum %s {axes = array<i64: 1>, keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %y = mt.mul %s, %t : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  mt.output %y {name = "y"} : tensor<4x8xf32>
  return
}

// -----

// Must not fuse: the exp and the add have different result shapes (the add
// broadcasts the exp up), and a lone op stays itself.
// CHECK-LABEL: func.func @shapes_differ
// CHECK-NOT:     mt.pointwise
// CHECK:         mt.exp
// CHECK:         mt.add
func.func @shapes_differ(%x: tensor<4x8xf32>, %z: tensor<2x4x8xf32>) {
  %e = mt.exp %x : tensor<4x8xf32>
  %y = mt.add %e, %z : (tensor<4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  mt.output %y {name = "y"} : tensor<2x4x8xf32>
  return
}

// -----

// A weight gradient reads the activation gradient reshaped, then cast to
// bf16: the cast moves above the reshape (the same elements), reusing the
// cast the data gradient already makes, so no f32 gradient is written and
// the reshape moves bf16.
// CHECK-LABEL: func.func @cast_of_reshape
// CHECK:         %[[G:.*]]:2 = mt.pointwise %arg0, %arg1, %arg2 {code = array<i64: 24, 0, 1, 2, 25, 0, 1, 2, 21, 3, -1, -1, 21, 4, -1, -1>, constants = array<f64>, outputs = array<i64: 5, 6>}
// CHECK-NEXT:    %[[R:.*]] = mt.reshape %[[G]]#0 : (tensor<2x6xbf16>) -> tensor<12xbf16>
// CHECK-NOT:     mt.cast
// CHECK:         mt.output %[[R]] {name = "rg"}
func.func @cast_of_reshape(%g: tensor<2x6xf32>, %u: tensor<2x6xf32>, %dy: tensor<2x6xf32>) {
  %dg, %du = mt.swiglu_grad %g, %u, %dy : tensor<2x6xf32>
  %bg = mt.cast %dg : (tensor<2x6xf32>) -> tensor<2x6xbf16>
  %bu = mt.cast %du : (tensor<2x6xf32>) -> tensor<2x6xbf16>
  %rg = mt.reshape %dg : (tensor<2x6xf32>) -> tensor<12xf32>
  %cg = mt.cast %rg : (tensor<12xf32>) -> tensor<12xbf16>
  mt.output %bg {name = "dg"} : tensor<2x6xbf16>
  mt.output %bu {name = "du"} : tensor<2x6xbf16>
  mt.output %cg {name = "rg"} : tensor<12xbf16>
  return
}

// -----

// Must not hoist: the f32 reshape has another reader and the value has no
// cast to reuse, so hoisting would add a bf16 reshape beside the f32 one.
// CHECK-LABEL: func.func @reshape_read_twice
// CHECK:         %[[E:.*]] = mt.exp %arg0
// CHECK-NEXT:    %[[R:.*]] = mt.reshape %[[E]] : (tensor<2x6xf32>) -> tensor<12xf32>
// CHECK-NEXT:    %[[C:.*]] = mt.cast %[[R]] : (tensor<12xf32>) -> tensor<12xbf16>
func.func @reshape_read_twice(%x: tensor<2x6xf32>) {
  %e = mt.exp %x : tensor<2x6xf32>
  %r = mt.reshape %e : (tensor<2x6xf32>) -> tensor<12xf32>
  %c = mt.cast %r : (tensor<12xf32>) -> tensor<12xbf16>
  mt.output %r {name = "r"} : tensor<12xf32>
  mt.output %c {name = "c"} : tensor<12xbf16>
  return
}

// -----

// A value read outside the chain is stored too, when the fused op holds no
// more bytes than the widest op it replaces: swiglu_grad's dup goes out as
// f32 beside dgate's bf16 copy.
// CHECK-LABEL: func.func @one_gradient_cast
// CHECK:         %[[P:.*]]:2 = mt.pointwise %arg0, %arg1, %arg2 {code = array<i64: 24, 0, 1, 2, 25, 0, 1, 2, 21, 3, -1, -1>, constants = array<f64>, outputs = array<i64: 4, 5>} : (tensor<2x6xf32>, tensor<2x6xf32>, tensor<2x6xf32>) -> (tensor<2x6xf32>, tensor<2x6xbf16>)
// CHECK-NEXT:    mt.output %[[P]]#1 {name = "dg"}
// CHECK-NEXT:    mt.output %[[P]]#0 {name = "du"}
func.func @one_gradient_cast(%g: tensor<2x6xf32>, %u: tensor<2x6xf32>, %dy: tensor<2x6xf32>) {
  %dg, %du = mt.swiglu_grad %g, %u, %dy : tensor<2x6xf32>
  %bg = mt.cast %dg : (tensor<2x6xf32>) -> tensor<2x6xbf16>
  mt.output %bg {name = "dg"} : tensor<2x6xbf16>
  mt.output %du {name = "du"} : tensor<2x6xf32>
  return
}
