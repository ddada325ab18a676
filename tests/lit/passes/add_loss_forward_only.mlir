// RUN: megatrain-opt %s --mt-add-loss="loss-output=loss forward-only=true" | FileCheck %s
// RUN: megatrain-opt %s --mt-add-loss="loss-output=loss" | FileCheck %s --check-prefix=TRAIN

// forward-only marks the function as an evaluation step (mt.evaluation) and
// otherwise does what mt-add-loss always does: the loss is marked, the
// outputs dropped. No gradient or update is added by the pass itself.
// CHECK-LABEL: func.func @scalar_output() attributes {mt.evaluation} {
// CHECK:         %[[W:.*]] = mt.param {name = "w", trainable = true}
// CHECK:         %[[L:.*]] = mt.reduce_mean %[[W]]
// CHECK-NEXT:    mt.loss %[[L]] : tensor<f32>
// CHECK-NEXT:    return{{$}}

// Without it the function carries no mark (a training step).
// TRAIN-LABEL: func.func @scalar_output() {
// TRAIN-NOT:   mt.evaluation
func.func @scalar_output() -> (tensor<4xf32> {mt.output_name = "logits"}, tensor<f32> {mt.output_name = "loss"}) {
  %w = mt.param {name = "w", trainable = true} : tensor<4xf32>
  %head = mt.param {name = "head", trainable = true} : tensor<4xf32>
  %y = mt.mul %w, %head : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %l = mt.reduce_mean %w {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  return %y, %l : tensor<4xf32>, tensor<f32>
}
