// RUN: megatrain-opt %s --mt-autodiff --mt-microbatch=count=2 --mt-schedule --mt-liveness \
// RUN:   --mt-tier="policy=checkpoint device-profile=%S/Inputs/tier_profile.json" | FileCheck %s
// RUN: megatrain-opt %s --mt-autodiff --mt-microbatch=count=2 --mt-schedule --mt-liveness \
// RUN:   --mt-tier="policy=auto device-memory=49152 device-profile=%S/Inputs/homes_no_launch_profile.json" \
// RUN:   | FileCheck %s --check-prefix=ACCROOM
// RUN: megatrain-opt %s --mt-autodiff --mt-microbatch=count=2 --mt-schedule --mt-liveness \
// RUN:   --mt-tier="policy=auto device-memory=49152 device-profile=%S/Inputs/homes_fast_host_profile.json" \
// RUN:   | FileCheck %s --check-prefix=NOROOM

// Room for the accumulators (docs/tiering.md, "How homes are chosen"): with micro-batches,
// where a byte of device accumulator saves more than a byte of device home (the H200 figures
// without a launch's fixed cost), auto plans the arena within --device-memory (48 KiB) less
// the two accumulators (2 x 4 KiB), since the checkpoint plan (36.2 KiB) fits there; all the
// state (32 KiB beside a 1 MiB margin) does not. Where a home's byte saves more (a fast host
// and links, a slow host AdamW), the arena keeps the whole budget.
// ACCROOM: func.func @step() attributes {{{.*}}mt.device_budget = 40960
// NOROOM: func.func @step() attributes {{{.*}}mt.device_budget = 49152

// Two micro-batches of a two-layer step (x * w0 -> tanh -> * w1 -> tanh ->
// sum). mt-microbatch marks each micro-batch's backward ops with its index,
// and mt-tier splits forward from backward inside each micro-batch: the
// checkpoint policy keeps the layer boundary (the first tanh) and rebuilds
// the second layer's tanh (mul by a fetched-again w1, then tanh) right
// before its tanh_grad, in micro-batch 0 and again in micro-batch 1. The
// per-micro-batch losses, which the mean reads after the last micro-batch's
// forward, are left alone.

// CHECK-LABEL: func.func @step()
// CHECK:         %[[X0:.*]] = mt.input {{.*}}name = "x"
// CHECK:         %[[B0:.*]] = mt.tanh
// CHECK:         %[[L0:.*]] = mt.reduce_sum
// CHECK-NOT:     mt.tanh_grad
// CHECK:         mt.broadcast_to {{.*}}mt.microbatch_backward = 0
// CHECK:         %[[C0:.*]] = mt.mul %[[B0]], %{{.*}} {{.*}}mt.recompute
// CHECK-NEXT:    %[[D0:.*]] = mt.tanh %[[C0]] {{.*}}mt.recompute
// CHECK-NEXT:    mt.tanh_grad %[[D0]], {{.*}}mt.microbatch_backward = 0
// CHECK:         mt.tanh_grad %[[B0]], {{.*}}mt.microbatch_backward = 0
// CHECK:         mt.grad_part {{.*}}index = 0 : i64, mt.microbatch_backward = 0 : i64, {{.*}}param = "layers.0.w"
// CHECK:         %[[X1:.*]] = mt.input {{.*}}name = "x@1"
// CHECK:         %[[B1:.*]] = mt.tanh
// CHECK:         %[[L1:.*]] = mt.reduce_sum
// CHECK-NOT:     mt.tanh_grad
// CHECK:         mt.add %[[L0]], %[[L1]]
// CHECK:         mt.loss
// CHECK:         mt.broadcast_to {{.*}}mt.microbatch_backward = 1
// CHECK:         %[[C1:.*]] = mt.mul %[[B1]], %{{.*}} {{.*}}mt.recompute
// CHECK-NEXT:    %[[D1:.*]] = mt.tanh %[[C1]] {{.*}}mt.recompute
// CHECK-NEXT:    mt.tanh_grad %[[D1]], {{.*}}mt.microbatch_backward = 1
// CHECK:         mt.tanh_grad %[[B1]], {{.*}}mt.microbatch_backward = 1
// CHECK:         mt.param_grad {{.*}}mt.microbatch_backward = 1 : i64, {{.*}}param = "layers.0.w"
// CHECK-NOT:     mt.recompute
// CHECK:         return
func.func @step() {
  %x = mt.input {name = "x"} : tensor<1024xf32>
  %w0 = mt.param {name = "layers.0.w", trainable = true} : tensor<1024xf32>
  %w1 = mt.param {name = "layers.1.w", trainable = true} : tensor<1024xf32>
  %a = mt.mul %x, %w0 : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %b = mt.tanh %a : tensor<1024xf32>
  %c = mt.mul %b, %w1 : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %d = mt.tanh %c : tensor<1024xf32>
  %s = mt.reduce_sum %d {axes = array<i64: 0>, keepdims = false} : (tensor<1024xf32>) -> tensor<f32>
  mt.loss %s : tensor<f32>
  return
}
