// RUN: megatrain-opt %s --mt-schedule --mt-liveness \
// RUN:   --mt-tier="policy=keep fill=false device-memory=28672 device-profile=%S/Inputs/tier_profile.json" \
// RUN:   --mt-plan-memory | FileCheck %s --check-prefix=ALL
// RUN: megatrain-opt %s --mt-schedule --mt-liveness \
// RUN:   --mt-tier="policy=keep fill=false device-memory=24576 device-profile=%S/Inputs/tier_profile.json" \
// RUN:   --mt-plan-memory | FileCheck %s --check-prefix=SOME

// mt-tier's last stage keeps the copy holds (docs/tiering.md, "The copy
// hold") that fit the budget, best first. %a (4 KiB) and %b (8 KiB) are
// copied out (kept outputs) over the 1,024,000 B/s link of
// Inputs/tier_profile.json: 5 ms and 9 ms, one after the other, so %b's copy
// is done only 12 ms after the tanh that follows it could write into its
// bytes (%a's, 5 ms): %b saves more wait per byte held. Held, %a lives to
// step 10 and %b to step 13, the first tanhs issued after their copies are
// done; the arena is then 28 KiB.
// ALL-LABEL: func.func @step()
// ALL-SAME:    mt.arena_size = 28672
// ALL:         mt.tanh %{{.*}} {mt.live_end = array<i64: 10>, {{.*}}mt.step = 1 : i64} : tensor<1024xf32>
// ALL:         mt.tanh %{{.*}} {mt.live_end = array<i64: 13>, {{.*}}mt.step = 4 : i64} : tensor<2048xf32>

// With 24 KiB, both holds do not fit: %b's, the better one per byte, is kept
// and %a dies at its copy (step 2), within the budget. Without the partial
// holds, neither would be held.
// SOME-LABEL: func.func @step()
// SOME-SAME:    mt.arena_size = 24576
// SOME:         mt.tanh %{{.*}} {mt.live_end = array<i64: 2>, {{.*}}mt.step = 1 : i64} : tensor<1024xf32>
// SOME:         mt.tanh %{{.*}} {mt.live_end = array<i64: 13>, {{.*}}mt.step = 4 : i64} : tensor<2048xf32>
func.func @step() {
  %x = mt.input {name = "x"} : tensor<1024xf32>
  %y = mt.input {name = "y"} : tensor<2048xf32>
  %a = mt.tanh %x : tensor<1024xf32>
  mt.output %a {name = "a"} : tensor<1024xf32>
  %b = mt.tanh %y : tensor<2048xf32>
  mt.output %b {name = "b"} : tensor<2048xf32>
  %c = mt.tanh %b : tensor<2048xf32>
  %d = mt.tanh %c : tensor<2048xf32>
  %e = mt.tanh %d : tensor<2048xf32>
  %f = mt.tanh %e : tensor<2048xf32>
  %g = mt.tanh %f : tensor<2048xf32>
  %h = mt.tanh %g : tensor<2048xf32>
  %s = mt.reduce_sum %h {axes = array<i64: 0>, keepdims = false} : (tensor<2048xf32>) -> tensor<f32>
  mt.loss %s : tensor<f32>
  return
}
