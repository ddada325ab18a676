// RUN: megatrain-opt %s --mt-homes="device-memory=5096" | FileCheck %s --check-prefix=VISIT
// RUN: megatrain-opt %s --mt-homes="device-memory=6120" | FileCheck %s --check-prefix=ROOMY
// RUN: megatrain-opt %s --mt-homes="device-memory=6120 all-visit=true" | FileCheck %s --check-prefix=ALL
// RUN: megatrain-opt %s --mt-homes="device-memory=2000" | FileCheck %s --check-prefix=NORING

// Accumulator visits (docs/tiering.md, "Accumulator visits"): mt-tier marked b (1024 bytes of
// accumulator) and c (256) to visit the device through a ring of 3072 bytes (3 slots of b's);
// a's accumulator (4096) is kept whole. The arena is 1000 bytes; the ring comes out of the
// device's room first. The VISIT run: 5096 leaves 1024 beside arena and ring: c (updated last) takes
// it as a device home, whose sum is the device's; a and b stay on the host, a's 4096 finds no
// device room (summed on the host), b visits.
// VISIT-LABEL: func.func @micro
// VISIT-SAME: mt.visit_ring_size = 3072
// VISIT: mt.param {mt.home = "host"{{.*}}name = "a"
// VISIT: mt.param {mt.accumulate = "visit", mt.home = "host"{{.*}}name = "b"
// VISIT: mt.param {mt.home = "device"{{.*}}name = "c"
//
// The ROOMY run has 1024 more, which b's home (4096) does not fit but its accumulator does: a visitor
// takes device room left once the homes are placed, and then keeps its sum whole. With no
// visitor left the ring's room comes back, where a's accumulator (4096) still does not fit.
// ROOMY-LABEL: func.func @micro
// ROOMY-NOT: mt.visit_ring_size
// ROOMY: mt.param {mt.home = "host", name = "a"
// ROOMY: mt.param {mt.accumulate = "device", mt.home = "host"{{.*}}name = "b"
// ROOMY: mt.param {mt.home = "device"{{.*}}name = "c"
//
// The ALL run (all-visit, tests): b visits even where the room would hold its sum.
// ALL-LABEL: func.func @micro
// ALL-SAME: mt.visit_ring_size = 3072
// ALL: mt.param {mt.accumulate = "visit", mt.home = "host"{{.*}}name = "b"
//
// The NORING run: 1000 bytes beside the arena do not hold the ring: nothing visits, and the marks and
// the ring's size go.
// NORING-LABEL: func.func @micro
// NORING-NOT: visit
func.func @micro() attributes {mt.arena_size = 1000 : i64, mt.microbatches = 2 : i64, mt.visit_ring_size = 3072 : i64} {
  %a = mt.param {name = "a", trainable = true} : tensor<1024xf32>
  %b = mt.param {mt.accumulate = "visit", name = "b", trainable = true} : tensor<256xf32>
  %c = mt.param {mt.accumulate = "visit", name = "c", trainable = true} : tensor<64xf32>
  mt.adamw %a {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, param = "a", weight_decay = 0.0 : f64} : tensor<1024xf32>
  mt.adamw %b {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, param = "b", weight_decay = 0.0 : f64} : tensor<256xf32>
  mt.adamw %c {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, param = "c", weight_decay = 0.0 : f64} : tensor<64xf32>
  return
}
