// RUN: megatrain-compile --precision fp32 --state-home host %s --emit=plan-text -o - | FileCheck %s
// RUN: megatrain-compile --precision fp32 --state-home host %models/mlp.onnx --shape x=32x16,labels=32 --emit=plan-text -o - \
// RUN:   | FileCheck %s --check-prefix=MLP


// Emission ends with insertEvents: every dependency between steps on two
// streams gets `record eN` right after the earlier step and `wait eN` right
// before the later one, and the plan passes the verifier (megatrain-compile
// writes nothing otherwise). The schedule below, with its events:
//    0 fetch    copy w -> dev:w           10 host     READ_LOSS
//    1 fetch    record e0                 11 compute  fill (its bytes are not the
//    2 compute  wait e0                               loss's: mt-tier holds the loss
//    3 compute  matmul x, dev:w                       until its copy is predicted done)
//    4 compute  softmax_ce                12 compute  softmax_ce_grad
//    5 compute  record e1                 13 compute  wait e2 (the loss dies at 14:
//    6 d2h      wait e1                               its poison follows the copy)
//    7 d2h      copy loss                 14 compute  matmul dw (reuses the loss's bytes)
//    8 d2h      record e2                 15 compute  record e3
//    9 host     wait e2                   16-18 d2h   wait e3, copy dw -> grad:w, record e4
//                                         19 host     wait e4, 20 host ADAMW
// The ADAMW's write of w needs no event for the fetch that read w: the
// host's wait for d2h already implies it (through compute's wait e0).
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
  mt.adamw %dw {param = "w", lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<8x16xf32>
  return
}

// dev:w dies after the matmul, now step 3 (it was plan step 1 before the
// events moved it).
// CHECK:      name: "dev:w"
// CHECK:        role: PARAMETER_COPY
// CHECK:        last_use_step: 3

// CHECK:      steps {
// CHECK-NEXT:   stream: "fetch"
// CHECK-NEXT:   copy {
// CHECK:          dst: [[DEVW:[0-9]+]]
// CHECK:      steps {
// CHECK-NEXT:   index: 1
// CHECK-NEXT:   stream: "fetch"
// CHECK-NEXT:   record {
// CHECK-NEXT:     event: "e0"
// CHECK:      steps {
// CHECK-NEXT:   index: 2
// CHECK-NEXT:   stream: "compute"
// CHECK-NEXT:   wait {
// CHECK-NEXT:     event: "e0"
// CHECK:      steps {
// CHECK-NEXT:   index: 3
// CHECK-NEXT:   stream: "compute"
// CHECK-NEXT:   kernel {
// CHECK-NEXT:     kernel: "matmul"
// CHECK-NEXT:     inputs: {{[0-9]+}}
// CHECK-NEXT:     inputs: [[DEVW]]

// The loss: compute -> d2h -> host.
// CHECK:        kernel: "softmax_ce"
// CHECK:        stream: "compute"
// CHECK-NEXT:   record {
// CHECK-NEXT:     event: "e1"
// CHECK:        stream: "d2h"
// CHECK-NEXT:   wait {
// CHECK-NEXT:     event: "e1"
// CHECK:        stream: "d2h"
// CHECK-NEXT:   copy {
// CHECK:        stream: "d2h"
// CHECK-NEXT:   record {
// CHECK-NEXT:     event: "e2"
// CHECK:        stream: "host"
// CHECK-NEXT:   wait {
// CHECK-NEXT:     event: "e2"
// CHECK:          kind: READ_LOSS

// The fill right after the loss needs no event: the loss's bytes are held
// while its copy runs. The loss is held until a step whose compute issued
// before it covers the copy (docs/tiering.md "The copy hold"): the fill and
// softmax_ce_grad do not, so it dies at the matmul (a poisoning runtime
// overwrites its bytes right after it), which waits for e2, the copy's read.
// CHECK:        stream: "compute"
// CHECK-NEXT:   kernel {
// CHECK-NEXT:     kernel: "fill"
// CHECK:        kernel: "softmax_ce_grad"
// CHECK:        stream: "compute"
// CHECK-NEXT:   wait {
// CHECK-NEXT:     event: "e2"
// CHECK:        stream: "compute"
// CHECK-NEXT:   kernel {
// CHECK-NEXT:     kernel: "matmul"

// The gradient: compute -> d2h -> host, and nothing else before the update.
// CHECK:        stream: "compute"
// CHECK-NEXT:   record {
// CHECK-NEXT:     event: "e3"
// CHECK:        stream: "d2h"
// CHECK-NEXT:   wait {
// CHECK-NEXT:     event: "e3"
// CHECK:        stream: "d2h"
// CHECK-NEXT:   copy {
// CHECK:        stream: "d2h"
// CHECK-NEXT:   record {
// CHECK-NEXT:     event: "e4"
// CHECK:        stream: "host"
// CHECK-NEXT:   wait {
// CHECK-NEXT:     event: "e4"
// CHECK:      steps {
// CHECK-NEXT:   index: 20
// CHECK-NEXT:   stream: "host"
// CHECK-NEXT:   host_task {
// CHECK-NEXT:     kind: ADAMW
// CHECK-NOT:  steps {

// In the bundled mlp.onnx: its first parameter copy, the record after it (the
// biases read by the first fused matmul_adds are copied before it), compute's
// wait, and the first kernel reading the copy.
// MLP:      steps {
// MLP-NEXT:   stream: "fetch"
// MLP-NEXT:   copy {
// MLP:          dst: [[W:[0-9]+]]
// MLP:        record {
// MLP-NEXT:     event: "[[E:e[0-9]+]]"
// MLP:        stream: "compute"
// MLP-NEXT:   wait {
// MLP-NEXT:     event: "[[E]]"
// MLP:        stream: "compute"
// MLP-NEXT:   kernel {
// MLP-NEXT:     kernel: "{{[a-z_]+}}"
// MLP-NEXT:     inputs: {{[0-9]+}}
// MLP-NEXT:     inputs: [[W]]

// Every parameter at home on the host (--state-home host): the host path of the
// plan; emit_plan_homes.mlir checks the device and disk homes.
