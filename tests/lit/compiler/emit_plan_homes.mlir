// RUN: megatrain-compile --precision fp32 %s --emit=plan-text -o - --state-home device | FileCheck %s --check-prefix=DEVICE
// RUN: megatrain-compile --precision bf16 %s --emit=plan-text -o - --state-home device | FileCheck %s --check-prefix=BF16
// RUN: megatrain-compile --precision fp32 %s --emit=plan-text -o - --state-home disk --disk-memory 1MiB | FileCheck %s --check-prefix=DISK
// RUN: not megatrain-compile --precision fp32 %s -o %t.plan --state-home cloud 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not megatrain-compile --precision fp32 %s -o %t.plan --state-home disk 2>&1 | FileCheck %s --check-prefix=NODISK

// State homes in the plan (docs/tiering.md "State homes"), on emit_plan.mlir's step.
//
// With --state-home device, w, adam_m:w and adam_v:w in the device_state pool (pool 2: there is no
// staging pool), no fetch step (the fp32 kernels read the master w, tensor 0, in place: no
// dev:w), no grad:w, and ADAMW on compute reading the arena's gradient (the matmul's result);
// format 1.7.
// DEVICE:       format_minor: 7
// DEVICE:       device_capacity_bytes:
// DEVICE:       name: "w"
// DEVICE:       pool: 2
// DEVICE-NOT:   name: "dev:w"
// DEVICE-NOT:   name: "grad:w"
// DEVICE:       name: "adam_m:w"
// DEVICE:       pool: 2
// DEVICE:       name: "device_state"
// DEVICE-NEXT:  tier: DEVICE
// DEVICE-NEXT:  size_bytes: 1536
// DEVICE-NOT:   copy {
// DEVICE:       kernel: "matmul"
// DEVICE-NEXT:  inputs: 1
// DEVICE-NEXT:  inputs: 0
// DEVICE:         index: 12
// DEVICE-NEXT:    stream: "compute"
// DEVICE-NEXT:    host_task {
// DEVICE-NEXT:      kind: ADAMW
// DEVICE-NEXT:      tensors: 0
//
// bf16: the fetch of w is a `cast` kernel from the device master into dev:w, and the device
// keeps no compute copy.
// BF16:         name: "dev:w"
// BF16-NEXT:    shape: 8
// BF16-NEXT:    shape: 16
// BF16-NEXT:    dtype: BF16
// BF16-NOT:     name: "compute:w"
// BF16:         kernel: "cast"
// BF16-NEXT:    inputs: 0
//
// With --state-home disk, adam_m:w and adam_v:w in the DISK pool (pool 2, 4 KiB each), their
// staging in disk_stage (pool 3); copies on the disk stream before and after the
// host ADAMW, which updates the staging and reads its gradient from the staging ring
// (grad_stage:w in pool grad_stage, format 1.9).
// DISK:         format_minor: 9
// DISK:         name: "stage_m:w"
// DISK-NEXT:    shape: 8
// DISK-NEXT:    shape: 16
// DISK-NEXT:    dtype: F32
// DISK-NEXT:    role: STATE_STAGE
// DISK:         id: [[RING:14]]
// DISK-NEXT:    name: "grad_stage:w"
// DISK-NEXT:    shape: 8
// DISK-NEXT:    shape: 16
// DISK-NEXT:    dtype: F32
// DISK-NEXT:    role: STATE_STAGE
// DISK:         name: "disk"
// DISK-NEXT:    tier: DISK
// DISK-NEXT:    size_bytes: 8192
// DISK:         name: "disk_stage"
// DISK-NEXT:    tier: HOST_PINNED
// DISK:         name: "grad_stage"
// DISK-NEXT:    tier: HOST_PINNED
// DISK-NEXT:    size_bytes: 512
// DISK:         streams: "disk"
// DISK:         stream: "disk"
// DISK-NEXT:    copy {
// DISK:         kind: ADAMW
// DISK-NEXT:    tensors: 0
// DISK-NEXT:    tensors: [[RING]]
// DISK:         src: 3
// DISK-NEXT:      dst: 1
//
// BAD: --state-home 'cloud': the tier is 'cloud', expected device, host, disk, visit or visit-master
// NODISK: mt-homes: --state-home forces 'w' to disk, which has no room left
func.func @main() {
  %x = mt.input {name = "x"} : tensor<4x8xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<8x16xf32>
  %lbl = mt.input {name = "labels"} : tensor<4xi64>
  %h = mt.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %l = mt.softmax_ce %h, %lbl {ignore_index = -100 : i64, reduction = "mean"} : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
  mt.loss %l : tensor<f32>
  %one = mt.fill {value = 1.0 : f64} : tensor<f32>
  %dh = mt.softmax_ce_grad %h, %lbl, %one {ignore_index = -100 : i64, reduction = "mean"} : (tensor<4x16xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x16xf32>
  %dw = mt.matmul %x, %dh {transpose_a = true} : (tensor<4x8xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  mt.adamw %dw {param = "w", lr = 2.0e-3 : f64, beta1 = 0.8 : f64, beta2 = 0.99 : f64, eps = 1.0e-6 : f64, weight_decay = 0.1 : f64} : tensor<8x16xf32>
  return
}
