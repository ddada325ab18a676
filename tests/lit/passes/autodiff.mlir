// RUN: megatrain-opt %s --mt-autodiff --split-input-file --verify-diagnostics | FileCheck %s

// A chain: the seed is 1, each op's rule runs in reverse, and the weight ends
// with one param_grad. The input x gets no gradient (no matmul for dx).
// CHECK-LABEL: func.func @chain
// CHECK:         %[[X:.*]] = mt.input {name = "x"}
// CHECK:         %[[W:.*]] = mt.param {name = "w", trainable = true}
// CHECK:         %[[T:.*]] = mt.tanh
// CHECK:         mt.loss
// CHECK:         %[[ONE:.*]] = mt.fill {mt.loss_seed, value = 1.000000e+00 : f64} : tensor<f32>
// CHECK:         %[[R:.*]] = mt.reshape %[[ONE]] : (tensor<f32>) -> tensor<1x1xf32>
// CHECK:         %[[B:.*]] = mt.broadcast_to %[[R]] : (tensor<1x1xf32>) -> tensor<4x3xf32>
// CHECK:         %[[DH:.*]] = mt.tanh_grad %[[T]], %[[B]] : tensor<4x3xf32>
// CHECK-NOT:     mt.matmul %[[DH]], %[[W]]
// CHECK:         %[[DW:.*]] = mt.matmul %[[X]], %[[DH]] {transpose_a = true} : (tensor<4x2xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    mt.param_grad %[[DW]] {param = "w"} : tensor<2x3xf32>
// CHECK-NEXT:    return
func.func @chain() {
  %x = mt.input {name = "x"} : tensor<4x2xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<2x3xf32>
  %h = mt.matmul %x, %w : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  %t = mt.tanh %h : tensor<4x3xf32>
  %l = mt.reduce_sum %t {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x3xf32>) -> tensor<f32>
  mt.loss %l : tensor<f32>
  return
}

// -----

// A value used twice accumulates its gradients with mt.add; a broadcast
// operand's gradient is summed back to its shape with sum_to.
// CHECK-LABEL: func.func @fan_out_and_broadcast
// CHECK:         %[[X:.*]] = mt.input {name = "x"}
// CHECK:         %[[W:.*]] = mt.param {name = "w"
// CHECK:         %[[A:.*]] = mt.mul %[[X]], %[[W]]
// CHECK:         %[[G:.*]] = mt.broadcast_to
// CHECK:         %[[DA:.*]] = mt.mul %[[G]], %[[W]] : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
// CHECK:         %[[DW1:.*]] = mt.mul %[[G]], %[[A]] : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
// CHECK:         %[[DW1S:.*]] = mt.sum_to %[[DW1]] : (tensor<3x4xf32>) -> tensor<4xf32>
// CHECK:         %[[DW2:.*]] = mt.mul %[[DA]], %[[X]]
// CHECK:         %[[DW2S:.*]] = mt.sum_to %[[DW2]] : (tensor<3x4xf32>) -> tensor<4xf32>
// CHECK:         %[[SUM:.*]] = mt.add %[[DW1S]], %[[DW2S]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    mt.param_grad %[[SUM]] {param = "w"}
// CHECK-NOT:     mt.param_grad
func.func @fan_out_and_broadcast() {
  %x = mt.input {name = "x"} : tensor<3x4xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<4xf32>
  %a = mt.mul %x, %w : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %b = mt.mul %a, %w : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %l = mt.reduce_mean %b {axes = array<i64: 0, 1>, keepdims = false} : (tensor<3x4xf32>) -> tensor<f32>
  mt.loss %l : tensor<f32>
  return
}

// -----

