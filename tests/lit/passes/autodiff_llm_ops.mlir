// RUN: megatrain-opt %s --mt-autodiff --split-input-file | FileCheck %s

// x^2 differentiates to 2 * x * dy with x itself: no powf(x, 1).
// CHECK-LABEL: func.func @powf_square
// CHECK:         %[[W:.*]] = mt.param {name = "w"
// CHECK:         %[[G:.*]] = mt.broadcast_to
// CHECK-NOT:     mt.powf
// CHECK:         %[[M:.*]] = mt.mul %[[G]], %[[W]]
// CHECK-NEXT:    %[[S:.*]] = mt.scale %[[M]] {alpha = 2.000000e+00 : f64}
// CHECK-NEXT:    mt.param_grad %[[S]] {param = "w"}
func.func @powf_square() {
  %w = mt.param {name = "w", trainable = true} : tensor<3xf32>
  %p = mt.powf %w {exponent = 2.0 : f64} : tensor<3xf32>
  %l = mt.reduce_sum %p {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  mt.loss %l : tensor<f32>
  return
}

// -----

// A causal mask: the scores get dy where the mask holds and 0 elsewhere (a
// where with a scalar zero); the mask and the constant get nothing, so the
// where that would route dy to the constant is dropped.
// CHECK-LABEL: func.func @where_mask
// CHECK-SAME:    (%[[MASK:.*]]: tensor<4x4xi1>)
// CHECK:         %[[G:.*]] = mt.broadcast_to
// CHECK:         %[[ZERO:.*]] = mt.fill {value = 0.000000e+00 : f64} : tensor<f32>
// CHECK:         %[[D:.*]] = mt.where %[[MASK]], %[[G]], %[[ZERO]] : (tensor<4x4xi1>, tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
// CHECK-NEXT:    mt.param_grad %[[D]] {param = "w"}
// CHECK-NOT:     mt.where
func.func @where_mask(%m: tensor<4x4xi1>) {
  %w = mt.param {name = "w", trainable = true} : tensor<2x4x4xf32>
  %low = mt.constant {value = dense<-1.0e30> : tensor<f32>} : tensor<f32>
  %s = mt.where %m, %w, %low : (tensor<4x4xi1>, tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %l = mt.reduce_sum %s {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x4x4xf32>) -> tensor<f32>
  mt.loss %l : tensor<f32>
  return
}

// -----

// A float cast passes dy cast back; concat hands each input its stretch of dy.
// CHECK-LABEL: func.func @concat_cast
// CHECK:         %[[G:.*]] = mt.broadcast_to {{.*}} -> tensor<2x4xf64>
// CHECK:         %[[G32:.*]] = mt.cast %[[G]] : (tensor<2x4xf64>) -> tensor<2x4xf32>
// CHECK:         %[[DA:.*]] = mt.slice %[[G32]] {ends = array<i64: 2, 3>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<2x4xf32>) -> tensor<2x3xf32>
// CHECK:         %[[DB:.*]] = mt.slice %[[G32]] {ends = array<i64: 2, 4>, starts = array<i64: 0, 3>, steps = array<i64: 1, 1>} : (tensor<2x4xf32>) -> tensor<2x1xf32>
// CHECK:         mt.param_grad %[[DA]] {param = "a"}
// CHECK:         mt.param_grad %[[DB]] {param = "b"}
func.func @concat_cast() {
  %a = mt.param {name = "a", trainable = true} : tensor<2x3xf32>
  %b = mt.param {name = "b", trainable = true} : tensor<2x1xf32>
  %c = mt.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %d = mt.cast %c : (tensor<2x4xf32>) -> tensor<2x4xf64>
  %l = mt.reduce_sum %d {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x4xf64>) -> tensor<f64>
  mt.loss %l : tensor<f64>
  return
}

// -----

// Nothing flows through a cast to i64 or through isnan: the weight's only
// gradient is the direct one.
// CHECK-LABEL: func.func @integer_branches
// CHECK:         %[[W:.*]] = mt.param {name = "w"
// CHECK:         mt.loss
// CHECK-NOT:     mt.cast
// CHECK-NOT:     mt.isnan
// CHECK:         %[[DW:.*]] = mt.where
// CHECK-NEXT:    mt.param_grad %[[DW]] {param = "w"}
func.func @integer_branches() {
  %w = mt.param {name = "w", trainable = true} : tensor<3xf32>
  %i = mt.cast %w : (tensor<3xf32>) -> tensor<3xi64>
  %n = mt.isnan %w : (tensor<3xf32>) -> tensor<3xi1>
  %z = mt.constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
  %s = mt.where %n, %z, %w : (tensor<3xi1>, tensor<f32>, tensor<3xf32>) -> tensor<3xf32>
  %l = mt.reduce_sum %s {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  mt.loss %l : tensor<f32>
  return
}
