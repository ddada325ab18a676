// RUN: megatrain-compile --precision fp32 --state-home host --keep-gradients --no-fuse-pointwise %s --emit=plan-text -o - | FileCheck %s
// RUN: megatrain-compile --precision fp32 --state-home host --keep-gradients --no-fuse-pointwise %s --emit=plan-text --no-memory-reuse | FileCheck %s --check-prefix=NOREUSE

// Plan emission from a training step written by hand (the form --emit=training
// prints): a .mlir input is scheduled, planned and emitted (unfused), with the
// gradient kept in grad:w (--keep-gradients; emit_plan_homes.mlir checks the
// staging ring of the default). The schedule, with
// the events insertEvents adds (tests/lit/compiler/events.mlir checks those), is
//   plan step  0 fetch copy w -> dev:w     13 fill (the loss is held while its
//              1-2 event fetch -> compute      copy runs, so no event here)
//              3 matmul                    14 softmax_ce_grad
//              4 relu                      15 compute wait (the loss dies at 16:
//              5 mul (by the constant)        its poison follows the copy)
//              6 softmax_ce                16 mul
//              7-8 event compute -> d2h    17 relu_grad
//              9 d2h copy -> loss          18 matmul (dw)
//             10-11 event d2h -> host      19-20 event compute -> d2h
//             12 READ_LOSS                 21 d2h copy dw -> grad:w
//                                          22-23 event d2h -> host, 24 ADAMW
// Activations keep the names emission gave them, from the step numbers before
// the events were added (%1.0:matmul is the matmul at step 3).
func.func @main() {
  %x = mt.input {name = "x"} : tensor<4x8xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<8x16xf32>
  %lbl = mt.input {name = "labels"} : tensor<4xi64>
  %c = mt.constant {value = dense<2.0> : tensor<f32>} : tensor<f32>
  %h = mt.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %r = mt.relu %h : tensor<4x16xf32>
  %s = mt.mul %r, %c : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %l = mt.softmax_ce %s, %lbl {ignore_index = -100 : i64, reduction = "mean"} : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
  mt.loss %l : tensor<f32>
  %one = mt.fill {value = 1.0 : f64} : tensor<f32>
  %ds = mt.softmax_ce_grad %s, %lbl, %one {ignore_index = -100 : i64, reduction = "mean"} : (tensor<4x16xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x16xf32>
  %dr = mt.mul %ds, %c : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %dh = mt.relu_grad %h, %dr : tensor<4x16xf32>
  %dw = mt.matmul %x, %dh {transpose_a = true} : (tensor<4x8xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  mt.adamw %dw {param = "w", lr = 2.0e-3 : f64, beta1 = 0.8 : f64, beta2 = 0.99 : f64, eps = 1.0e-6 : f64, weight_decay = 0.1 : f64} : tensor<8x16xf32>
  return
}

// CHECK:       magic: "megatrain.plan"
// CHECK:       format_major: 1
// CHECK:       generator: "megatrain-compile

// The device peak is at the softmax_ce_grad: x (128 B), labels (32), the constant
// (4), h (256), s (256), the loss (4: held while its copy to the host runs), the fill
// (4) and softmax_ce_grad's result (256). The loss dies at the mul after it, which
// therefore waits for its copy (a dead tensor may be poisoned right after its last use).
// The host pool holds w, the loss, grad:w, adam_m:w and adam_v:w: 4 * 512 + 4
// bytes live (the plan simulator counts tensor bytes, not the pool's
// 256-byte rounding).
// CHECK:       predicted_peak {
// CHECK-NEXT:    peak_bytes: 940
// CHECK:       predicted_peak {
// CHECK-NEXT:    pool: 1
// CHECK-NEXT:    peak_bytes: 2052
// CHECK:       optimizer {
// CHECK-NEXT:    lr: 0.002
// CHECK-NEXT:    beta1: 0.8
// CHECK-NEXT:    beta2: 0.99
// CHECK-NEXT:    eps: 1e-06
// CHECK-NEXT:    weight_decay: 0.1
// CHECK:       loss_tensor: 9

// The parameter's fp32 master is on the host, trainable, named after its
// initializer; its device copy dies after the matmul (step 3).
// CHECK:       name: "w"
// CHECK:         role: PARAMETER
// CHECK-NEXT:    buffer {
// CHECK-NEXT:      pool: 1
// CHECK:         source: "w"
// CHECK-NEXT:    trainable: true
// CHECK-NEXT:    last_use_step: -1
// CHECK:       name: "x"
// CHECK:         role: INPUT
// CHECK:         source: "x"
// CHECK-NEXT:    last_use_step: 18
// CHECK:       name: "dev:w"
// CHECK:         role: PARAMETER_COPY
// CHECK:         last_use_step: 3
// CHECK:       name: "%1.0:matmul"
// CHECK:         role: ACTIVATION
// CHECK:         last_use_step: 17

// A constant carries its little-endian bytes (2.0f = 00 00 00 40) and never dies.
// CHECK:       name: "%const0"
// CHECK:         role: CONSTANT
// CHECK:         constant_data: "\000\000\000@"
// CHECK-NEXT:    last_use_step: -1

// The loss value is read by the d2h copy (step 9), not by READ_LOSS, and its
// bytes are held until the mul (step 16), the first kernel step that the compute
// issued before it covers the copy's predicted finish by (mt-tier; docs/tiering.md
// "The copy hold"); that step waits for the copy (e2, step 15), so the loss's
// poison follows it.
// CHECK:       id: 8
// CHECK-NEXT:    name: "%4.0:softmax_ce"
// CHECK:         role: LOSS
// CHECK:         last_use_step: 16
// CHECK:       id: 9
// CHECK-NEXT:    name: "loss"
// CHECK:         role: LOSS_READOUT
// CHECK-NEXT:    buffer {
// CHECK-NEXT:      pool: 1

// CHECK:       id: 15
// CHECK-NEXT:    name: "grad:w"
// CHECK:         role: GRADIENT
// CHECK:       id: 16
// CHECK-NEXT:    name: "adam_m:w"
// CHECK:         role: OPTIMIZER_STATE
// CHECK:       id: 17
// CHECK-NEXT:    name: "adam_v:w"
// CHECK:         role: OPTIMIZER_STATE

// CHECK:       pools {
// CHECK-NEXT:    name: "device"
// CHECK-NEXT:    tier: DEVICE
// CHECK-NEXT:    size_bytes: 2048
// CHECK:       pools {
// CHECK-NEXT:    id: 1
// CHECK-NEXT:    name: "host"
// CHECK-NEXT:    tier: HOST_PINNED
// CHECK-NEXT:    size_bytes: 2304
// CHECK:       streams: "compute"
// CHECK-NEXT:  streams: "h2d"
// CHECK-NEXT:  streams: "d2h"
// CHECK-NEXT:  streams: "host"
// The parameter's fetch runs on a stream of its own (docs/plan.md, "Streams").
// CHECK-NEXT:  streams: "fetch"

// CHECK:       steps {
// CHECK-NEXT:    stream: "fetch"
// CHECK-NEXT:    copy {
// CHECK-NEXT:      dst: 2
// CHECK-NEXT:    }
// CHECK-NEXT:    source_op: "{{.*}}emit_plan.mlir:24:8"
// Elided default-valued flags are still spelled out for the kernel.
// CHECK:         index: 3
// CHECK-NEXT:    stream: "compute"
// CHECK-NEXT:    kernel {
// CHECK-NEXT:      kernel: "matmul"
// CHECK-NEXT:      inputs: 1
// CHECK-NEXT:      inputs: 2
// CHECK-NEXT:      outputs: 3
// CHECK-NEXT:      attributes {
// CHECK-NEXT:        name: "transpose_a"
// CHECK-NEXT:        i: 0
// CHECK:             name: "transpose_b"
// CHECK-NEXT:        i: 0
// CHECK:         index: 6
// CHECK:           kernel: "softmax_ce"
// CHECK:             name: "ignore_index"
// CHECK-NEXT:        i: -100
// CHECK:             name: "reduction"
// CHECK-NEXT:        s: "mean"
// CHECK:         index: 9
// CHECK-NEXT:    stream: "d2h"
// CHECK-NEXT:    copy {
// CHECK-NEXT:      src: 8
// CHECK-NEXT:      dst: 9
// CHECK:         index: 12
// CHECK-NEXT:    stream: "host"
// CHECK-NEXT:    host_task {
// CHECK-NEXT:      kind: READ_LOSS
// CHECK-NEXT:      tensors: 9
// CHECK:         index: 13
// CHECK:           kernel: "fill"
// CHECK:             name: "value"
// CHECK-NEXT:        f: 1
// CHECK:         index: 21
// CHECK-NEXT:    stream: "d2h"
// CHECK-NEXT:    copy {
// CHECK-NEXT:      src: 14
// CHECK-NEXT:      dst: 15
// CHECK:         index: 24
// CHECK-NEXT:    stream: "host"
// CHECK-NEXT:    host_task {
// CHECK-NEXT:      kind: ADAMW
// CHECK-NEXT:      tensors: 0
// CHECK-NEXT:      tensors: 15
// CHECK-NEXT:      tensors: 16
// CHECK-NEXT:      tensors: 17
// CHECK-NOT:   steps {

// Without reuse the arena is the sum of the aligned sizes (11 x 256 + 2 x 512).
// The predicted peak counts live bytes over predicted time; it is the same
// 940 bytes as with reuse, where the loss is held over the softmax_ce_grad too.
// NOREUSE:       peak_bytes: 940
// NOREUSE:       name: "device"
// NOREUSE-NEXT:  tier: DEVICE
// NOREUSE-NEXT:  size_bytes: 3840

// Every parameter at home on the host (--state-home host): the host path of the
// plan; emit_plan_homes.mlir checks the device and disk homes.
