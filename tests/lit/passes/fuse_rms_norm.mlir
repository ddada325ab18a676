// RUN: megatrain-opt %s --split-input-file --mt-fuse-rms-norm | FileCheck %s

// Llama's final RMSNorm as llama_opt.onnx imports (tests/models/llm; trimmed
// to the norm and the lm_head): x * x, mean over the last axis, + eps (an f32
// constant shared by every norm site), sqrt, reciprocal, x * inv, weight * n.
// CHECK-LABEL: func.func @llama_final_norm
// CHECK-SAME:    (%[[X:.*]]: tensor<2x32x64xf32>)
// CHECK:         %[[W:.*]] = mt.param {name = "model.norm.weight"
// CHECK:         %[[Y:.*]] = mt.rms_norm %[[X]], %[[W]] {axis = 2 : i64, epsilon = 9.9999999747524271E-7 : f64} : (tensor<2x32x64xf32>, tensor<64xf32>) -> tensor<2x32x64xf32>
// CHECK-NEXT:    mt.matmul %[[Y]],
// CHECK-NOT:     mt.reciprocal
// CHECK-NOT:     mt.fill
func.func @llama_final_norm(%x: tensor<2x32x64xf32>) -> tensor<2x32x256xf32> {
  %eps = mt.constant {value = dense<9.99999997E-7> : tensor<f32>} : tensor<f32>
  %w = mt.param {name = "model.norm.weight", trainable = true} : tensor<64xf32>
  %head = mt.param {name = "val_341", trainable = true} : tensor<64x256xf32>
  %0 = mt.mul %x, %x : (tensor<2x32x64xf32>, tensor<2x32x64xf32>) -> tensor<2x32x64xf32>
  %1 = mt.reduce_mean %0 {axes = array<i64: 2>, keepdims = true} : (tensor<2x32x64xf32>) -> tensor<2x32x1xf32>
  %2 = mt.add %1, %eps : (tensor<2x32x1xf32>, tensor<f32>) -> tensor<2x32x1xf32>
  %3 = mt.sqrt %2 : tensor<2x32x1xf32>
  %4 = mt.reciprocal %3 : tensor<2x32x1xf32>
  %5 = mt.mul %x, %4 : (tensor<2x32x64xf32>, tensor<2x32x1xf32>) -> tensor<2x32x64xf32>
  %6 = mt.mul %w, %5 : (tensor<64xf32>, tensor<2x32x64xf32>) -> tensor<2x32x64xf32>
  %7 = mt.matmul %6, %head : (tensor<2x32x64xf32>, tensor<64x256xf32>) -> tensor<2x32x256xf32>
  return %7 : tensor<2x32x256xf32>
}

// -----

// Two norm sites sharing the eps constant (llama_noopt.onnx, the input norms
// of two layers): both fuse, and the constant goes once nothing reads it.
// CHECK-LABEL: func.func @shared_epsilon
// CHECK-NOT:     mt.constant
// CHECK:         mt.rms_norm %{{.*}}, %{{.*}} {axis = 2 : i64
// CHECK:         mt.rms_norm %{{.*}}, %{{.*}} {axis = 2 : i64
func.func @shared_epsilon(%x: tensor<2x32x64xf32>, %w1: tensor<64xf32>, %w2: tensor<64xf32>) -> tensor<2x32x64xf32> {
  %eps = mt.constant {value = dense<9.99999997E-7> : tensor<f32>} : tensor<f32>
  %0 = mt.mul %x, %x : (tensor<2x32x64xf32>, tensor<2x32x64xf32>) -> tensor<2x32x64xf32>
  %1 = mt.reduce_mean %0 {axes = array<i64: 2>, keepdims = true} : (tensor<2x32x64xf32>) -> tensor<2x32x1xf32>
  %2 = mt.add %1, %eps : (tensor<2x32x1xf32>, tensor<f32>) -> tensor<2x32x1xf32>
  %3 = mt.sqrt %2 : tensor<2x32x1xf32>
  %4 = mt.reciprocal %3 : tensor<2x32x1xf32>
  %5 = mt.mul %x, %4 : (tensor<2x32x64xf32>, tensor<2x32x1xf32>) -> tensor<2x32x64xf32>
  %6 = mt.mul %w1, %5 : (tensor<64xf32>, tensor<2x32x64xf32>) -> tensor<2x32x64xf32>
  %10 = mt.mul %6, %6 : (tensor<2x32x64xf32>, tensor<2x32x64xf32>) -> tensor<2x32x64xf32>
  %11 = mt.reduce_mean %10 {axes = array<i64: 2>, keepdims = true} : (tensor<2x32x64xf32>) -> tensor<2x32x1xf32>
  %12 = mt.add %11, %eps : (tensor<2x32x1xf32>, tensor<f32>) -> tensor<2x32x1xf32>
  %13 = mt.sqrt %12 : tensor<2x32x1xf32>
  %14 = mt.reciprocal %13 : tensor<2x32x1xf32>
  %15 = mt.mul %6, %14 : (tensor<2x32x64xf32>, tensor<2x32x1xf32>) -> tensor<2x32x64xf32>
  %16 = mt.mul %w2, %15 : (tensor<64xf32>, tensor<2x32x64xf32>) -> tensor<2x32x64xf32>
  return %16 : tensor<2x32x64xf32>
}

