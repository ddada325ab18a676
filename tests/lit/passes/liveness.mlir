// RUN: megatrain-opt %s --split-input-file --verify-diagnostics --mt-liveness | FileCheck %s
// RUN: megatrain-opt %s --split-input-file --verify-diagnostics \
// RUN:   --mt-liveness="hold-copies=true device-profile=%S/Inputs/tier_profile.json" \
// RUN:   | FileCheck %s --check-prefix=HOLD

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

// The copy hold (mt-tier's last stage): %a is offloaded at step 2 and last
// read on the device at step 3. The copy of its 4 KiB over the 1,024,000 B/s
// link of Inputs/tier_profile.json takes 5 ms (4 ms plus the 1 ms launch);
// each tanh after it takes just over 1 ms (the launch). %a dies at a step
// whose stream waits there for the copy, so the compute issued before that
// step must cover it: steps 3 to 7, and %a lives to step 8; a value placed
// in its bytes after that does not wait for the link. Without the option it
// dies at its last reader.
// CHECK-LABEL: func.func @offload_hold
// CHECK:         mt.tanh %{{.*}} {mt.live_end = array<i64: 3>, mt.step = 1 : i64}
// HOLD-LABEL:  func.func @offload_hold
// HOLD:          mt.tanh %{{.*}} {mt.live_end = array<i64: 8>, mt.step = 1 : i64}
// HOLD-NEXT:     mt.offload {{.*}}mt.live_end = array<i64: -1>
func.func @offload_hold() {
  %x = mt.input {name = "x", mt.step = 0 : i64} : tensor<1024xf32>
  %a = mt.tanh %x {mt.step = 1 : i64} : tensor<1024xf32>
  %h = mt.offload %a {mt.step = 2 : i64} : tensor<1024xf32>
  %b = mt.tanh %a {mt.step = 3 : i64} : tensor<1024xf32>
  %c = mt.tanh %b {mt.step = 4 : i64} : tensor<1024xf32>
  %d = mt.tanh %c {mt.step = 5 : i64} : tensor<1024xf32>
  %e = mt.tanh %d {mt.step = 6 : i64} : tensor<1024xf32>
  %f = mt.tanh %e {mt.step = 7 : i64} : tensor<1024xf32>
  %g = mt.tanh %f {mt.step = 8 : i64} : tensor<1024xf32>
  %l = mt.reduce_sum %g {axes = array<i64: 0>, keepdims = false, mt.step = 9 : i64} : (tensor<1024xf32>) -> tensor<f32>
  mt.loss %l {mt.step = 10 : i64} : tensor<f32>
  return {mt.step = 11 : i64}
}

// -----

// A gradient's copy to the host (its mt.adamw) is held too, but never past
// the last op before the return: the one tanh after the update cannot cover
// the 5 ms copy, and %g stops at step 5. A constant copied out (a kept
// mt.output) is not held: mt-plan-memory keeps constants forever anyway.
// CHECK-LABEL: func.func @hold_ends_before_return
// CHECK:         mt.tanh %{{.*}} {mt.live_end = array<i64: 2>, mt.step = 1 : i64}
// CHECK:         mt.constant {mt.live_end = array<i64: 4>
// HOLD-LABEL:  func.func @hold_ends_before_return
// HOLD:          mt.tanh %{{.*}} {mt.live_end = array<i64: 5>, mt.step = 1 : i64}
// HOLD:          mt.constant {mt.live_end = array<i64: 4>
func.func @hold_ends_before_return() {
  %w = mt.param {name = "w", trainable = true, mt.step = 0 : i64} : tensor<1024xf32>
  %g = mt.tanh %w {mt.step = 1 : i64} : tensor<1024xf32>
  mt.adamw %g {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-08 : f64, lr = 1.000000e-03 : f64, param = "w", weight_decay = 1.000000e-02 : f64, mt.step = 2 : i64} : tensor<1024xf32>
  %k = mt.constant {value = dense<1.0> : tensor<1024xf32>, mt.step = 3 : i64} : tensor<1024xf32>
  mt.output %k {name = "k", mt.step = 4 : i64} : tensor<1024xf32>
  %y = mt.tanh %w {mt.step = 5 : i64} : tensor<1024xf32>
  return {mt.step = 6 : i64}
}

// -----

