// RUN: megatrain-opt %s --split-input-file --verify-diagnostics \
// RUN:   --mt-add-loss="loss-output=loss keep-outputs=logits,hidden" | FileCheck %s
// RUN: megatrain-opt %s --split-input-file --verify-diagnostics \
// RUN:   --mt-add-loss="loss-output=loss keep-outputs=logits,hidden" --mt-schedule \
// RUN:   | FileCheck %s --check-prefix=SCHED

// Kept outputs are marked with mt.output after mt.loss, so the ops that only
// they need survive the erasure of the dropped outputs; `extra` is not kept
// and its op goes.
// CHECK-LABEL: func.func @keep() {
// CHECK:         %[[H:.*]] = mt.tanh
// CHECK:         %[[Y:.*]] = mt.mul %[[H]]
// CHECK-NOT:     mt.relu
// CHECK:         %[[L:.*]] = mt.reduce_mean
// CHECK-NEXT:    mt.loss %[[L]] : tensor<f32>
// CHECK-NEXT:    mt.output %[[Y]] {name = "logits"} : tensor<4xf32>
// CHECK-NEXT:    mt.output %[[H]] {name = "hidden"} : tensor<4xf32>
// CHECK-NEXT:    return{{$}}

// The schedule treats mt.output as a sink: right after its value's def, so the
// readout copy happens before the value can die.
// SCHED-LABEL: func.func @keep() {
// SCHED:         %[[H:.*]] = mt.tanh {{.*}} {mt.step = 1 : i64}
// SCHED-NEXT:    mt.output %[[H]] {mt.step = 2 : i64, name = "hidden"}
// SCHED:         %[[Y:.*]] = mt.mul {{.*}} {mt.step = 4 : i64}
// SCHED-NEXT:    mt.output %[[Y]] {mt.step = 5 : i64, name = "logits"}
func.func @keep() -> (tensor<4xf32> {mt.output_name = "logits"}, tensor<4xf32> {mt.output_name = "hidden"},
                      tensor<4xf32> {mt.output_name = "extra"}, tensor<f32> {mt.output_name = "loss"}) {
  %x = mt.input {name = "x"} : tensor<4xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<4xf32>
  %h = mt.tanh %x : tensor<4xf32>
  %y = mt.mul %h, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %e = mt.relu %x : tensor<4xf32>
  %l = mt.reduce_mean %w {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  return %y, %h, %e, %l : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>
}

// -----

// A kept name must be a graph output: a typo is an error, not a silent no-op.
// expected-error@+1 {{cannot keep output 'hidden': no graph output has that name; the graph outputs are: logits, loss}}
func.func @missing() -> (tensor<4xf32> {mt.output_name = "logits"}, tensor<f32> {mt.output_name = "loss"}) {
  %w = mt.param {name = "w", trainable = true} : tensor<4xf32>
  %l = mt.reduce_mean %w {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  return %w, %l : tensor<4xf32>, tensor<f32>
}
