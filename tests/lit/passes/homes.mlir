// RUN: megatrain-opt %s --split-input-file --mt-homes="device-memory=17128" | FileCheck %s --check-prefix=ALL
// RUN: megatrain-opt %s --split-input-file --mt-homes="device-memory=4840" | FileCheck %s --check-prefix=SOME
// RUN: megatrain-opt %s --split-input-file --mt-homes="device-memory=17128 state-home=host:a,device" | FileCheck %s --check-prefix=FORCED
// RUN: megatrain-opt %s --split-input-file --mt-homes="device-memory=0 host-memory=30000 disk-memory=0" | FileCheck %s --check-prefix=HOST
// RUN: not megatrain-opt %s --split-input-file --mt-homes="device-memory=0 host-memory=1000" 2>&1 | FileCheck %s --check-prefix=FULL
// RUN: not megatrain-opt %s --split-input-file --mt-homes="state-home=cloud" 2>&1 | FileCheck %s --check-prefix=BADTIER
// RUN: megatrain-opt %s --split-input-file --mt-homes="device-memory=0 host-memory=30000 disk-memory=0 keep-gradients=true" | FileCheck %s --check-prefix=KEEP
// RUN: megatrain-opt %s --split-input-file --mt-homes="device-memory=3048" | FileCheck %s --check-prefix=MICRO
// RUN: megatrain-opt %s --split-input-file --mt-homes="device-memory=2280 device-profile=%S/Inputs/homes_no_launch_profile.json" | FileCheck %s --check-prefix=ACCFIRST
// RUN: megatrain-opt %s --split-input-file --mt-homes="device-memory=2280 device-profile=%S/Inputs/homes_fast_host_profile.json" | FileCheck %s --check-prefix=HOMEFIRST

// Three f32 parameters: a 1024 elements (state on the device: master, m, v =
// 12288 bytes), b 256 (3072), c 64 (768); updated in the order a, b, c. The
// arena is 1000 bytes.
//
// The ALL run: the device holds 1000 + 12288 + 3072 + 768 = 17128: every home is device.
// ALL-LABEL: func.func @three
// ALL-SAME:    mt.device_capacity = 17128
// ALL-COUNT-3: mt.home = "device"
//
// The SOME run: 4840 leaves 3840 beside the arena: c (updated last) and b fit, a goes
// to the unlimited host.
// SOME-LABEL: func.func @three
// SOME: mt.param {{.*}}mt.home = "host"{{.*}}name = "a"
// SOME: mt.param {{.*}}mt.home = "device"{{.*}}name = "b"
// SOME: mt.param {{.*}}mt.home = "device"{{.*}}name = "c"
//
// The FORCED run: the first matching --state-home wins: a to the host, b and c to the device.
// FORCED-LABEL: func.func @three
// FORCED: mt.param {{.*}}mt.home = "host"{{.*}}name = "a"
// FORCED: mt.param {{.*}}mt.home = "device"{{.*}}name = "b"
// FORCED: mt.param {{.*}}mt.home = "device"{{.*}}name = "c"
//
// The HOST run: no device room; on the host each parameter takes master, m, v, each
// padded to 256 bytes (12288 + 3072 + 768), and the gradients pass through the staging
// ring: four of the largest (4096 bytes), at most all of them once (4096 + 1024 + 256 =
// 5376); 16128 + 5376 = 21504 <= 30000.
// HOST-LABEL: func.func @three
// HOST-SAME:    mt.grad_stage_size = 5376
// HOST-COUNT-3: mt.home = "host"
// HOST-NOT: mt.home = "device"
//
// The KEEP run (keep-gradients, for clipping): master, gradient, m, v on the host (21504),
// no ring.
// KEEP-LABEL: func.func @three
// KEEP-SAME:    mt.grad_stage_size = 0
// KEEP-COUNT-3: mt.home = "host"
//
// FULL: mt-homes: the training state does not fit: parameter 'c'
// FULL-SAME: --host-memory
// BADTIER: --state-home 'cloud': the tier is 'cloud', expected device, host, disk, visit or visit-master
func.func @three() attributes {mt.arena_size = 1000 : i64} {
  %a = mt.param {name = "a", trainable = true} : tensor<1024xf32>
  %b = mt.param {name = "b", trainable = true} : tensor<256xf32>
  %c = mt.param {name = "c", trainable = true} : tensor<64xf32>
  mt.adamw %a {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, param = "a", weight_decay = 0.0 : f64} : tensor<1024xf32>
  mt.adamw %b {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, param = "b", weight_decay = 0.0 : f64} : tensor<256xf32>
  mt.adamw %c {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, param = "c", weight_decay = 0.0 : f64} : tensor<64xf32>
  return
}

// -----

// With micro-batches a device home also keeps its accumulator (16 bytes an element), and a
// host home accumulates on the device where the device room left holds it. The MICRO run:
// 3048 leaves 2048 beside the arena: c (updated last) takes 1024 as a device home; b's
// accumulator (1024) takes the rest, so b stays a host home that accumulates on the device;
// a's (4096) does not fit: a accumulates on the host.
// MICRO-LABEL: func.func @micro
// MICRO: mt.param {{.*}}mt.home = "host"{{.*}}name = "a"
// MICRO-NOT: mt.accumulate
// MICRO: mt.param {mt.accumulate = "device", mt.home = "host"{{.*}}name = "b"
// MICRO: mt.param {mt.home = "device"{{.*}}name = "c"
//
// With 1280 bytes beside the arena, the accumulators and the homes compete. Under the
// default (H200) figures with no fixed cost to a launch (which these tiny copies would
// be all of), a byte of accumulator saves more per step than a byte of home (one part's
// copy out and the host's sum of it, 51 ps a byte, against the host AdamW, two fetches
// and a copy out over the 12 bytes of master and moments, 42 ps): the
// accumulators of c and b take 256 + 1024 first, and no home fits beside them. Under a
// profile whose host and links are free but whose host AdamW is slow, the home of c
// (1024) comes first, and b's accumulator no longer fits.
// ACCFIRST-LABEL: func.func @micro
// ACCFIRST: mt.param {mt.home = "host"{{.*}}name = "a"
// ACCFIRST: mt.param {mt.accumulate = "device", mt.home = "host"{{.*}}name = "b"
// ACCFIRST: mt.param {mt.accumulate = "device", mt.home = "host"{{.*}}name = "c"
// HOMEFIRST-LABEL: func.func @micro
// HOMEFIRST: mt.param {mt.home = "host"{{.*}}name = "a"
// HOMEFIRST: mt.param {mt.home = "host"{{.*}}name = "b"
// HOMEFIRST: mt.param {mt.home = "device"{{.*}}name = "c"
func.func @micro() attributes {mt.arena_size = 1000 : i64, mt.microbatches = 2 : i64} {
  %a = mt.param {name = "a", trainable = true} : tensor<1024xf32>
  %b = mt.param {name = "b", trainable = true} : tensor<256xf32>
  %c = mt.param {name = "c", trainable = true} : tensor<64xf32>
  mt.adamw %a {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, param = "a", weight_decay = 0.0 : f64} : tensor<1024xf32>
  mt.adamw %b {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, param = "b", weight_decay = 0.0 : f64} : tensor<256xf32>
  mt.adamw %c {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, param = "c", weight_decay = 0.0 : f64} : tensor<64xf32>
  return
}