// -----

// Opset 23's RMSNormalization (llama_opset23_opt.onnx): eps is an mt.fill,
// the weight on the right.
// CHECK-LABEL: func.func @opset23_rms_normalization
// CHECK:         mt.rms_norm %arg0, %arg1 {axis = 2 : i64, epsilon = 9.9999999999999995E-7 : f64}
// CHECK-NOT:     mt.fill
// CHECK-NOT:     mt.mul
func.func @opset23_rms_normalization(%x: tensor<2x32x64xf32>, %w: tensor<64xf32>) -> tensor<2x32x64xf32> {
  %0 = mt.mul %x, %x : (tensor<2x32x64xf32>, tensor<2x32x64xf32>) -> tensor<2x32x64xf32>
  %1 = mt.reduce_mean %0 {axes = array<i64: 2>, keepdims = true} : (tensor<2x32x64xf32>) -> tensor<2x32x1xf32>
  %eps = mt.fill {value = 9.9999999999999995E-7 : f64} : tensor<f32>
  %2 = mt.add %1, %eps : (tensor<2x32x1xf32>, tensor<f32>) -> tensor<2x32x1xf32>
  %3 = mt.sqrt %2 : tensor<2x32x1xf32>
  %4 = mt.reciprocal %3 : tensor<2x32x1xf32>
  %5 = mt.mul %x, %4 : (tensor<2x32x64xf32>, tensor<2x32x1xf32>) -> tensor<2x32x64xf32>
  %6 = mt.mul %5, %w : (tensor<2x32x64xf32>, tensor<64xf32>) -> tensor<2x32x64xf32>
  return %6 : tensor<2x32x64xf32>
}

// -----