// Tied weights left as two mt.param ops of one name get one summed
// param_grad, emitted once the sweep has passed the earliest use of either.
// CHECK-LABEL: func.func @tied_uncombined
// CHECK:         %[[DH:.*]] = mt.matmul {{.*}} {transpose_a = true} : (tensor<10x10xf32>, tensor<10x4xf32>) -> tensor<10x4xf32>
// CHECK:         %[[DE:.*]] = mt.gather_grad
// CHECK:         %[[SUM:.*]] = mt.add %[[DE]], %[[DH]] : (tensor<10x4xf32>, tensor<10x4xf32>) -> tensor<10x4xf32>
// CHECK-NEXT:    mt.param_grad %[[SUM]] {param = "emb"} : tensor<10x4xf32>
// CHECK-NOT:     mt.param_grad
func.func @tied_uncombined() {
  %ids = mt.input {name = "ids"} : tensor<2x5xi64>
  %emb = mt.param {name = "emb", trainable = true} : tensor<10x4xf32>
  %x = mt.gather %emb, %ids {axis = 0 : i64} : (tensor<10x4xf32>, tensor<2x5xi64>) -> tensor<2x5x4xf32>
  %head = mt.param {name = "emb", trainable = true} : tensor<10x4xf32>
  %logits = mt.matmul %x, %head {transpose_b = true} : (tensor<2x5x4xf32>, tensor<10x4xf32>) -> tensor<2x5x10xf32>
  %l = mt.next_token_ce %logits, %ids {ignore_index = -100 : i64} : (tensor<2x5x10xf32>, tensor<2x5xi64>) -> tensor<f32>
  mt.loss %l : tensor<f32>
  return
}

// -----

// Batched activations times a shared weight: dW folds the batch into rows
// (one 2-D matmul), dx is a batched matmul.
// CHECK-LABEL: func.func @batched_weight
// CHECK:         %[[X:.*]] = mt.param {name = "x"
// CHECK:         %[[DY:.*]] = mt.next_token_ce_grad
// CHECK:         mt.matmul %[[DY]], %{{.*}} : (tensor<2x5x7xf32>, tensor<7x3xf32>) -> tensor<2x5x3xf32>
// CHECK:         %[[X2:.*]] = mt.reshape %[[X]] : (tensor<2x5x3xf32>) -> tensor<10x3xf32>
// CHECK:         %[[DY2:.*]] = mt.reshape %[[DY]] : (tensor<2x5x7xf32>) -> tensor<10x7xf32>
// CHECK:         %[[DW:.*]] = mt.matmul %[[DY2]], %[[X2]] {transpose_a = true} : (tensor<10x7xf32>, tensor<10x3xf32>) -> tensor<7x3xf32>
// CHECK:         mt.param_grad %[[DW]] {param = "w"}
func.func @batched_weight() {
  %ids = mt.input {name = "ids"} : tensor<2x5xi64>
  %x = mt.param {name = "x", trainable = true} : tensor<2x5x3xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<7x3xf32>
  %logits = mt.matmul %x, %w {transpose_b = true} : (tensor<2x5x3xf32>, tensor<7x3xf32>) -> tensor<2x5x7xf32>
  %l = mt.next_token_ce %logits, %ids {ignore_index = -100 : i64} : (tensor<2x5x7xf32>, tensor<2x5xi64>) -> tensor<f32>
  mt.loss %l : tensor<f32>
  return
}

// -----

// Only ops between a trainable parameter and the loss are differentiated:
// the frozen branch (an input times a frozen weight, through an op with no
// gradient rule) builds nothing. A trainable parameter the loss ignores gets
// a zero gradient.
// CHECK-LABEL: func.func @activity
// CHECK:         mt.loss
// CHECK-NOT:     mt.relu_grad
// CHECK-NOT:     mt.matmul
// CHECK:         mt.param_grad %{{.*}} {param = "b"} : tensor<3xf32>
// CHECK:         %[[Z:.*]] = mt.fill {value = 0.000000e+00 : f64} : tensor<5xf32>
// CHECK-NEXT:    mt.param_grad %[[Z]] {param = "unused"} : tensor<5xf32>
// CHECK-NOT:     param = "frozen"
func.func @activity() {
  %x = mt.input {name = "x"} : tensor<2x3xf32>
  %frozen = mt.param {name = "frozen", trainable = false} : tensor<3x3xf32>
  %unused = mt.param {name = "unused", trainable = true} : tensor<5xf32>
  %b = mt.param {name = "b", trainable = true} : tensor<3xf32>
  %h = mt.matmul %x, %frozen : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
  %r = mt.relu_grad %h, %x : tensor<2x3xf32>
  %y = mt.add %r, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %l = mt.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  mt.loss %l : tensor<f32>
  return
}

// -----

// Integer values never carry gradients: the labels of softmax_ce are i64.
// CHECK-LABEL: func.func @integer_operands
// CHECK:         %[[ONE:.*]] = mt.fill {mt.loss_seed, value = 1.000000e+00 : f64}
// CHECK:         %[[D:.*]] = mt.softmax_ce_grad %{{.*}}, %{{.*}}, %[[ONE]] {ignore_index = 1 : i64, reduction = "sum"}
// CHECK-NEXT:    mt.param_grad %[[D]] {param = "logits"}
func.func @integer_operands() {
  %labels = mt.input {name = "labels"} : tensor<4xi64>
  %x = mt.param {name = "logits", trainable = true} : tensor<4x6xf32>
  %l = mt.softmax_ce %x, %labels {ignore_index = 1 : i64, reduction = "sum"} : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
  mt.loss %l : tensor<f32>
  return
}

