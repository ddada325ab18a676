// RUN: megatrain-opt %s --split-input-file --mt-schedule --mt-liveness \
// RUN:   --mt-tier="device-memory=16384 device-profile=%S/Inputs/tier_profile.json" | FileCheck %s
// RUN: megatrain-opt %s --split-input-file --mt-schedule --mt-liveness \
// RUN:   --mt-tier="device-memory=16384 fill=false device-profile=%S/Inputs/tier_profile.json" \
// RUN:   | FileCheck %s --check-prefix=GREEDY
// RUN: not megatrain-opt %s --split-input-file --mt-schedule --mt-liveness \
// RUN:   --mt-tier="device-memory=10240 device-profile=%S/Inputs/tier_profile.json" -o /dev/null \
// RUN:   2>&1 | FileCheck %s --check-prefix=SMALL

// The profile makes every kernel cost 1 ms (its launch) and a 4 KiB copy
// 4 ms + 1 ms over either link, so recomputing a tanh is cheaper than
// offloading its 4 KiB result. Every value here is 4 KiB; the budget is 16 KiB.

// Prefetch distance: the 1 KiB parameter takes 2 ms to fetch, two kernels'
// worth, so mt-tier issues it two kernels before the mul that reads it.
// CHECK-LABEL: func.func @prefetch_distance
// CHECK:         mt.tanh
// CHECK-NEXT:    mt.tanh
// CHECK-NEXT:    mt.param {{.*}}name = "w"
// CHECK-NEXT:    mt.tanh
// CHECK-NEXT:    mt.tanh
// CHECK-NEXT:    mt.mul
func.func @prefetch_distance() {
  %x = mt.input {name = "x"} : tensor<256xf32>
  %a = mt.tanh %x : tensor<256xf32>
  %b = mt.tanh %a : tensor<256xf32>
  %c = mt.tanh %b : tensor<256xf32>
  %d = mt.tanh %c : tensor<256xf32>
  %w = mt.param {name = "w", trainable = false} : tensor<256xf32>
  %y = mt.mul %d, %w : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  %s = mt.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : (tensor<256xf32>) -> tensor<f32>
  mt.loss %s : tensor<f32>
  return
}

// -----

// At the mul of %b and %c, x, a, b, c and the result are live: 20 KiB. %a is
// read again only at the end and its input %x is still live there, so the
// cheapest way down to 16 KiB is to run tanh(%x) again before that use.
// CHECK-LABEL: func.func @recompute
// CHECK-SAME:    mt.device_budget = 16384
// CHECK:         %[[X:.*]] = mt.input
// CHECK:         mt.mul
// CHECK-NEXT:    %[[A2:.*]] = mt.tanh %[[X]] {mt.live_end = {{.*}}, mt.recompute
// CHECK-NEXT:    mt.mul %{{.*}}, %[[A2]]
// CHECK-NOT:     mt.offload
func.func @recompute() {
  %x = mt.input {name = "x"} : tensor<1024xf32>
  %a = mt.tanh %x : tensor<1024xf32>
  %b = mt.tanh %a : tensor<1024xf32>
  %c = mt.tanh %b : tensor<1024xf32>
  %d = mt.mul %b, %c : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %e = mt.mul %d, %a : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %f = mt.mul %e, %x : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %s = mt.reduce_sum %f {axes = array<i64: 0>, keepdims = false} : (tensor<1024xf32>) -> tensor<f32>
  mt.loss %s : tensor<f32>
  return
}

// -----

