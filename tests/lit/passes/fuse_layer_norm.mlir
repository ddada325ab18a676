// RUN: megatrain-opt %s --split-input-file --mt-fuse-layer-norm | FileCheck %s

// torch.nn.LayerNorm(64) followed by a Linear, as torch.onnx.export at opset
// 16 (before LayerNormalization) writes it and the importer imports it:
// ReduceMean, Sub, Pow 2 (imported as d * d), ReduceMean, Add eps, Sqrt, Div,
// Mul weight, Add bias. (The committed GPT-2 exports are opset 17+ and hold
// LayerNormalization nodes, which import as mt.layer_norm directly.)
// CHECK-LABEL: func.func @torch_layer_norm_opset16
// CHECK:         %[[X:.*]] = mt.input {name = "x"}
// CHECK:         %[[G:.*]] = mt.param {name = "ln.weight"
// CHECK:         %[[B:.*]] = mt.param {name = "ln.bias"
// CHECK:         %[[Y:.*]] = mt.layer_norm %[[X]], %[[G]], %[[B]] {axis = 2 : i64, epsilon = 9.9999997473787516E-6 : f64} : (tensor<2x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x32x64xf32>
// CHECK-NEXT:    mt.matmul %[[Y]]
// CHECK-NOT:     mt.fill
// CHECK-NOT:     mt.sqrt
func.func @torch_layer_norm_opset16() -> tensor<2x32x64xf32> {
  %0 = mt.input {name = "x"} : tensor<2x32x64xf32>
  %1 = mt.constant {value = dense<9.99999974E-6> : tensor<f32>} : tensor<f32>
  %2 = mt.param {name = "ln.weight", trainable = true} : tensor<64xf32>
  %3 = mt.param {name = "ln.bias", trainable = true} : tensor<64xf32>
  %4 = mt.param {name = "onnx::MatMul_19", trainable = true} : tensor<64x64xf32>
  %6 = mt.reduce_mean %0 {axes = array<i64: 2>, keepdims = true} : (tensor<2x32x64xf32>) -> tensor<2x32x1xf32>
  %7 = mt.sub %0, %6 : (tensor<2x32x64xf32>, tensor<2x32x1xf32>) -> tensor<2x32x64xf32>
  %8 = mt.mul %7, %7 : (tensor<2x32x64xf32>, tensor<2x32x64xf32>) -> tensor<2x32x64xf32>
  %9 = mt.reduce_mean %8 {axes = array<i64: 2>, keepdims = true} : (tensor<2x32x64xf32>) -> tensor<2x32x1xf32>
  %10 = mt.add %9, %1 : (tensor<2x32x1xf32>, tensor<f32>) -> tensor<2x32x1xf32>
  %11 = mt.sqrt %10 : tensor<2x32x1xf32>
  %12 = mt.div %7, %11 : (tensor<2x32x64xf32>, tensor<2x32x1xf32>) -> tensor<2x32x64xf32>
  %13 = mt.mul %12, %2 : (tensor<2x32x64xf32>, tensor<64xf32>) -> tensor<2x32x64xf32>
  %14 = mt.add %13, %3 : (tensor<2x32x64xf32>, tensor<64xf32>) -> tensor<2x32x64xf32>
  %15 = mt.matmul %14, %4 : (tensor<2x32x64xf32>, tensor<64x64xf32>) -> tensor<2x32x64xf32>
  return %15 : tensor<2x32x64xf32>
}

// -----

// Other spellings: powf 2, a reciprocal root multiplied in, gamma and beta
// on the left, two normalized axes; no eps shape but one element.
// CHECK-LABEL: func.func @reciprocal_two_axes
// CHECK:         %[[Y:.*]] = mt.layer_norm %arg0, %arg1, %arg2 {axis = 1 : i64, epsilon = 1.000000e-03 : f64}
// CHECK-NEXT:    return %[[Y]]
func.func @reciprocal_two_axes(%x: tensor<4x8x16xf64>, %g: tensor<8x16xf64>, %b: tensor<8x16xf64>) -> tensor<4x8x16xf64> {
  %eps = mt.fill {value = 1.0e-3 : f64} : tensor<1x1x1xf64>
  %0 = mt.reduce_mean %x {axes = array<i64: 1, 2>, keepdims = true} : (tensor<4x8x16xf64>) -> tensor<4x1x1xf64>
  %1 = mt.sub %x, %0 : (tensor<4x8x16xf64>, tensor<4x1x1xf64>) -> tensor<4x8x16xf64>
  %2 = mt.powf %1 {exponent = 2.0 : f64} : tensor<4x8x16xf64>
  %3 = mt.reduce_mean %2 {axes = array<i64: 1, 2>, keepdims = true} : (tensor<4x8x16xf64>) -> tensor<4x1x1xf64>
  %4 = mt.add %eps, %3 : (tensor<1x1x1xf64>, tensor<4x1x1xf64>) -> tensor<4x1x1xf64>
  %5 = mt.sqrt %4 : tensor<4x1x1xf64>
  %6 = mt.reciprocal %5 : tensor<4x1x1xf64>
  %7 = mt.mul %1, %6 : (tensor<4x8x16xf64>, tensor<4x1x1xf64>) -> tensor<4x8x16xf64>
  %8 = mt.mul %g, %7 : (tensor<8x16xf64>, tensor<4x8x16xf64>) -> tensor<4x8x16xf64>
  %9 = mt.add %b, %8 : (tensor<8x16xf64>, tensor<4x8x16xf64>) -> tensor<4x8x16xf64>
  return %9 : tensor<4x8x16xf64>
}