// The copies queue on the one link: %a and %b are offloaded back to back
// (steps 3 and 4), 5 ms each, after two tanhs (2 ms). %a's copy is done at
// 7 ms of compute (step 10), %b's at 12 ms, not 7: it starts when %a's is
// done. So %b is held five tanhs longer than %a (to step 15).
// CHECK-LABEL: func.func @copies_queue
// CHECK:         mt.tanh %{{.*}} {mt.live_end = array<i64: 3>, mt.step = 1 : i64}
// CHECK-NEXT:    mt.tanh %{{.*}} {mt.live_end = array<i64: 5>, mt.step = 2 : i64}
// HOLD-LABEL:  func.func @copies_queue
// HOLD:          mt.tanh %{{.*}} {mt.live_end = array<i64: 10>, mt.step = 1 : i64}
// HOLD-NEXT:     mt.tanh %{{.*}} {mt.live_end = array<i64: 15>, mt.step = 2 : i64}
func.func @copies_queue() {
  %x = mt.input {name = "x", mt.step = 0 : i64} : tensor<1024xf32>
  %a = mt.tanh %x {mt.step = 1 : i64} : tensor<1024xf32>
  %b = mt.tanh %a {mt.step = 2 : i64} : tensor<1024xf32>
  %ha = mt.offload %a {mt.step = 3 : i64} : tensor<1024xf32>
  %hb = mt.offload %b {mt.step = 4 : i64} : tensor<1024xf32>
  %c = mt.tanh %b {mt.step = 5 : i64} : tensor<1024xf32>
  %d = mt.tanh %c {mt.step = 6 : i64} : tensor<1024xf32>
  %e = mt.tanh %d {mt.step = 7 : i64} : tensor<1024xf32>
  %f = mt.tanh %e {mt.step = 8 : i64} : tensor<1024xf32>
  %g = mt.tanh %f {mt.step = 9 : i64} : tensor<1024xf32>
  %h = mt.tanh %g {mt.step = 10 : i64} : tensor<1024xf32>
  %i = mt.tanh %h {mt.step = 11 : i64} : tensor<1024xf32>
  %j = mt.tanh %i {mt.step = 12 : i64} : tensor<1024xf32>
  %k = mt.tanh %j {mt.step = 13 : i64} : tensor<1024xf32>
  %m = mt.tanh %k {mt.step = 14 : i64} : tensor<1024xf32>
  %n = mt.tanh %m {mt.step = 15 : i64} : tensor<1024xf32>
  %l = mt.reduce_sum %n {axes = array<i64: 0>, keepdims = false, mt.step = 16 : i64} : (tensor<1024xf32>) -> tensor<f32>
  mt.loss %l {mt.step = 17 : i64} : tensor<f32>
  return {mt.step = 18 : i64}
}

// -----

// A held value dies at a kernel of its own: not at a host update (whose
// stream may run far behind the compute; the next writer of the bytes would
// wait for it) nor at a reshape (mt-view-aliases may make it a view, which
// has no step). The five tanhs of steps 3 to 7 cover %a's copy, but step 8
// is an update and step 9 a reshape: %a lives to step 10.
// HOLD-LABEL:  func.func @hold_ends_at_a_kernel
// HOLD:          mt.tanh %{{.*}} {mt.live_end = array<i64: 10>, mt.step = 1 : i64}
func.func @hold_ends_at_a_kernel() {
  %w = mt.param {name = "w", trainable = true, mt.step = 0 : i64} : tensor<1024xf32>
  %a = mt.tanh %w {mt.step = 1 : i64} : tensor<1024xf32>
  %ha = mt.offload %a {mt.step = 2 : i64} : tensor<1024xf32>
  %b = mt.tanh %a {mt.step = 3 : i64} : tensor<1024xf32>
  %c = mt.tanh %b {mt.step = 4 : i64} : tensor<1024xf32>
  %d = mt.tanh %c {mt.step = 5 : i64} : tensor<1024xf32>
  %e = mt.tanh %d {mt.step = 6 : i64} : tensor<1024xf32>
  %f = mt.tanh %e {mt.step = 7 : i64} : tensor<1024xf32>
  mt.adamw %f {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-08 : f64, lr = 1.000000e-03 : f64, param = "w", weight_decay = 1.000000e-02 : f64, mt.step = 8 : i64} : tensor<1024xf32>
  %r = mt.reshape %e {mt.step = 9 : i64} : (tensor<1024xf32>) -> tensor<32x32xf32>
  %g = mt.tanh %r {mt.step = 10 : i64} : tensor<32x32xf32>
  %h = mt.tanh %g {mt.step = 11 : i64} : tensor<32x32xf32>
  %l = mt.reduce_sum %h {axes = array<i64: 0, 1>, keepdims = false, mt.step = 12 : i64} : (tensor<32x32xf32>) -> tensor<f32>
  mt.loss %l {mt.step = 13 : i64} : tensor<f32>
  return {mt.step = 14 : i64}
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