// %y and %z are read only at the end and their input %x dies early, so they
// cannot be rebuilt: during the tanh chain (a, y, z and two links: 20 KiB)
// one goes to the host, and the greedy alone (the second RUN, no fill) sends the
// second one too for the end, where the prefetched %y and the mul's operands
// meet. Each is copied out right after its def and prefetched after the peak
// it frees. That second offload frees more than the budget needs: the fill
// keeps %y on the device (the end then holds %e, y, the prefetched z and the
// result: 16 KiB), saving its prefetch's exposed transfer.
// CHECK-LABEL: func.func @offload
// CHECK-SAME:    mt.tiering_policy = "auto (auto+fill)"
// CHECK:         %[[Y:.*]] = mt.sigmoid
// CHECK-NOT:     mt.offload %[[Y]]
// CHECK:         %[[Z:.*]] = mt.relu
// CHECK-NEXT:    %[[HZ:.*]] = mt.offload %[[Z]]
// CHECK:         %[[Z2:.*]] = mt.prefetch %[[HZ]]
// CHECK-NEXT:    mt.mul %{{.*}}, %[[Y]]
// CHECK-NEXT:    mt.mul %{{.*}}, %[[Z2]]
// CHECK-NOT:     mt.recompute
// GREEDY-LABEL: func.func @offload
// GREEDY:         %[[Y:.*]] = mt.sigmoid
// GREEDY-NEXT:    %[[HY:.*]] = mt.offload %[[Y]]
// GREEDY:         %[[Z:.*]] = mt.relu
// GREEDY-NEXT:    %[[HZ:.*]] = mt.offload %[[Z]]
// GREEDY:         %[[Y2:.*]] = mt.prefetch %[[HY]]
// GREEDY:         %[[Z2:.*]] = mt.prefetch %[[HZ]]
// GREEDY-NEXT:    mt.mul %{{.*}}, %[[Y2]]
// GREEDY-NEXT:    mt.mul %{{.*}}, %[[Z2]]
// GREEDY-NOT:     mt.recompute
func.func @offload() {
  %x = mt.input {name = "x"} : tensor<1024xf32>
  %y = mt.sigmoid %x : tensor<1024xf32>
  %z = mt.relu %x : tensor<1024xf32>
  %a = mt.tanh %x : tensor<1024xf32>
  %b = mt.tanh %a : tensor<1024xf32>
  %c = mt.tanh %b : tensor<1024xf32>
  %d = mt.tanh %c : tensor<1024xf32>
  %d2 = mt.tanh %d : tensor<1024xf32>
  %d3 = mt.tanh %d2 : tensor<1024xf32>
  %d4 = mt.tanh %d3 : tensor<1024xf32>
  %d5 = mt.tanh %d4 : tensor<1024xf32>
  %d6 = mt.tanh %d5 : tensor<1024xf32>
  %d7 = mt.tanh %d6 : tensor<1024xf32>
  %d8 = mt.tanh %d7 : tensor<1024xf32>
  %e = mt.mul %d8, %a : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %f = mt.mul %e, %y : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %g = mt.mul %f, %z : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %s = mt.reduce_sum %g {axes = array<i64: 0>, keepdims = false} : (tensor<1024xf32>) -> tensor<f32>
  mt.loss %s : tensor<f32>
  return
}

// -----

// A parameter read early and late is fetched again from its host master
// rather than kept over the chain (three links, w and y: 20 KiB); y, whose
// input is gone, is offloaded.
// CHECK-LABEL: func.func @refetch
// CHECK:         %[[W:.*]] = mt.param {{.*}}name = "w"
// CHECK:         mt.offload
// CHECK:         mt.mul %{{.*}}, %[[W]]
// CHECK:         %[[W2:.*]] = mt.param {{.*}}name = "w"
// CHECK:         mt.prefetch
// CHECK-NEXT:    mt.mul %{{.*}}, %[[W2]]
func.func @refetch() {
  %x = mt.input {name = "x"} : tensor<1024xf32>
  %w = mt.param {name = "w", trainable = false} : tensor<1024xf32>
  %y = mt.sigmoid %x : tensor<1024xf32>
  %a = mt.mul %x, %w : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %b = mt.tanh %a : tensor<1024xf32>
  %c = mt.mul %a, %b : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %d = mt.mul %b, %c : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %e = mt.mul %c, %d : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %f = mt.mul %d, %e : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %g = mt.mul %e, %f : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %h = mt.mul %f, %g : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %k = mt.mul %g, %h : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %l = mt.mul %k, %w : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %m = mt.mul %l, %y : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %s = mt.reduce_sum %m {axes = array<i64: 0>, keepdims = false} : (tensor<1024xf32>) -> tensor<f32>
  mt.loss %s : tensor<f32>
  return
}

// -----

// 10 KiB cannot hold the three operands and the result of a binary op that
// all must be on the device at once; the error names the smallest budget
// the planner reaches and the step that sets it.
// SMALL: error: mt-tier: device budget 10.0 KiB (10240 bytes) cannot be met: the smallest budget that fits is {{.*}}; it is set by step {{[0-9]+}}, mt.mul
func.func @too_small() {
  %x = mt.input {name = "x"} : tensor<1024xf32>
  %y = mt.input {name = "y"} : tensor<1024xf32>
  %z = mt.input {name = "z"} : tensor<1024xf32>
  %a = mt.mul %x, %y : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %b = mt.mul %a, %z : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %s = mt.reduce_sum %b {axes = array<i64: 0>, keepdims = false} : (tensor<1024xf32>) -> tensor<f32>
  mt.loss %s : tensor<f32>
  return
}
