// RUN: rm -f %t.log
// RUN: megatrain-opt %s --mt-autodiff --mt-microbatch=count=2 --mt-schedule --mt-liveness \
// RUN:   --mt-tier="policy=checkpoint+fill device-memory=49408 device-profile=%S/Inputs/tier_spill_profile.json log=%t.log" \
// RUN:   | FileCheck %s
// RUN: FileCheck %s --check-prefix=LOG < %t.log

// The spill with micro-batches (docs/tiering.md, "The spill"): layer 0 of a
// two-layer step makes a and b by two products of one size (the same
// compute saved per second of h2d), read again by the mul's backward; on
// the fast-link profile of tier_spill.mlir the fill leaves them recomputed
// in micro-batch 0's backward, and one of them in micro-batch 1's (where
// the mean of the losses, read right after its forward, sits between the
// products and their backward, the fill keeps b): three trades of equal
// worth. The tiering log counts each prefix's trades per micro-batch: the
// order breaks ties by position, so the search's prefix of two takes both
// of micro-batch 0's. The search keeps all three: no recompute is left.
// LOG:      fill and spill of checkpoint:
// LOG:        spill prefix all: trades 3 recomputes (per micro-batch: 2, 1), step
// LOG:        spill prefix 2: trades 2 recomputes (per micro-batch: 2, 0), step
// LOG:      chosen checkpoint+fill

// CHECK-LABEL: func.func @step()
// CHECK-SAME:    mt.tiering_policy = "checkpoint+fill"
// CHECK:         %[[A:.*]] = mt.matmul %{{.*}}, %{{.*}} {mt.live_end
// CHECK-NEXT:    mt.offload %[[A]]
// CHECK:         %[[B:.*]] = mt.matmul %{{.*}}, %{{.*}} {mt.live_end
// CHECK-NEXT:    mt.offload %[[B]]
// CHECK:         mt.prefetch
// CHECK:         mt.grad_part {{.*}}index = 0
// CHECK:         mt.input {{.*}}name = "x@1"
// CHECK:         %[[A1:.*]] = mt.matmul %{{.*}}, %{{.*}} {mt.live_end
// CHECK-NEXT:    mt.offload %[[A1]]
// CHECK:         %[[B1:.*]] = mt.matmul %{{.*}}, %{{.*}} {mt.live_end
// CHECK-NEXT:    mt.mul %[[A1]], %[[B1]]
// CHECK:         mt.loss
// CHECK:         mt.prefetch
// CHECK-NOT:     mt.prefetch
// CHECK-NOT:     mt.recompute
// CHECK:         return
func.func @step() {
  %x = mt.input {name = "x"} : tensor<16x64xf32>
  %w0 = mt.param {name = "layers.0.w", trainable = true} : tensor<64x64xf32>
  %v0 = mt.param {name = "layers.0.v", trainable = true} : tensor<64x64xf32>
  %w1 = mt.param {name = "layers.1.w", trainable = true} : tensor<64x64xf32>
  %a0 = mt.matmul %x, %w0 : (tensor<16x64xf32>, tensor<64x64xf32>) -> tensor<16x64xf32>
  %b0 = mt.matmul %x, %v0 : (tensor<16x64xf32>, tensor<64x64xf32>) -> tensor<16x64xf32>
  %c0 = mt.mul %a0, %b0 : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  %a1 = mt.matmul %c0, %w1 : (tensor<16x64xf32>, tensor<64x64xf32>) -> tensor<16x64xf32>
  %b1 = mt.sigmoid %a1 : tensor<16x64xf32>
  %c1 = mt.mul %a1, %b1 : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  %s = mt.reduce_sum %c1 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<16x64xf32>) -> tensor<f32>
  mt.loss %s : tensor<f32>
  return
}
