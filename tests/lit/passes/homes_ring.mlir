// RUN: megatrain-opt %s --mt-homes="device-memory=0 host-memory=98304 disk-memory=0" | FileCheck %s --check-prefix=WHOLE
// RUN: megatrain-opt %s --mt-homes="device-memory=0 host-memory=98303 disk-memory=0" | FileCheck %s --check-prefix=SLOTS
// RUN: megatrain-opt %s --mt-homes="device-memory=0" | FileCheck %s --check-prefix=WHOLE
// RUN: megatrain-opt %s --mt-homes="device-memory=12800 host-memory=90112 disk-memory=0" | FileCheck %s --check-prefix=LESS

// The gradient staging ring (mt.grad_stage_size). Six f32 parameters of 1024 elements,
// updated in the order a to f; on the host each takes master, m and v (12288 bytes), and
// its gradient (4096 bytes) passes through the ring. Before the homes are known the ring
// takes four slots of the largest gradient (16384 bytes) out of the host's room; once they
// are placed, it takes a slot for every host gradient (24576) where the room left holds
// the rest, so that the gradients' copies out never wait for the host's updates.
//
// The WHOLE runs: 6 x 12288 + 24576 = 98304 fits (as does an unlimited host): the whole ring.
// WHOLE-LABEL: func.func @six
// WHOLE-SAME:    mt.grad_stage_size = 24576
// WHOLE-COUNT-6: mt.home = "host"
//
// The SLOTS run: a byte less, and the ring keeps its four slots.
// SLOTS-LABEL: func.func @six
// SLOTS-SAME:    mt.grad_stage_size = 16384
// SLOTS-COUNT-6: mt.home = "host"
//
// The LESS run: f (updated last) takes a device home beside the 512-byte arena; the other five
// gradients pass through the ring, all of them once: 5 x 12288 + 20480 = 81920 of 90112.
// LESS-LABEL: func.func @six
// LESS-SAME:    mt.grad_stage_size = 20480
// LESS: mt.param {mt.home = "device"{{.*}}name = "f"
func.func @six() attributes {mt.arena_size = 512 : i64} {
  %a = mt.param {name = "a", trainable = true} : tensor<1024xf32>
  %b = mt.param {name = "b", trainable = true} : tensor<1024xf32>
  %c = mt.param {name = "c", trainable = true} : tensor<1024xf32>
  %d = mt.param {name = "d", trainable = true} : tensor<1024xf32>
  %e = mt.param {name = "e", trainable = true} : tensor<1024xf32>
  %f = mt.param {name = "f", trainable = true} : tensor<1024xf32>
  mt.adamw %a {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, param = "a", weight_decay = 0.0 : f64} : tensor<1024xf32>
  mt.adamw %b {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, param = "b", weight_decay = 0.0 : f64} : tensor<1024xf32>
  mt.adamw %c {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, param = "c", weight_decay = 0.0 : f64} : tensor<1024xf32>
  mt.adamw %d {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, param = "d", weight_decay = 0.0 : f64} : tensor<1024xf32>
  mt.adamw %e {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, param = "e", weight_decay = 0.0 : f64} : tensor<1024xf32>
  mt.adamw %f {beta1 = 9.000000e-01 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, param = "f", weight_decay = 0.0 : f64} : tensor<1024xf32>
  return
}
