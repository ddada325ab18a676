// RUN: megatrain-opt %s --mt-autodiff --mt-microbatch=count=2 | FileCheck %s --check-prefix=TWO
// RUN: megatrain-opt %s --mt-autodiff --mt-microbatch=count=3 | FileCheck %s --check-prefix=THREE
// RUN: megatrain-opt %s --mt-autodiff --mt-microbatch=count=1 | FileCheck %s --check-prefix=ONE
// RUN: not megatrain-opt %s --mt-autodiff --mt-microbatch=count=0 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not megatrain-opt %s --mt-autodiff --mt-microbatch=count=4294967297 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: not megatrain-opt %s --mt-autodiff --mt-adamw --mt-microbatch=count=2 2>&1 | FileCheck %s --check-prefix=AFTER-ADAMW
// RUN: not megatrain-opt %s --mt-autodiff --mt-microbatch=count=2 --mt-microbatch=count=2 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: megatrain-opt %s --mt-autodiff --mt-microbatch=count=2 --mt-adamw --mt-schedule | FileCheck %s --check-prefix=SCHED

// One training step (x -> tanh(x w + b) -> sum) differentiated by
// mt-autodiff, then split into micro-batches: micro-batch 0 as it was, each
// later one a clone after it whose input is renamed x@k and whose parameters
// are fetched again. Right after each micro-batch gradient is final it is
// sent to its sink scaled by 1/N: mt.grad_part {index = k} for the first
// N-1 micro-batches, the one mt.param_grad for the last. With N a power of
// two (TWO) the backward's seed (the mt.fill mt-autodiff marks
// mt.loss_seed) is 1/N and the parts go as they are; otherwise (THREE) each
// part is scaled by an mt.scale. The losses are summed and scaled by 1/N
// into the one mt.loss, right after the last micro-batch's loss (before its
// backward: the step reads the loss there).

// TWO-LABEL:  func.func @step() attributes {mt.microbatches = 2 : i64}
// TWO:          %[[X0:.*]] = mt.input {name = "x"} : tensor<4x2xf32>
// TWO:          %[[W0:.*]] = mt.param {name = "w", trainable = true}
// TWO:          %[[B0:.*]] = mt.param {name = "b", trainable = true}
// TWO:          %[[T0:.*]] = mt.tanh
// TWO:          %[[L0:.*]] = mt.reduce_sum %[[T0]]
// TWO-NOT:      mt.loss
// TWO:          mt.fill {mt.loss_seed, value = 5.000000e-01 : f64} : tensor<f32>
// TWO:          %[[DT0:.*]] = mt.tanh_grad %[[T0]]
// TWO-NEXT:     %[[DB0:.*]] = mt.sum_to %[[DT0]]
// TWO-NEXT:     mt.grad_part %[[DB0]] {count = 2 : i64, index = 0 : i64, mt.microbatch_backward = 0 : i64, param = "b"} : tensor<3xf32>
// TWO-NEXT:     %[[DW0:.*]] = mt.matmul %[[X0]], %[[DT0]] {{{.*}}transpose_a = true}
// TWO-NEXT:     mt.grad_part %[[DW0]] {count = 2 : i64, index = 0 : i64, mt.microbatch_backward = 0 : i64, param = "w"} : tensor<2x3xf32>
// TWO-NOT:      mt.param_grad
// TWO:          %[[X1:.*]] = mt.input {name = "x@1"} : tensor<4x2xf32>
// TWO-NEXT:     %[[W1:.*]] = mt.param {name = "w", trainable = true}
// TWO-NEXT:     %[[B1:.*]] = mt.param {name = "b", trainable = true}
// TWO-NEXT:     %[[H1:.*]] = mt.matmul %[[X1]], %[[W1]]
// TWO-NEXT:     mt.add %[[H1]], %[[B1]]
// TWO-NEXT:     %[[T1:.*]] = mt.tanh
// TWO-NEXT:     %[[L1:.*]] = mt.reduce_sum %[[T1]]
// TWO-NEXT:     %[[SL:.*]] = mt.add %[[L0]], %[[L1]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// TWO-NEXT:     %[[ML:.*]] = mt.scale %[[SL]] {alpha = 5.000000e-01 : f64} : tensor<f32>
// TWO-NEXT:     mt.loss %[[ML]] : tensor<f32>
// TWO-NEXT:     mt.fill {mt.loss_seed, value = 5.000000e-01 : f64} : tensor<f32>
// TWO:          %[[DT1:.*]] = mt.tanh_grad %[[T1]]
// TWO-NEXT:     %[[DB1:.*]] = mt.sum_to %[[DT1]]
// TWO-NEXT:     mt.param_grad %[[DB1]] {mt.microbatch_backward = 1 : i64, param = "b"} : tensor<3xf32>
// TWO-NEXT:     %[[DW1:.*]] = mt.matmul %[[X1]], %[[DT1]] {{{.*}}transpose_a = true}
// TWO-NEXT:     mt.param_grad %[[DW1]] {mt.microbatch_backward = 1 : i64, param = "w"} : tensor<2x3xf32>
// TWO-NEXT:     return

