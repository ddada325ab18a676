// RUN: megatrain-opt %s --split-input-file --verify-diagnostics --allow-unregistered-dialect \
// RUN:   --mt-schedule | FileCheck %s

// Sources move to just before their first user: the weight's copy is issued
// right before the matmul, not at the top of the step; the constant nobody
// reads goes last. The loss marker moves up to just after the loss.
// CHECK-LABEL: func.func @sources_and_sinks
// CHECK:         mt.input {mt.step = 0 : i64, name = "x"}
// CHECK-NEXT:    mt.relu {{.*}}mt.step = 1
// CHECK-NEXT:    mt.param {mt.step = 2 : i64, name = "w"
// CHECK-NEXT:    mt.matmul {{.*}}mt.step = 3
// CHECK-NEXT:    mt.reduce_sum {{.*}}mt.step = 4
// CHECK-NEXT:    mt.loss {{.*}}mt.step = 5
// CHECK-NEXT:    mt.fill {mt.step = 6 : i64
// CHECK-NEXT:    mt.tanh {{.*}}mt.step = 7
// CHECK-NEXT:    mt.constant {mt.step = 8 : i64
// CHECK-NEXT:    return {mt.step = 9 : i64}
func.func @sources_and_sinks() {
  %w = mt.param {name = "w", trainable = true} : tensor<8x4xf32>
  %unused = mt.constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
  %x = mt.input {name = "x"} : tensor<2x8xf32>
  %r = mt.relu %x : tensor<2x8xf32>
  %y = mt.matmul %r, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %l = mt.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x4xf32>) -> tensor<f32>
  %one = mt.fill {value = 1.0 : f64} : tensor<f32>
  %t = mt.tanh %one : tensor<f32>
  mt.loss %l : tensor<f32>
  return
}

// -----

// A final gradient leaves the device as soon as it is complete: each adamw
// moves up to just after its gradient, and two updates of gradients that are
// complete at the same point keep their order.
// CHECK-LABEL: func.func @updates_follow_their_gradient
// CHECK:         %[[GA:.*]] = mt.fill {mt.step = 0 : i64, value = 1.0
// CHECK-NEXT:    mt.adamw %[[GA]] {{.*}}mt.step = 1 : i64, param = "a"
// CHECK-NEXT:    %[[GB:.*]] = mt.scale %[[GA]] {{.*}}mt.step = 2
// CHECK-NEXT:    mt.param_grad %[[GB]] {mt.step = 3 : i64, param = "b"}
// CHECK-NEXT:    mt.adamw %[[GB]] {{.*}}mt.step = 4 : i64, param = "b"
// CHECK-NEXT:    mt.relu %[[GB]] {mt.step = 5
// CHECK-NEXT:    return {mt.step = 6 : i64}
func.func @updates_follow_their_gradient() {
  %ga = mt.fill {value = 1.0 : f64} : tensor<4xf32>
  %gb = mt.scale %ga {alpha = 2.0 : f64} : tensor<4xf32>
  %late = mt.relu %gb : tensor<4xf32>
  mt.adamw %ga {param = "a", lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : tensor<4xf32>
  mt.param_grad %gb {param = "b"} : tensor<4xf32>
  mt.adamw %gb {param = "b", lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : tensor<4xf32>
  return
}

// -----

// A parameter read twice is copied once, before its first reader; sources
// with the same first user keep their order.
// CHECK-LABEL: func.func @shared_source
// CHECK:         mt.param {mt.step = 0
// CHECK-NEXT:    mt.input {mt.step = 1
// CHECK-NEXT:    mt.add {{.*}}mt.step = 2
// CHECK-NEXT:    mt.mul {{.*}}mt.step = 3
func.func @shared_source() -> tensor<4xf32> {
  %p = mt.param {name = "p", trainable = false} : tensor<4xf32>
  %x = mt.input {name = "x"} : tensor<4xf32>
  %a = mt.add %x, %p : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b = mt.mul %a, %p : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

// expected-error @+1 {{mt-schedule expects a function with a single block}}
func.func @two_blocks() {
  "test.br"()[^next] : () -> ()
^next:
  return
}