// -----

// Rules that rearrange rather than compute: transpose takes the inverse
// permutation, keepdims needs no reshape before broadcasting back, sub
// negates after reducing, and a transposed matmul operand keeps its layout.
// CHECK-LABEL: func.func @rearranging_rules
// CHECK:         %[[A:.*]] = mt.param {name = "a"
// CHECK:         %[[B:.*]] = mt.param {name = "b"
// CHECK:         %[[G:.*]] = mt.broadcast_to %{{.*}} : (tensor<1x1x1xf32>) -> tensor<2x3x4xf32>
// CHECK:         %[[DP:.*]] = mt.scale %{{.*}} {alpha = -1.000000e+00 : f64} : tensor<2x3x4xf32>
// CHECK:         %[[DT:.*]] = mt.transpose %[[DP]] {perm = array<i64: 1, 2, 0>} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
// CHECK:         %[[DM:.*]] = mt.reshape %[[DT]] : (tensor<3x4x2xf32>) -> tensor<12x2xf32>
// CHECK:         %[[DA:.*]] = mt.matmul %[[B]], %[[DM]] {transpose_a = true, transpose_b = true} : (tensor<2x5xf32>, tensor<12x2xf32>) -> tensor<5x12xf32>
// CHECK:         %[[DB:.*]] = mt.matmul %[[DM]], %[[A]] {transpose_a = true, transpose_b = true} : (tensor<12x2xf32>, tensor<5x12xf32>) -> tensor<2x5xf32>
// CHECK:         mt.param_grad %[[DA]] {param = "a"}
// CHECK:         mt.param_grad %[[DB]] {param = "b"}
func.func @rearranging_rules() {
  %a = mt.param {name = "a", trainable = true} : tensor<5x12xf32>
  %b = mt.param {name = "b", trainable = true} : tensor<2x5xf32>
  %x = mt.input {name = "x"} : tensor<2x3x4xf32>
  %m = mt.matmul %a, %b {transpose_a = true, transpose_b = true} : (tensor<5x12xf32>, tensor<2x5xf32>) -> tensor<12x2xf32>
  %r = mt.reshape %m : (tensor<12x2xf32>) -> tensor<3x4x2xf32>
  %t = mt.transpose %r {perm = array<i64: 2, 0, 1>} : (tensor<3x4x2xf32>) -> tensor<2x3x4xf32>
  %d = mt.sub %x, %t : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %s = mt.reduce_sum %d {axes = array<i64: 0, 1, 2>, keepdims = true} : (tensor<2x3x4xf32>) -> tensor<1x1x1xf32>
  %l = mt.reshape %s : (tensor<1x1x1xf32>) -> tensor<f32>
  mt.loss %l : tensor<f32>
  return
}

// -----

// An op on the path with no gradient rule is an error naming it.
func.func @no_rule() {
  %x = mt.input {name = "x"} : tensor<4xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<4xf32>
  // expected-error@+1 {{'mt.relu_grad' op has no gradient rule, but the loss depends on a trainable parameter through it}}
  %g = mt.relu_grad %x, %w : tensor<4xf32>
  %l = mt.reduce_sum %g {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  mt.loss %l : tensor<f32>
  return
}

// -----

// A fused pointwise chain exists only after autodiff: before it, it is refused.
func.func @pointwise_before_autodiff() {
  %w = mt.param {name = "w", trainable = true} : tensor<4xf32>
  // expected-error@+1 {{'mt.pointwise' op has no gradient rule: mt-fuse-pointwise writes it after mt-autodiff, from ops that have theirs}}
  %g = mt.pointwise %w {code = array<i64: 9, 0, -1, -1>, constants = array<f64>, outputs = array<i64: 1>} : (tensor<4xf32>) -> tensor<4xf32>
  %l = mt.reduce_sum %g {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  mt.loss %l : tensor<f32>
  return
}

// -----

// expected-error@+1 {{mt-autodiff needs exactly one mt.loss, found 0 (run mt-add-loss first)}}
func.func @no_loss() {
  %w = mt.param {name = "w", trainable = true} : tensor<4xf32>
  return
}
