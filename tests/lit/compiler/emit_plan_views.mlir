// RUN: megatrain-compile --precision fp32 --state-home host --keep-gradients %s --emit=plan-text -o - \
// RUN:   | FileCheck %s --implicit-check-not='kernel: "reshape"'
// RUN: megatrain-compile --precision fp32 --state-home host --keep-gradients %s --emit=plan-text --no-view-aliases -o - \
// RUN:   | FileCheck %s --check-prefix=COPY --implicit-check-not=alias_of
// RUN: megatrain-compile --precision fp32 --state-home host --keep-gradients %s -o %t.plan
// RUN: megatrain-inspect %t.plan | FileCheck %s --check-prefix=INSPECT

// A reshape of an input (as Flatten would import) read by both products: with
// views it is no step, a view tensor `view:x` over x's bytes whose last read
// (the weight gradient's matmul) is x's last_use_step too, although x itself
// is read only through the view; the plan is format 1.8 (its gradient kept:
// --keep-gradients, no staging ring, which is 1.9). With
// --no-view-aliases it is a reshape kernel into bytes of its own, format 1.4.
func.func @main() {
  %x = mt.input {name = "x"} : tensor<2x2x8xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<8x16xf32>
  %lbl = mt.input {name = "labels"} : tensor<4xi64>
  %xf = mt.reshape %x : (tensor<2x2x8xf32>) -> tensor<4x8xf32>
  %h = mt.matmul %xf, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %l = mt.softmax_ce %h, %lbl {ignore_index = -100 : i64, reduction = "mean"} : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
  mt.loss %l : tensor<f32>
  %one = mt.fill {value = 1.0 : f64} : tensor<f32>
  %dh = mt.softmax_ce_grad %h, %lbl, %one {ignore_index = -100 : i64, reduction = "mean"} : (tensor<4x16xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x16xf32>
  %dw = mt.matmul %xf, %dh {transpose_a = true} : (tensor<4x8xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  mt.adamw %dw {param = "w", lr = 2.0e-3 : f64, beta1 = 0.8 : f64, beta2 = 0.99 : f64, eps = 1.0e-6 : f64, weight_decay = 0.1 : f64} : tensor<8x16xf32>
  return
}

// CHECK:       format_minor: 8
// CHECK:       name: "x"
// CHECK:         role: INPUT
// CHECK:         last_use_step: [[LAST:[0-9]+]]
// CHECK:       name: "view:x"
// CHECK-NEXT:    shape: 4
// CHECK-NEXT:    shape: 8
// CHECK:         role: ACTIVATION
// CHECK:         last_use_step: [[LAST]]
// CHECK-NEXT:    alias_of: {{[0-9]+}}
// CHECK:       kernel: "matmul"
// CHECK:       kernel: "matmul"

// COPY:        format_minor: 4
// COPY:        kernel: "reshape"

// INSPECT:     format         1.8
// INSPECT:     views          1 tensors share their base's bytes (no step)
