// RUN: not timeout 120 megatrain-opt %s --mt-autodiff --mt-microbatch=count=2 --mt-schedule \
// RUN:   --mt-liveness --mt-tier="policy=checkpoint+greedy device-memory=40960 device-profile=%S/Inputs/homes_no_launch_profile.json" \
// RUN:   2>&1 | FileCheck %s --check-prefix=GREEDY
// RUN: timeout 120 megatrain-opt %s --mt-autodiff --mt-microbatch=count=2 --mt-schedule --mt-liveness \
// RUN:   --mt-tier="policy=auto device-memory=49408 device-profile=%S/Inputs/homes_no_launch_profile.json" \
// RUN:   | FileCheck %s --check-prefix=AUTO

// The greedy's rewrites can go round in a cycle (docs/tiering.md, "The passes"). On two
// micro-batches of this two-layer step within 40 KiB, each recompute the greedy takes frees
// 4 KiB at the peak and adds clones that peak again elsewhere: the lowest peak stays at
// 44 KiB while the step grows by a few ops a rewrite, without end (mt-tier never
// finished here, and neither did policy auto within 49,408 bytes, whose portfolio runs
// the greedy on the same step). The greedy now stops once its lowest peak has not fallen
// for as many rewrites as the step had ops (64 at the least): within 40 KiB the plan is
// infeasible, with the smallest budget it reached; within 49,408 bytes auto chooses a
// plan. `timeout` turns a return of the cycle into a failure instead of a hung run.
// GREEDY: error: mt-tier: device budget 40.0 KiB (40960 bytes) cannot be met: the smallest budget that fits is 44.0 KiB (45056 bytes)
// AUTO-LABEL: func.func @step()
// AUTO-SAME:    mt.device_budget = 49408
// AUTO-SAME:    mt.tiering_policy = "auto (auto+fill)"
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
