// RUN: megatrain-opt %s --split-input-file --verify-diagnostics --mt-liveness | FileCheck %s

// live_end is the last step that reads each result: %x and %a are both read
// at step 3 (and earlier), so they live to 3; %b is read by nothing, -1; ops
// without results (mt.loss) get no attribute.
// CHECK-LABEL: func.func @last_reader
// CHECK:         mt.input {mt.live_end = array<i64: 3>
// CHECK-NEXT:    mt.relu {{.*}}mt.live_end = array<i64: 3>
// CHECK-NEXT:    mt.tanh {{.*}}mt.live_end = array<i64: -1>
// CHECK-NEXT:    mt.add {{.*}}mt.live_end = array<i64: 4>
// CHECK-NEXT:    mt.reduce_sum {{.*}}mt.live_end = array<i64: 5>
// CHECK-NEXT:    mt.loss %{{.*}} {mt.step = 5 : i64} : tensor<f32>
func.func @last_reader() {
  %x = mt.input {name = "x", mt.step = 0 : i64} : tensor<4xf32>
  %a = mt.relu %x {mt.step = 1 : i64} : tensor<4xf32>
  %b = mt.tanh %a {mt.step = 2 : i64} : tensor<4xf32>
  %c = mt.add %x, %a {mt.step = 3 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %l = mt.reduce_sum %c {axes = array<i64: 0>, keepdims = false, mt.step = 4 : i64} : (tensor<4xf32>) -> tensor<f32>
  mt.loss %l {mt.step = 5 : i64} : tensor<f32>
  return {mt.step = 6 : i64}
}

// -----

// One entry per result: layer_norm_grad's dx and dscale are read, its dbias
// is not.
// CHECK-LABEL: func.func @per_result
// CHECK:         mt.layer_norm_grad {{.*}}mt.live_end = array<i64: 4, 5, -1>
func.func @per_result() {
  %x = mt.input {name = "x", mt.step = 0 : i64} : tensor<2x8xf32>
  %g = mt.param {name = "g", trainable = true, mt.step = 1 : i64} : tensor<8xf32>
  %dy = mt.input {name = "dy", mt.step = 2 : i64} : tensor<2x8xf32>
  %dx, %dg, %db = mt.layer_norm_grad %x, %g, %dy {axis = 1 : i64, epsilon = 1.0e-5 : f64, mt.step = 3 : i64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %r = mt.relu %dx {mt.step = 4 : i64} : tensor<2x8xf32>
  mt.param_grad %dg {param = "g", mt.step = 5 : i64} : tensor<8xf32>
  return {mt.step = 6 : i64}
}

// -----

// Liveness reads the schedule; it does not make one.
func.func @unscheduled() {
  // expected-error @+1 {{op has no mt.step; run mt-schedule before mt-liveness}}
  %x = mt.input {name = "x"} : tensor<4xf32>
  return
}

// -----

// A use at or before its def means the IR was reordered after mt-schedule.
func.func @stale_schedule() {
  %x = mt.input {name = "x", mt.step = 1 : i64} : tensor<4xf32>
  // expected-error @+1 {{op at mt.step 0 uses a value defined at mt.step 1; the schedule is stale, rerun mt-schedule}}
  %a = mt.relu %x {mt.step = 0 : i64} : tensor<4xf32>
  return {mt.step = 2 : i64}
}