// Other spellings: x^2 as powf, the inverse root as powf -0.5, eps on the
// left, the mean over the last two axes (weight of both dims).
// CHECK-LABEL: func.func @powf_spelling_two_axes
// CHECK:         mt.rms_norm %arg0, %arg1 {axis = 1 : i64, epsilon = 9.9999997473787516E-6 : f64} : (tensor<4x8x16xf32>, tensor<8x16xf32>) -> tensor<4x8x16xf32>
// CHECK-NOT:     mt.powf
func.func @powf_spelling_two_axes(%x: tensor<4x8x16xf32>, %w: tensor<8x16xf32>) -> tensor<4x8x16xf32> {
  %eps = mt.constant {value = dense<1.0e-5> : tensor<1x1x1xf32>} : tensor<1x1x1xf32>
  %0 = mt.powf %x {exponent = 2.0 : f64} : tensor<4x8x16xf32>
  %1 = mt.reduce_mean %0 {axes = array<i64: 1, 2>, keepdims = true} : (tensor<4x8x16xf32>) -> tensor<4x1x1xf32>
  %2 = mt.add %eps, %1 : (tensor<1x1x1xf32>, tensor<4x1x1xf32>) -> tensor<4x1x1xf32>
  %3 = mt.powf %2 {exponent = -0.5 : f64} : tensor<4x1x1xf32>
  %4 = mt.mul %3, %x : (tensor<4x1x1xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %5 = mt.mul %4, %w : (tensor<4x8x16xf32>, tensor<8x16xf32>) -> tensor<4x8x16xf32>
  return %5 : tensor<4x8x16xf32>
}

// -----

// x / sqrt(...) and no weight: the weight is a fill of ones.
// CHECK-LABEL: func.func @division_without_weight
// CHECK:         %[[ONES:.*]] = mt.fill {value = 1.000000e+00 : f64} : tensor<16xf32>
// CHECK-NEXT:    %[[Y:.*]] = mt.rms_norm %arg0, %[[ONES]] {axis = 1 : i64, epsilon = 9.9999999999999995E-7 : f64}
// CHECK-NEXT:    return %[[Y]]
func.func @division_without_weight(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %eps = mt.fill {value = 1.0e-6 : f64} : tensor<f32>
  %0 = mt.mul %x, %x : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %1 = mt.reduce_mean %0 {axes = array<i64: 1>, keepdims = true} : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %2 = mt.add %1, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %3 = mt.sqrt %2 : tensor<4x1xf32>
  %4 = mt.div %x, %3 : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  return %4 : tensor<4x16xf32>
}

// -----

// Must not fuse: the inverse root is also returned, so the normalization's
// intermediates would still be needed.
// CHECK-LABEL: func.func @inverse_root_has_another_user
// CHECK-NOT:     mt.rms_norm
// CHECK:         mt.reciprocal
func.func @inverse_root_has_another_user(%x: tensor<4x16xf32>, %w: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x1xf32>) {
  %eps = mt.fill {value = 1.0e-6 : f64} : tensor<f32>
  %0 = mt.mul %x, %x : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %1 = mt.reduce_mean %0 {axes = array<i64: 1>, keepdims = true} : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %2 = mt.add %1, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %3 = mt.sqrt %2 : tensor<4x1xf32>
  %4 = mt.reciprocal %3 : tensor<4x1xf32>
  %5 = mt.mul %x, %4 : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  %6 = mt.mul %w, %5 : (tensor<16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %6, %4 : tensor<4x16xf32>, tensor<4x1xf32>
}

// -----

// Must not fuse: the square is of another value than the one normalized.
// CHECK-LABEL: func.func @square_of_another_value
// CHECK-NOT:     mt.rms_norm
func.func @square_of_another_value(%x: tensor<4x16xf32>, %z: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %eps = mt.fill {value = 1.0e-6 : f64} : tensor<f32>
  %0 = mt.mul %z, %z : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %1 = mt.reduce_mean %0 {axes = array<i64: 1>, keepdims = true} : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %2 = mt.add %1, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %3 = mt.sqrt %2 : tensor<4x1xf32>
  %4 = mt.reciprocal %3 : tensor<4x1xf32>
  %5 = mt.mul %x, %4 : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  return %5 : tensor<4x16xf32>
}

// -----

// Must not fuse: the mean is over a leading axis, not the trailing ones.
// CHECK-LABEL: func.func @mean_over_leading_axis
// CHECK-NOT:     mt.rms_norm
func.func @mean_over_leading_axis(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %eps = mt.fill {value = 1.0e-6 : f64} : tensor<f32>
  %0 = mt.mul %x, %x : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %1 = mt.reduce_mean %0 {axes = array<i64: 0>, keepdims = true} : (tensor<4x16xf32>) -> tensor<1x16xf32>
  %2 = mt.add %1, %eps : (tensor<1x16xf32>, tensor<f32>) -> tensor<1x16xf32>
  %3 = mt.sqrt %2 : tensor<1x16xf32>
  %4 = mt.reciprocal %3 : tensor<1x16xf32>
  %5 = mt.mul %x, %4 : (tensor<4x16xf32>, tensor<1x16xf32>) -> tensor<4x16xf32>
  return %5 : tensor<4x16xf32>
}

// -----

// The normalized value is read twice: it fuses with a weight of ones, and the
// weight multiply stays (folding it in would change the other reader).
// CHECK-LABEL: func.func @normalized_value_read_twice
// CHECK:         %[[ONES:.*]] = mt.fill {value = 1.000000e+00 : f64} : tensor<16xf32>
// CHECK:         %[[N:.*]] = mt.rms_norm %arg0, %[[ONES]]
// CHECK:         %[[Y:.*]] = mt.mul %arg1, %[[N]]
// CHECK:         return %[[Y]], %[[N]]
func.func @normalized_value_read_twice(%x: tensor<4x16xf32>, %w: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %eps = mt.fill {value = 1.0e-6 : f64} : tensor<f32>
  %0 = mt.mul %x, %x : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %1 = mt.reduce_mean %0 {axes = array<i64: 1>, keepdims = true} : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %2 = mt.add %1, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %3 = mt.sqrt %2 : tensor<4x1xf32>
  %4 = mt.reciprocal %3 : tensor<4x1xf32>
  %5 = mt.mul %x, %4 : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  %6 = mt.mul %w, %5 : (tensor<16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %6, %5 : tensor<4x16xf32>, tensor<4x16xf32>
}
