// RUN: megatrain-opt %s --split-input-file --verify-diagnostics

// The verifiers of the fused ops reject what the kernels could not run.

func.func @rms_norm_weight_shape(%x: tensor<4x8xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{weight must have shape [8]}}
  %y = mt.rms_norm %x, %w {axis = 1 : i64, epsilon = 1.0e-6 : f64} : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @rms_norm_axis(%x: tensor<4x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{axis -1 out of range}}
  %y = mt.rms_norm %x, %w {axis = -1 : i64, epsilon = 1.0e-6 : f64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @rms_norm_grad_dweight(%x: tensor<4x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{dweight must have the weight's type}}
  %dx, %dw = mt.rms_norm_grad %x, %w, %x {axis = 1 : i64, epsilon = 1.0e-6 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  return
}

// -----

func.func @gelu_form(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{approximate must be "none" or "tanh", got "fast"}}
  %y = mt.gelu %x {approximate = "fast"} : tensor<4x8xf32>
  return
}

// -----

func.func @swiglu_shapes(%g: tensor<4x8xf32>, %u: tensor<8xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "mt.swiglu"(%g, %u) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return
}
