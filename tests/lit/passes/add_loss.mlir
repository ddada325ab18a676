// RUN: megatrain-opt %s --mt-add-loss="loss-output=loss" --split-input-file --verify-diagnostics | FileCheck %s
// RUN: not megatrain-opt %s --mt-add-loss="mode=bogus" --split-input-file 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not megatrain-opt %s --mt-add-loss --split-input-file 2>&1 | FileCheck %s --check-prefix=NONAME

// MODE: unknown mt-add-loss mode 'bogus'; expected 'output' or 'next-token-ce'
// NONAME: mt-add-loss needs loss-output=NAME in mode=output; the graph outputs are: logits, loss

// The scalar output becomes the loss. The other output and the ops only it
// needed are erased, and the function returns nothing.
// CHECK-LABEL: func.func @scalar_output() {
// CHECK:         %[[W:.*]] = mt.param {name = "w", trainable = true}
// CHECK-NOT:     "head"
// CHECK-NOT:     mt.mul
// CHECK:         %[[L:.*]] = mt.reduce_mean %[[W]]
// CHECK-NEXT:    mt.loss %[[L]] : tensor<f32>
// CHECK-NEXT:    return{{$}}
func.func @scalar_output() -> (tensor<4xf32> {mt.output_name = "logits"}, tensor<f32> {mt.output_name = "loss"}) {
  %w = mt.param {name = "w", trainable = true} : tensor<4xf32>
  %head = mt.param {name = "head", trainable = true} : tensor<4xf32>
  %y = mt.mul %w, %head : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %l = mt.reduce_mean %w {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  return %y, %l : tensor<4xf32>, tensor<f32>
}

// -----

// Ops that the loss still needs stay, even when a dropped output used them too.
// CHECK-LABEL: func.func @shared_prefix() {
// CHECK:         %[[X:.*]] = mt.input {name = "x"}
// CHECK:         %[[T:.*]] = mt.tanh %[[X]]
// CHECK-NOT:     mt.relu
// CHECK:         %[[L:.*]] = mt.reduce_sum %[[T]]
// CHECK-NEXT:    mt.loss %[[L]]
func.func @shared_prefix() -> (tensor<3xf32> {mt.output_name = "logits"}, tensor<f32> {mt.output_name = "loss"}) {
  %x = mt.input {name = "x"} : tensor<3xf32>
  %t = mt.tanh %x : tensor<3xf32>
  %r = mt.relu %t : tensor<3xf32>
  %l = mt.reduce_sum %t {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %r, %l : tensor<3xf32>, tensor<f32>
}

// -----

// expected-error@+1 {{no graph output named 'loss'; the graph outputs are: logits, aux}}
func.func @unknown_output() -> (tensor<f32> {mt.output_name = "logits"}, tensor<f32> {mt.output_name = "aux"}) {
  %a = mt.input {name = "a"} : tensor<f32>
  return %a, %a : tensor<f32>, tensor<f32>
}

// -----

// expected-error@+1 {{loss output 'loss' must be a floating-point scalar, got 'tensor<2xf32>'}}
func.func @non_scalar() -> (tensor<2xf32> {mt.output_name = "logits"}, tensor<2xf32> {mt.output_name = "loss"}) {
  %a = mt.input {name = "a"} : tensor<2xf32>
  return %a, %a : tensor<2xf32>, tensor<2xf32>
}
