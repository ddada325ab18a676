// RUN: megatrain-opt %s --split-input-file --mt-homes="device-memory=17128" | FileCheck %s --check-prefix=ALL
// RUN: megatrain-opt %s --split-input-file --mt-homes="device-memory=4840" | FileCheck %s --check-prefix=SOME
// RUN: megatrain-opt %s --split-input-file --mt-homes="device-memory=17128 state-home=host:a,device" | FileCheck %s --check-prefix=FORCED
// RUN: megatrain-opt %s --split-input-file --mt-homes="device-memory=0 host-memory=30000 disk-memory=0" | FileCheck %s --check-prefix=HOST
// RUN: not megatrain-opt %s --split-input-file --mt-homes="device-memory=0 host-memory=1000" 2>&1 | FileCheck %s --check-prefix=FULL
// RUN: not megatrain-opt %s --split-input-file --mt-homes="state-home=cloud" 2>&1 | FileCheck %s --check-prefix=BADTIER

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
// The HOST run: no device room; on the host each parameter takes master, gradient,
// m, v, each padded to 256 bytes: 16384 + 4096 + 1024 = 21504 <= 30000.
// HOST-LABEL: func.func @three
// HOST-COUNT-3: mt.home = "host"
// HOST-NOT: mt.home = "device"
//
// FULL: mt-homes: the training state does not fit: parameter 'c'
// FULL-SAME: --host-memory
// BADTIER: --state-home 'cloud': the tier is 'cloud', expected device, host or disk
func.func @three() attributes {mt.arena_size = 1000 : i64} {
  %a = mt.param {name = "a", trainable = true} : tensor<1024xf32>
  %b = mt.param {name = "b", trainable = true} : tensor<256xf32>
  %c = mt.param {name = "c", trainable = true} : tensor<64xf32>
  mt.adamw %a {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, param = "a", weight_decay = 0.0 : f64} : tensor<1024xf32>
  mt.adamw %b {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, param = "b", weight_decay = 0.0 : f64} : tensor<256xf32>
  mt.adamw %c {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, param = "c", weight_decay = 0.0 : f64} : tensor<64xf32>
  return
}
