// RUN: megatrain-opt %s --mt-homes="device-memory=14056 state-home=visit:^b$" | FileCheck %s --check-prefix=VISIT
// RUN: not megatrain-opt %s --mt-homes="device-memory=14056 state-home=visit" 2>&1 | FileCheck %s --check-prefix=ALL
// RUN: not megatrain-opt %s --mt-homes="device-memory=5000 state-home=visit:^b$" 2>&1 | FileCheck %s --check-prefix=NOROOM
// RUN: megatrain-opt %s --mt-homes="device-memory=14056 state-home=visit-master:^b$" | FileCheck %s --check-prefix=MASTER
// RUN: not megatrain-opt %s --mt-homes="device-memory=5200 state-home=visit-master:^b$" 2>&1 | FileCheck %s --check-prefix=NOMOMENTS

// Update visits (docs/tiering.md, "Update visits"): `state-home visit:REGEX` makes the matching
// trainable parameters host homes whose update visits the device. The ring holds 4 slots of the
// largest visitor's master, m and v (b: 3 x 1024 bytes, no compute copy), 12288 bytes, and comes
// out of the device's room before any home. The VISIT run: 14056 less the 1000-byte arena and the
// ring leaves 768, which c (updated last, 3 x 256) takes as a device home; a stays on the host
// without visiting, and its gradient alone passes through the host ring.
// VISIT-LABEL: func.func @step
// VISIT-SAME: mt.grad_stage_size = 4096
// VISIT-SAME: mt.update_ring_size = 12288
// VISIT: mt.param {mt.home = "host", name = "a"
// VISIT: mt.param {mt.home = "host", mt.update = "visit", name = "b"
// VISIT: mt.param {mt.home = "device", name = "c"
//
// The ALL run (every parameter visits): the ring is 4 slots of a's 3 x 4096 bytes, 49152, more
// than the 13056 bytes beside the arena.
// ALL: error: mt-homes: the ring of update visits (48.0 KiB, 4 slots of the largest visiting
//
// The NOROOM run: 5000 bytes do not hold b's ring of 12288 beside the arena.
// NOROOM: error: mt-homes: the ring of update visits (12.0 KiB, 4 slots of the largest visiting parameter's master, moments and compute copy) finds no room on the device
//
// The MASTER run (`visit-master`): b's moments stay on the device (mt.moments = "device") and
// only its master visits: the ring is 4 slots of 1024 bytes, and the forced home takes b's
// moments (2 x 1024) from the device's room; c still finds its 768 there.
// MASTER-LABEL: func.func @step
// MASTER-SAME: mt.update_ring_size = 4096
// MASTER: mt.param {mt.home = "host", name = "a"
// MASTER: mt.param {mt.home = "host", mt.moments = "device", mt.update = "visit", name = "b"
// MASTER: mt.param {mt.home = "device", name = "c"
//
// The NOMOMENTS run: 5200 less the arena and the ring leaves 104 bytes, short of b's moments.
// NOMOMENTS: error: mt-homes: --state-home forces 'b' to the host with its moments on the device (visit-master), which has no room left: device 104 B of
func.func @step() attributes {mt.arena_size = 1000 : i64} {
  %a = mt.param {name = "a", trainable = true} : tensor<1024xf32>
  %b = mt.param {name = "b", trainable = true} : tensor<256xf32>
  %c = mt.param {name = "c", trainable = true} : tensor<64xf32>
  mt.adamw %a {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, param = "a", weight_decay = 0.0 : f64} : tensor<1024xf32>
  mt.adamw %b {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, param = "b", weight_decay = 0.0 : f64} : tensor<256xf32>
  mt.adamw %c {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, param = "c", weight_decay = 0.0 : f64} : tensor<64xf32>
  return
}