// -----

// Without gamma and beta: a layer_norm of a fill of ones and one of zeros.
// CHECK-LABEL: func.func @no_affine
// CHECK:         %[[ONES:.*]] = mt.fill {value = 1.000000e+00 : f64} : tensor<16xf32>
// CHECK-NEXT:    %[[ZEROS:.*]] = mt.fill {value = 0.000000e+00 : f64} : tensor<16xf32>
// CHECK-NEXT:    mt.layer_norm %arg0, %[[ONES]], %[[ZEROS]] {axis = 1 : i64
func.func @no_affine(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %eps = mt.fill {value = 1.0e-5 : f64} : tensor<f32>
  %0 = mt.reduce_mean %x {axes = array<i64: 1>, keepdims = true} : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %1 = mt.sub %x, %0 : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  %2 = mt.mul %1, %1 : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %3 = mt.reduce_mean %2 {axes = array<i64: 1>, keepdims = true} : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %4 = mt.add %3, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %5 = mt.sqrt %4 : tensor<4x1xf32>
  %6 = mt.div %1, %5 : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  return %6 : tensor<4x16xf32>
}

// -----

// An imported LayerNormalization without bias (a zero fill) followed by a
// bias add: the add folds in. One with a real bias keeps its multiply.
// CHECK-LABEL: func.func @imported_layer_norms
// CHECK:         %[[A:.*]] = mt.layer_norm %arg0, %arg1, %arg2 {axis = 1 : i64, epsilon = 1.000000e-05 : f64}
// CHECK:         %[[B:.*]] = mt.layer_norm %[[A]], %arg1, %arg2
// CHECK-NEXT:    %[[C:.*]] = mt.mul %[[B]], %arg1
// CHECK-NEXT:    return %[[C]]
func.func @imported_layer_norms(%x: tensor<4x16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %zero = mt.fill {value = 0.0 : f64} : tensor<16xf32>
  %0 = mt.layer_norm %x, %g, %zero {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %1 = mt.add %0, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %2 = mt.layer_norm %1, %g, %b {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %3 = mt.mul %2, %g : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return %3 : tensor<4x16xf32>
}

// -----

// Must not fuse: the centered value x - mean is also returned.
// CHECK-LABEL: func.func @centered_value_read_outside
// CHECK-NOT:     mt.layer_norm
// CHECK:         mt.sqrt
func.func @centered_value_read_outside(%x: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %eps = mt.fill {value = 1.0e-5 : f64} : tensor<f32>
  %0 = mt.reduce_mean %x {axes = array<i64: 1>, keepdims = true} : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %1 = mt.sub %x, %0 : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  %2 = mt.mul %1, %1 : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %3 = mt.reduce_mean %2 {axes = array<i64: 1>, keepdims = true} : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %4 = mt.add %3, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %5 = mt.sqrt %4 : tensor<4x1xf32>
  %6 = mt.div %1, %5 : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  return %6, %1 : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Must not fuse: the mean subtracted is of another value.
// CHECK-LABEL: func.func @mean_of_another_value
// CHECK-NOT:     mt.layer_norm
func.func @mean_of_another_value(%x: tensor<4x16xf32>, %z: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %eps = mt.fill {value = 1.0e-5 : f64} : tensor<f32>
  %0 = mt.reduce_mean %z {axes = array<i64: 1>, keepdims = true} : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %1 = mt.sub %x, %0 : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  %2 = mt.mul %1, %1 : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %3 = mt.reduce_mean %2 {axes = array<i64: 1>, keepdims = true} : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %4 = mt.add %3, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %5 = mt.sqrt %4 : tensor<4x1xf32>
  %6 = mt.div %1, %5 : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  return %6 : tensor<4x16xf32>
}

// -----

// The normalized value has a second reader: the layer norm fuses, gamma and
// beta stay separate ops.
// CHECK-LABEL: func.func @normalized_read_twice
// CHECK:         %[[N:.*]] = mt.layer_norm %arg0
// CHECK-NEXT:    %[[S:.*]] = mt.mul %[[N]], %arg1
// CHECK-NEXT:    %[[Y:.*]] = mt.add %[[S]], %arg2
// CHECK-NEXT:    return %[[Y]], %[[N]]
func.func @normalized_read_twice(%x: tensor<4x16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %eps = mt.fill {value = 1.0e-5 : f64} : tensor<f32>
  %0 = mt.reduce_mean %x {axes = array<i64: 1>, keepdims = true} : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %1 = mt.sub %x, %0 : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  %2 = mt.mul %1, %1 : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %3 = mt.reduce_mean %2 {axes = array<i64: 1>, keepdims = true} : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %4 = mt.add %3, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %5 = mt.sqrt %4 : tensor<4x1xf32>
  %6 = mt.div %1, %5 : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  %7 = mt.mul %6, %g : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %8 = mt.add %7, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return %8, %6 : tensor<4x16xf32>, tensor<4x16xf32>
}
