// RUN: megatrain-opt %s --mt-autodiff --mt-schedule --mt-liveness \
// RUN:   --mt-tier="policy=checkpoint+fill device-memory=45056 device-profile=%S/Inputs/tier_spill_profile.json" \
// RUN:   --mt-plan-memory | FileCheck %s
// RUN: megatrain-opt %s --mt-autodiff --mt-schedule --mt-liveness \
// RUN:   --mt-tier="policy=checkpoint+fill spill=false device-memory=45056 device-profile=%S/Inputs/tier_spill_profile.json" \
// RUN:   --mt-plan-memory | FileCheck %s --check-prefix=NOSPILL
// RUN: megatrain-opt %s --mt-autodiff --mt-schedule --mt-liveness \
// RUN:   --mt-tier="policy=checkpoint+fill device-memory=45056 device-profile=%S/Inputs/tier_spill_profile.json" \
// RUN:   | not grep -q mt.recompute
// RUN: rm -f %t.log
// RUN: megatrain-opt %s --mt-autodiff --mt-schedule --mt-liveness \
// RUN:   --mt-tier="policy=checkpoint+fill device-memory=45056 device-profile=%S/Inputs/tier_spill_profile.json log=%t.log" \
// RUN:   > /dev/null
// RUN: FileCheck %s --check-prefix=LOG < %t.log
// RUN: not megatrain-opt %s --mt-autodiff --mt-schedule --mt-liveness \
// RUN:   --mt-tier="policy=checkpoint+fill device-memory=45056 log=%t.missing/dir/tier.log" \
// RUN:   2>&1 | FileCheck %s --check-prefix=LOGERR

// The tiering log (log=, megatrain-compile --tiering-log) of the same run:
// the budget, the checkpoint plan, the fill's and the spill's steps (the
// spill's search tries all its trades, then a prefix), the entry, the choice.
// LOG:      mt-tier @step: policy checkpoint+fill
// LOG-NEXT: budget 45056 B for the arena
// LOG-NEXT: plan checkpoint: predicted {{[0-9.]+}} ms, compute {{[0-9.]+}} ms
// LOG-NEXT: fill and spill of checkpoint:
// LOG-NEXT:   fill floor prefix all: undoes 2 recomputes and 0 offloads, arena 45056 B, host share 1.000, step {{[0-9.]+}} ms, host 0.000 ms
// LOG-NEXT:   spill base: step {{[0-9.]+}} ms, host 0.000 ms
// LOG-NEXT:   spill prefix all: trades 2 recomputes, step [[STEP:[0-9.]+]] ms, compute {{[0-9.]+}} ms
// LOG:      entry checkpoint+fill: predicted [[STEP]] ms, compute {{[0-9.]+}} ms
// LOG-NEXT: chosen checkpoint+fill
// LOGERR: mt-tier: cannot open the tiering log '{{.*}}missing/dir/tier.log'

// mt-tier's spill (docs/tiering.md "The spill") on the two-layer step of
// tier_fill.mlir: a = x @ w (14 ms on this profile's slow matmul rate),
// b = sigmoid(a) (1 ms), c = a * b; backward reads a and b of both layers.
// The budget, 44 KiB, is the checkpoint plan's arena: the fill keeps
// layer 1's values (its backward comes first) and leaves layer 0's a0 and
// b0 recomputed (15 ms). The link is fast (4 KiB in 41 us): the spill
// offloads a0 and b0 after their defs and prefetches them before layer 0's
// backward, under the compute of layer 1's, and no recompute is left. The
// arena stays within the budget; the host staging holds the two copies.

// CHECK-LABEL: func.func @step()
// CHECK-SAME:    mt.arena_size = 45056
// CHECK-SAME:    mt.device_budget = 45056
// CHECK-SAME:    mt.host_stage_size = 8192
// CHECK-SAME:    mt.tiering_policy = "checkpoint+fill"
// CHECK:         %[[A0:.*]] = mt.matmul %{{.*}}, %{{.*}} {mt.live_end
// CHECK-NEXT:    %[[HA:.*]] = mt.offload %[[A0]]
// CHECK:         %[[B0:.*]] = mt.sigmoid %[[A0]]
// CHECK-NEXT:    %[[HB:.*]] = mt.offload %[[B0]]
// CHECK:         mt.loss
// CHECK:         %[[PA:.*]] = mt.prefetch %[[HA]]
// CHECK:         %[[PB:.*]] = mt.prefetch %[[HB]]
// CHECK:         mt.sigmoid_grad %[[PB]],
// CHECK:         param = "layers.0.w"
// CHECK-NOT:     mt.recompute

// Without the spill the fill's plan stands: layer 0's a0 and b0 rebuilt.
// NOSPILL-LABEL: func.func @step()
// NOSPILL-NOT:     mt.offload
// NOSPILL:         mt.loss
// NOSPILL:         mt.matmul {{.*}}mt.recompute
// NOSPILL-NEXT:    mt.sigmoid {{.*}}mt.recompute
// NOSPILL-NOT:     mt.recompute
// NOSPILL-NOT:     mt.prefetch
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
