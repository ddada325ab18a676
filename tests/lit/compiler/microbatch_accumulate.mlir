// RUN: megatrain-compile --precision fp32 --state-home host --keep-gradients %s --emit=plan-text -o - | FileCheck %s
// RUN: sed '/mt.grad_part/d' %s > %t.noparts.mlir
// RUN: not megatrain-compile --precision fp32 --state-home host %t.noparts.mlir -o %t.plan 2>&1 | FileCheck %s --check-prefix=NOPARTS
// RUN: sed 's/mt.adamw %last {param = "w",.*}/mt.param_grad %last {param = "w"}/' %s > %t.noupdate.mlir
// RUN: not megatrain-compile --precision fp32 --state-home host %t.noupdate.mlir -o %t.plan 2>&1 | FileCheck %s --check-prefix=NOUPDATE
// RUN: sed 's/count = 2 : i64/count = 3 : i64/' %s > %t.count.mlir
// RUN: not megatrain-compile --precision fp32 --state-home host %t.count.mlir -o %t.plan 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: megatrain-compile --precision fp32 --state-home host --keep-gradients %models/tiny_transformer.onnx --shape input_ids=2x64 \
// RUN:   --loss next-token-ce --microbatches 3 --emit=plan-text -o - > %t.three
// RUN: grep -c 'kind: ACCUMULATE' %t.three > %t.accumulates
// RUN: grep -c 'kind: ADAMW' %t.three > %t.updates
// RUN: grep -c 'name: "grad_stage:' %t.three > %t.stages
// RUN: python3 -c "import sys; a, u, s = (int(open(p).read()) for p in sys.argv[1:]); assert a == 2 * u and s == a and u > 0, (a, u, s)" %t.accumulates %t.updates %t.stages
// RUN: python3 %S/Inputs/staging_war.py %t.three | FileCheck %s --check-prefix=WAR
// RUN: megatrain-compile --precision fp32 --state-home host %models/tiny_transformer.onnx --shape input_ids=2x64 --loss next-token-ce \
// RUN:   --emit=plan-text -o - > %t.one
// RUN: not grep -q 'ACCUMULATE\|grad_part\|name: "grad:' %t.one


// A training step of two micro-batches as mt-microbatch and mt-adamw leave it
// (the form --emit=training prints), with the accumulator kept on the host
// (--keep-gradients: no device accumulator): micro-batch 0's gradient part of
// w goes to the host gradient grad:w, micro-batch 1's (the update's) to the
// gradient staging ring's grad_stage:w, added by ACCUMULATE on the host before
// the ADAMW.
func.func @main() attributes {mt.microbatches = 2 : i64} {
  %x = mt.input {name = "x"} : tensor<4x8xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<8x16xf32>
  %h = mt.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %l = mt.reduce_sum %h {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x16xf32>) -> tensor<f32>
  %dw = mt.matmul %x, %h {transpose_a = true} : (tensor<4x8xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %first = mt.scale %dw {alpha = 5.000000e-01 : f64} : tensor<8x16xf32>
  mt.grad_part %first {count = 2 : i64, index = 0 : i64, param = "w"} : tensor<8x16xf32>
  %x1 = mt.input {name = "x@1"} : tensor<4x8xf32>
  %w1 = mt.param {name = "w", trainable = true} : tensor<8x16xf32>
  %h1 = mt.matmul %x1, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %l1 = mt.reduce_sum %h1 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x16xf32>) -> tensor<f32>
  %dw1 = mt.matmul %x1, %h1 {transpose_a = true} : (tensor<4x8xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %last = mt.scale %dw1 {alpha = 5.000000e-01 : f64} : tensor<8x16xf32>
  mt.adamw %last {param = "w", lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<8x16xf32>
  %ls = mt.add %l, %l1 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %lm = mt.scale %ls {alpha = 5.000000e-01 : f64} : tensor<f32>
  mt.loss %lm : tensor<f32>
  return
}

// N = 3 from ONNX: two ACCUMULATE and two grad_stage ring tensors per update, and every copy
// into ring bytes an earlier part used waits for the ACCUMULATE that read them (write after
// read on the host bytes). Without --microbatches there is neither.
// WAR: ok: {{[1-9][0-9]*}} reuses of staging bytes wait for the host task that read them

// NOPARTS: mt.adamw of 'w' in a function of micro-batches has no earlier mt.grad_part
// NOUPDATE: the gradient parts of 'w' reach no mt.adamw (run mt-adamw after mt-microbatch)
// COUNT: mt.adamw of 'w' comes after 1 of its 2 earlier mt.grad_part

// ACCUMULATE is a minor-2 host task.
// CHECK:       format_minor: 9
// CHECK:       microbatches: 2
// The tensor ids follow from the step above: grad:w is 8, grad_stage:w 16.
// CHECK:       id: [[GRAD:8]]
// CHECK-NEXT:  name: "grad:w"
// CHECK-NEXT:  shape: 8
// CHECK-NEXT:  shape: 16
// CHECK-NEXT:  dtype: F32
// CHECK-NEXT:  role: GRADIENT
// CHECK-NEXT:  buffer {
// CHECK-NEXT:    pool: 1
// CHECK:       id: [[PART:16]]
// CHECK-NEXT:  name: "grad_stage:w"
// CHECK-NEXT:  shape: 8
// CHECK-NEXT:  shape: 16
// CHECK-NEXT:  dtype: F32
// CHECK-NEXT:  role: STATE_STAGE
// CHECK-NEXT:  buffer {
// CHECK-NEXT:    pool: 2
// CHECK:       name: "grad_stage"
// CHECK-NEXT:  tier: HOST_PINNED

// Micro-batch 0's part is copied into grad:w right after its scale ...
// CHECK:       kernel: "scale"
// CHECK-NEXT:  inputs: {{[0-9]+}}
// CHECK-NEXT:  outputs: [[P0:[0-9]+]]
// CHECK:       copy {
// CHECK-NEXT:    src: [[P0]]
// CHECK-NEXT:    dst: [[GRAD]]
// ... micro-batch 1's into grad_stage:w, then ACCUMULATE on host once the copy
// has landed, then the update.
// CHECK:       kernel: "scale"
// CHECK-NEXT:  inputs: {{[0-9]+}}
// CHECK-NEXT:  outputs: [[P1:[0-9]+]]
// CHECK:       copy {
// CHECK-NEXT:    src: [[P1]]
// CHECK-NEXT:    dst: [[PART]]
// CHECK:       stream: "d2h"
// CHECK-NEXT:  record {
// CHECK-NEXT:    event: "[[E:e[0-9]+]]"
// CHECK:       stream: "host"
// CHECK-NEXT:  wait {
// CHECK-NEXT:    event: "[[E]]"
// CHECK:       stream: "host"
// CHECK-NEXT:  host_task {
// CHECK-NEXT:    kind: ACCUMULATE
// CHECK-NEXT:    tensors: [[GRAD]]
// CHECK-NEXT:    tensors: [[PART]]
// CHECK:       stream: "host"
// CHECK-NEXT:  host_task {
// CHECK-NEXT:    kind: ADAMW
// CHECK-NEXT:    tensors: {{[0-9]+}}
// CHECK-NEXT:    tensors: [[GRAD]]

// Every parameter at home on the host (--state-home host): the host path of the
// plan; emit_plan_homes.mlir checks the device and disk homes.
