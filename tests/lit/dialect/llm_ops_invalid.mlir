// RUN: megatrain-opt %s --split-input-file --verify-diagnostics

// Each verifier of the LLM primitives rejects what the kernels could not run,
// with a message naming the shapes or the attribute at fault.

func.func @math_on_integers(%x: tensor<4xi64>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of floating-point values}}
  %y = mt.sqrt %x : tensor<4xi64>
  return
}

// -----

func.func @max_does_not_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{operand shapes [2x3] and [4] do not broadcast}}
  %y = mt.max %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @isnan_result_shape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{result shape [3x2] must be the input's [2x3]}}
  %y = mt.isnan %x : (tensor<2x3xf32>) -> tensor<3x2xi1>
  return
}

// -----

func.func @where_condition_is_bool(%c: tensor<2x3xf32>, %x: tensor<2x3xf32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 1-bit signless integer values}}
  %y = mt.where %c, %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @where_shapes(%c: tensor<4xi1>, %x: tensor<2x3xf32>, %y: tensor<f32>) {
  // expected-error @+1 {{shapes [4], [2x3] and [] do not broadcast}}
  %r = mt.where %c, %x, %y : (tensor<4xi1>, tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @where_element_types(%c: tensor<3xi1>, %x: tensor<3xf32>, %y: tensor<3xf64>) {
  // expected-error @+1 {{x, y and the result must have one element type}}
  %r = mt.where %c, %x, %y : (tensor<3xi1>, tensor<3xf32>, tensor<3xf64>) -> tensor<3xf32>
  return
}

// -----

func.func @concat_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 2 out of range for rank 2}}
  %y = mt.concat %a, %a {axis = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_mismatch(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) {
  // expected-error @+1 {{input #1 shape [3x3] differs from input #0 [2x3] outside axis 1}}
  %y = mt.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_result(%a: tensor<2x3xf32>, %b: tensor<2x1xf32>) {
  // expected-error @+1 {{result shape [2x5], expected [2x4]}}
  %y = mt.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x5xf32>
  return
}

// -----

// Nine inputs exceed the runtime's operand limit; the importer nests concats.
func.func @concat_too_many(%a: tensor<1xf32>) {
  // expected-error @+1 {{takes 1 to 8 inputs (the runtime's operand limit; nest concats for more), got 9}}
  %y = mt.concat %a, %a, %a, %a, %a, %a, %a, %a, %a {axis = 0 : i64} : (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<9xf32>
  return
}

// -----

func.func @slice_negative_step(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{step -1 of dim 1 must be >= 1 (negative steps are not supported)}}
  %y = mt.slice %x {starts = array<i64: 0, 5>, ends = array<i64: 4, 0>, steps = array<i64: 1, -1>} : (tensor<4x6xf32>) -> tensor<4x5xf32>
  return
}

// -----

func.func @slice_not_normalized(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{range [-1, 4) of dim 0 is not normalized to [0, 4]}}
  %y = mt.slice %x {starts = array<i64: -1, 0>, ends = array<i64: 4, 6>, steps = array<i64: 1, 1>} : (tensor<4x6xf32>) -> tensor<5x6xf32>
  return
}

// -----

func.func @slice_one_entry_per_dim(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{starts, ends and steps need one entry per dim of [4x6]}}
  %y = mt.slice %x {starts = array<i64: 0>, ends = array<i64: 4>, steps = array<i64: 1>} : (tensor<4x6xf32>) -> tensor<4x6xf32>
  return
}

// -----

// ceil((6 - 1) / 2) = 3 along dim 1.
func.func @slice_result(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{sliced shape [4x2], expected [4x3]}}
  %y = mt.slice %x {starts = array<i64: 0, 1>, ends = array<i64: 4, 6>, steps = array<i64: 1, 2>} : (tensor<4x6xf32>) -> tensor<4x2xf32>
  return
}

// -----

func.func @slice_grad_result(%dy: tensor<4x3xf32>) {
  // expected-error @+1 {{sliced shape [4x3], expected [4x2]}}
  %dx = mt.slice_grad %dy {starts = array<i64: 0, 2>, ends = array<i64: 4, 6>, steps = array<i64: 1, 2>} : (tensor<4x3xf32>) -> tensor<4x6xf32>
  return
}

// -----

func.func @cast_shape(%x: tensor<4xf32>) {
  // expected-error @+1 {{result shape [2x2] must be the input's [4]}}
  %y = mt.cast %x : (tensor<4xf32>) -> tensor<2x2xi64>
  return
}

// -----

func.func @cast_types(%x: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float or 64-bit float or bfloat16 type or 64-bit signless integer or 1-bit signless integer values}}
  %y = mt.cast %x : (tensor<4xi32>) -> tensor<4xf32>
  return
}

// -----

func.func @max_grad_dy_shape(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %dy: tensor<3xf32>) {
  // expected-error @+1 {{dy shape [3] is not the broadcast of [2x3] and [3]}}
  %da, %db = mt.max_grad %a, %b, %dy : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  return
}
