// RUN: megatrain-opt %s --split-input-file --verify-diagnostics

// mt.grad_part (mt-microbatch) names micro-batch `index` of `count`; the last
// micro-batch's gradient is the mt.param_grad, so index stops at count - 2.

func.func @valid(%g: tensor<3xf32>) {
  mt.grad_part %g {param = "b", index = 0 : i64, count = 2 : i64} : tensor<3xf32>
  mt.grad_part %g {param = "b", index = 1 : i64, count = 3 : i64} : tensor<3xf32>
  return
}

// -----

func.func @one_microbatch(%g: tensor<3xf32>) {
  // expected-error @+1 {{count must be >= 2 (one micro-batch has no parts), got 1}}
  mt.grad_part %g {param = "b", index = 0 : i64, count = 1 : i64} : tensor<3xf32>
  return
}

// -----

func.func @last_index(%g: tensor<3xf32>) {
  // expected-error @+1 {{index must lie in [0, count - 2] (the last part is the mt.param_grad), got 1 with count 2}}
  mt.grad_part %g {param = "b", index = 1 : i64, count = 2 : i64} : tensor<3xf32>
  return
}

// -----

func.func @negative_index(%g: tensor<3xf32>) {
  // expected-error @+1 {{index must lie in [0, count - 2]}}
  mt.grad_part %g {param = "b", index = -1 : i64, count = 3 : i64} : tensor<3xf32>
  return
}
