// RUN: megatrain-opt %s --mt-schedule --mt-liveness \
// RUN:   --mt-tier="device-memory=16384 device-profile=%S/Inputs/tier_profile.json" | FileCheck %s

// An input is in the arena from the start of the step (the runtime writes it
// before the first step), while its mt.input sits right before its first
// user: a later micro-batch's input_ids@k is defined in the middle of the
// step. At the mul of %a and %b, x, a, b, the result and the idle input y
// (x@1) are live: 20 KiB over a 16 KiB budget. Copying y out after its
// mt.input frees nothing before it, and a prefetch placed there would come
// before the offload it reads; so x, the only other idle value, goes to the
// host and comes back before its use. y is never offloaded.
// CHECK-LABEL: func.func @late_input
// CHECK:         %[[X:.*]] = mt.input {{.*}}name = "x"}
// CHECK-NEXT:    %[[HX:.*]] = mt.offload %[[X]]
// CHECK:         %[[X2:.*]] = mt.prefetch %[[HX]]
// CHECK:         mt.mul %{{.*}}, %[[X2]]
// CHECK-NEXT:    %[[Y:.*]] = mt.input {{.*}}name = "x@1"}
// CHECK-NOT:     mt.offload
// CHECK-NOT:     mt.prefetch
// CHECK:         mt.mul %{{.*}}, %[[Y]]
func.func @late_input() {
  %x = mt.input {name = "x"} : tensor<1024xf32>
  %a = mt.tanh %x : tensor<1024xf32>
  %b = mt.tanh %a : tensor<1024xf32>
  %c = mt.mul %a, %b : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %d = mt.tanh %c : tensor<1024xf32>
  %y = mt.input {name = "x@1"} : tensor<1024xf32>
  %e = mt.mul %d, %x : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %f = mt.mul %e, %y : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %s = mt.reduce_sum %f {axes = array<i64: 0>, keepdims = false} : (tensor<1024xf32>) -> tensor<f32>
  mt.loss %s : tensor<f32>
  return
}