// THREE-LABEL: func.func @step() attributes {mt.microbatches = 3 : i64}
// THREE:         mt.input {name = "x"}
// THREE:         mt.fill {mt.loss_seed, value = 1.000000e+00 : f64}
// THREE-NOT:     mt.param_grad
// THREE:         %[[DB0:.*]] = mt.sum_to
// THREE-NEXT:    %[[PB0:.*]] = mt.scale %[[DB0]] {alpha = 0.33333333333333331 : f64, mt.microbatch_backward = 0 : i64}
// THREE-NEXT:    mt.grad_part %[[PB0]] {count = 3 : i64, index = 0 : i64, mt.microbatch_backward = 0 : i64, param = "b"}
// THREE:         mt.input {name = "x@1"}
// THREE:         %[[DB1:.*]] = mt.sum_to
// THREE-NEXT:    %[[PB1:.*]] = mt.scale %[[DB1]] {alpha = 0.33333333333333331 : f64, mt.microbatch_backward = 1 : i64}
// THREE-NEXT:    mt.grad_part %[[PB1]] {count = 3 : i64, index = 1 : i64, mt.microbatch_backward = 1 : i64, param = "b"}
// THREE-NEXT:    %[[DW1:.*]] = mt.matmul {{.*}} {{{.*}}transpose_a = true}
// THREE-NEXT:    %[[PW1:.*]] = mt.scale %[[DW1]] {alpha = 0.33333333333333331 : f64, mt.microbatch_backward = 1 : i64}
// THREE-NEXT:    mt.grad_part %[[PW1]] {count = 3 : i64, index = 1 : i64, mt.microbatch_backward = 1 : i64, param = "w"}
// THREE-NOT:     mt.param_grad
// THREE-NOT:     mt.add {{.*}} : (tensor<3xf32>, tensor<3xf32>)
// THREE:         mt.input {name = "x@2"}
// THREE:         %[[L2:.*]] = mt.reduce_sum
// THREE-NEXT:    %[[S01:.*]] = mt.add %{{.*}}, %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// THREE-NEXT:    %[[S012:.*]] = mt.add %[[S01]], %[[L2]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// THREE-NEXT:    %[[ML:.*]] = mt.scale %[[S012]] {alpha = 0.33333333333333331 : f64} : tensor<f32>
// THREE-NEXT:    mt.loss %[[ML]]
// THREE:         %[[DB2:.*]] = mt.sum_to
// THREE-NEXT:    %[[MB:.*]] = mt.scale %[[DB2]] {alpha = 0.33333333333333331 : f64, mt.microbatch_backward = 2 : i64}
// THREE-NEXT:    mt.param_grad %[[MB]] {mt.microbatch_backward = 2 : i64, param = "b"}
// THREE-NEXT:    %[[DW2:.*]] = mt.matmul {{.*}} {{{.*}}transpose_a = true}
// THREE-NEXT:    %[[MW:.*]] = mt.scale %[[DW2]] {alpha = 0.33333333333333331 : f64, mt.microbatch_backward = 2 : i64}
// THREE-NEXT:    mt.param_grad %[[MW]] {mt.microbatch_backward = 2 : i64, param = "w"}
// THREE-NEXT:    return
// THREE-NOT:     mt.input {name = "x@3"}

// count=1 leaves the step alone.
// ONE-LABEL:  func.func @step() {
// ONE-NOT:      mt.microbatches
// ONE-NOT:      mt.scale
// ONE-NOT:      "x@1"
// ONE:          mt.loss
// ONE:          mt.param_grad
// ONE:          mt.param_grad
// ONE-NEXT:     return

// mt-adamw turns the last part into the update; mt-schedule keeps each
// mt.grad_part (a sink) right after its operand's definition.
// SCHED-LABEL: func.func @step()
// SCHED:         %[[DB0:.*]] = mt.sum_to
// SCHED-NEXT:    mt.grad_part %[[DB0]] {count = 2 : i64, index = 0 : i64, mt.microbatch_backward = 0 : i64, mt.step = {{[0-9]+}} : i64, param = "b"}
// SCHED:         mt.input {{.*}}name = "x@1"
// SCHED:         %[[DB1:.*]] = mt.sum_to
// SCHED-NEXT:    mt.adamw %[[DB1]] {{.*}}param = "b"
// SCHED-NOT:     mt.param_grad

// ZERO: error: invalid mt-microbatch option count=0 (must be >= 1 and <= 1024)
// HUGE: error: invalid mt-microbatch option count=4294967297 (must be >= 1 and <= 1024)
// AFTER-ADAMW: error: mt-microbatch must run before mt-adamw
// TWICE: error: mt-microbatch: the function is already split into micro-batches

func.func @step() {
  %x = mt.input {name = "x"} : tensor<4x2xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<2x3xf32>
  %b = mt.param {name = "b", trainable = true} : tensor<3xf32>
  %h = mt.matmul %x, %w : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  %hb = mt.add %h, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %t = mt.tanh %hb : tensor<4x3xf32>
  %l = mt.reduce_sum %t {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x3xf32>) -> tensor<f32>
  mt.loss %l : tensor<f32>
  return
}
