// RUN: megatrain-opt %s --mt-autodiff --mt-schedule --mt-liveness \
// RUN:   --mt-tier="policy=checkpoint+fill device-memory=49152 device-profile=%S/Inputs/tier_fill_profile.json" \
// RUN:   --mt-plan-memory | FileCheck %s
// RUN: megatrain-opt %s --mt-autodiff --mt-schedule --mt-liveness \
// RUN:   --mt-tier="policy=checkpoint device-memory=49152 device-profile=%S/Inputs/tier_fill_profile.json" \
// RUN:   | FileCheck %s --check-prefix=NOFILL
// RUN: megatrain-opt %s --mt-autodiff --mt-schedule --mt-liveness \
// RUN:   --mt-tier="policy=offload+fill device-memory=49152 device-profile=%S/Inputs/tier_fill_profile.json" \
// RUN:   --mt-plan-memory | FileCheck %s --check-prefix=OFFLOAD

// mt-tier's fill (docs/tiering.md "The fill") on a two-layer step: each
// layer is a = x @ w (a matmul: 14 ms on this profile's slow matmul rate),
// b = sigmoid(a) (1 ms, the launch), c = a * b. Backward reads a and b of
// both layers (4 KiB each); the checkpoint policy keeps the layer boundary
// c0 and rebuilds a and b of each layer before their backward (arena
// 44 KiB; keeping everything takes 56 KiB). The budget, 48 KiB, has room to
// keep some of the rebuilt values but not all: the fill keeps both matmul
// outputs (14 ms saved per 4 KiB) before any sigmoid output (1 ms), and
// layer 0's sigmoid stays recomputed. The arena stays within the budget.

// CHECK-LABEL: func.func @step()
// CHECK-SAME:    mt.arena_size = 49152
// CHECK-SAME:    mt.device_budget = 49152
// CHECK-SAME:    mt.tiering_policy = "checkpoint+fill"
// CHECK:         %[[A0:.*]] = mt.matmul %{{.*}}, %{{.*}} {mt.live_end
// CHECK:         mt.loss
// CHECK-NOT:     mt.matmul {{.*}}mt.recompute
// CHECK:         %[[B0:.*]] = mt.sigmoid %[[A0]] {{.*}}mt.recompute
// CHECK-NOT:     mt.recompute
// CHECK:         mt.sigmoid_grad %[[B0]],
// CHECK-NOT:     mt.recompute
// CHECK:         param = "layers.0.w"

// Without the fill, the checkpoint plan rebuilds all four values.
// NOFILL-LABEL: func.func @step()
// NOFILL:         mt.loss
// NOFILL-COUNT-2: mt.recompute
// NOFILL:         param = "layers.1.w"
// NOFILL-COUNT-2: mt.recompute
// NOFILL-NOT:     mt.recompute

// The offload policy sends five values to the host and back (20 KiB of host
// staging, arena 44 KiB); its fill keeps four of them on the device instead,
// within the same 48 KiB, and one offload and its prefetch remain.
// OFFLOAD-LABEL: func.func @step()
// OFFLOAD-SAME:    mt.arena_size = 49152
// OFFLOAD-SAME:    mt.host_stage_size = 4096
// OFFLOAD-SAME:    mt.tiering_policy = "offload+fill"
// OFFLOAD-COUNT-1: mt.offload
// OFFLOAD-NOT:     mt.offload
// OFFLOAD-COUNT-1: mt.prefetch
// OFFLOAD-NOT:     mt.prefetch
func.func @step() {
  %x = mt.input {name = "x"} : tensor<16x64xf32>
  %w0 = mt.param {name = "layers.0.w", trainable = true} : tensor<64x64xf32>
  %w1 = mt.param {name = "layers.1.w", trainable = true} : tensor<64x64xf32>
  %a0 = mt.matmul %x, %w0 : (tensor<16x64xf32>, tensor<64x64xf32>) -> tensor<16x64xf32>
  %b0 = mt.sigmoid %a0 : tensor<16x64xf32>
  %c0 = mt.mul %a0, %b0 : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  %a1 = mt.matmul %c0, %w1 : (tensor<16x64xf32>, tensor<64x64xf32>) -> tensor<16x64xf32>
  %b1 = mt.sigmoid %a1 : tensor<16x64xf32>
  %c1 = mt.mul %a1, %b1 : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  %s = mt.reduce_sum %c1 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<16x64xf32>) -> tensor<f32>
  mt.loss %s : tensor<f32>
  return
}
