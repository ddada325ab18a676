// RUN: megatrain-opt %s --split-input-file --mt-fuse-activations | FileCheck %s

// Llama's MLP as llama_opt.onnx imports (tests/models/llm; one layer):
// down(silu(gate(x)) * up(x)), silu as x * sigmoid(x).
// CHECK-LABEL: func.func @llama_mlp
// CHECK:         %[[G:.*]] = mt.matmul %arg0, %arg1
// CHECK:         %[[U:.*]] = mt.matmul %arg0, %arg2
// CHECK:         %[[A:.*]] = mt.swiglu %[[G]], %[[U]] : tensor<2x32x176xf32>
// CHECK:         mt.matmul %[[A]], %arg3
// CHECK-NOT:     mt.sigmoid
// CHECK-NOT:     mt.silu
func.func @llama_mlp(%x: tensor<2x32x64xf32>, %wg: tensor<64x176xf32>, %wu: tensor<64x176xf32>, %wd: tensor<176x64xf32>) -> tensor<2x32x64xf32> {
  %0 = mt.matmul %x, %wg : (tensor<2x32x64xf32>, tensor<64x176xf32>) -> tensor<2x32x176xf32>
  %1 = mt.sigmoid %0 : tensor<2x32x176xf32>
  %2 = mt.mul %0, %1 : (tensor<2x32x176xf32>, tensor<2x32x176xf32>) -> tensor<2x32x176xf32>
  %3 = mt.matmul %x, %wu : (tensor<2x32x64xf32>, tensor<64x176xf32>) -> tensor<2x32x176xf32>
  %4 = mt.mul %2, %3 : (tensor<2x32x176xf32>, tensor<2x32x176xf32>) -> tensor<2x32x176xf32>
  %5 = mt.matmul %4, %wd : (tensor<2x32x176xf32>, tensor<176x64xf32>) -> tensor<2x32x64xf32>
  return %5 : tensor<2x32x64xf32>
}

// -----

// SiLU whose product broadcasts (not a gate of one shape): SiLU only.
// CHECK-LABEL: func.func @silu_then_broadcast_product
// CHECK:         %[[S:.*]] = mt.silu %arg0 : tensor<4x8xf32>
// CHECK-NEXT:    mt.mul %arg1, %[[S]] : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
func.func @silu_then_broadcast_product(%x: tensor<4x8xf32>, %u: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = mt.sigmoid %x : tensor<4x8xf32>
  %1 = mt.mul %0, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = mt.mul %u, %1 : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// -----

// Must not fuse: the sigmoid is read twice.
// CHECK-LABEL: func.func @sigmoid_read_twice
// CHECK-NOT:     mt.silu
// CHECK-NOT:     mt.swiglu
// CHECK:         mt.sigmoid
func.func @sigmoid_read_twice(%x: tensor<4x8xf32>, %u: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = mt.sigmoid %x : tensor<4x8xf32>
  %1 = mt.mul %x, %0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = mt.mul %1, %u : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %2, %0 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Must not fuse into swiglu: the SiLU is read twice (it stays a silu).
// CHECK-LABEL: func.func @silu_read_twice
// CHECK:         %[[S:.*]] = mt.silu %arg0
// CHECK:         %[[P:.*]] = mt.mul %[[S]], %arg1
// CHECK:         return %[[P]], %[[S]]
func.func @silu_read_twice(%x: tensor<4x8xf32>, %u: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = mt.sigmoid %x : tensor<4x8xf32>
  %1 = mt.mul %x, %0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = mt.mul %1, %u : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %2, %1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// GPT-2's NewGELU as gpt2_opt.onnx imports (c_fc output to c_proj input):
// (x * 0.5) * (tanh(((x + x^3 * 0.044715) * 0.797884583)) + 1), the
// constants f32 and shared.
// CHECK-LABEL: func.func @gpt2_new_gelu
// CHECK:         %[[H:.*]] = mt.reshape
// CHECK-NEXT:    %[[Y:.*]] = mt.gelu %[[H]] {approximate = "tanh"} : tensor<2x32x256xf32>
// CHECK-NEXT:    mt.reshape %[[Y]]
// CHECK-NOT:     mt.tanh
func.func @gpt2_new_gelu(%a: tensor<64x64xf32>, %w: tensor<64x256xf32>) -> tensor<64x256xf32> {
  %half = mt.constant {value = dense<5.000000e-01> : tensor<f32>} : tensor<f32>
  %cubic = mt.constant {value = dense<4.471500e-02> : tensor<f32>} : tensor<f32>
  %k = mt.constant {value = dense<0.797884583> : tensor<f32>} : tensor<f32>
  %one = mt.constant {value = dense<1.000000e+00> : tensor<f32>} : tensor<f32>
  %52 = mt.matmul %a, %w : (tensor<64x64xf32>, tensor<64x256xf32>) -> tensor<64x256xf32>
  %53 = mt.reshape %52 : (tensor<64x256xf32>) -> tensor<2x32x256xf32>
  %54 = mt.mul %53, %half : (tensor<2x32x256xf32>, tensor<f32>) -> tensor<2x32x256xf32>
  %55 = mt.powf %53 {exponent = 3.000000e+00 : f64} : tensor<2x32x256xf32>
  %56 = mt.mul %55, %cubic : (tensor<2x32x256xf32>, tensor<f32>) -> tensor<2x32x256xf32>
  %57 = mt.add %53, %56 : (tensor<2x32x256xf32>, tensor<2x32x256xf32>) -> tensor<2x32x256xf32>
  %58 = mt.mul %57, %k : (tensor<2x32x256xf32>, tensor<f32>) -> tensor<2x32x256xf32>
  %59 = mt.tanh %58 : tensor<2x32x256xf32>
  %60 = mt.add %59, %one : (tensor<2x32x256xf32>, tensor<f32>) -> tensor<2x32x256xf32>
  %61 = mt.mul %54, %60 : (tensor<2x32x256xf32>, tensor<2x32x256xf32>) -> tensor<2x32x256xf32>
  %62 = mt.reshape %61 : (tensor<2x32x256xf32>) -> tensor<64x256xf32>
  return %62 : tensor<64x256xf32>
}

// -----

// The tanh form with x^3 as products and the constants on the other sides.
// CHECK-LABEL: func.func @gelu_tanh_products
// CHECK:         mt.gelu %arg0 {approximate = "tanh"}
// CHECK-NOT:     mt.mul
func.func @gelu_tanh_products(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %half = mt.fill {value = 0.5 : f64} : tensor<f32>
  %cubic = mt.fill {value = 0.044715 : f64} : tensor<f32>
  %k = mt.fill {value = 0.79788456080286541 : f64} : tensor<f32>
  %one = mt.fill {value = 1.0 : f64} : tensor<f32>
  %0 = mt.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = mt.mul %0, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = mt.mul %cubic, %1 : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = mt.add %2, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = mt.mul %k, %3 : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %5 = mt.tanh %4 : tensor<4x8xf32>
  %6 = mt.add %one, %5 : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %7 = mt.mul %half, %x : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %8 = mt.mul %6, %7 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %8 : tensor<4x8xf32>
}

// -----

// torch's exact GELU export (opset 17): Div by sqrt 2, Erf, Add 1, Mul x,
// Mul 0.5.
// CHECK-LABEL: func.func @gelu_erf_torch_export
// CHECK:         %[[Y:.*]] = mt.gelu %arg0 {approximate = "none"} : tensor<4x8xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @gelu_erf_torch_export(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r2 = mt.constant {value = dense<1.41421354> : tensor<f32>} : tensor<f32>
  %one = mt.constant {value = dense<1.000000e+00> : tensor<f32>} : tensor<f32>
  %half = mt.constant {value = dense<5.000000e-01> : tensor<f32>} : tensor<f32>
  %0 = mt.div %x, %r2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %1 = mt.erf %0 : tensor<4x8xf32>
  %2 = mt.add %1, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %3 = mt.mul %x, %2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = mt.mul %3, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %4 : tensor<4x8xf32>
}

// -----

// The erf form with mt.scale (as the gradient checks write it) and the 0.5
// on the (1 + erf) factor: x * (0.5 * (1 + erf(0.7071 x))).
// CHECK-LABEL: func.func @gelu_erf_scales
// CHECK:         mt.gelu %arg0 {approximate = "none"}
// CHECK-NOT:     mt.scale
func.func @gelu_erf_scales(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %one = mt.fill {value = 1.0 : f64} : tensor<1x1xf32>
  %0 = mt.scale %x {alpha = 0.70710678118654757 : f64} : tensor<4x8xf32>
  %1 = mt.erf %0 : tensor<4x8xf32>
  %2 = mt.add %1, %one : (tensor<4x8xf32>, tensor<1x1xf32>) -> tensor<4x8xf32>
  %3 = mt.scale %2 {alpha = 0.5 : f64} : tensor<4x8xf32>
  %4 = mt.mul %x, %3 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %4 : tensor<4x8xf32>
}

// -----

// Must not fuse: the cubic coefficient is 0.045, not 0.044715.
// CHECK-LABEL: func.func @gelu_tanh_wrong_constant
// CHECK-NOT:     mt.gelu
// CHECK:         mt.tanh
func.func @gelu_tanh_wrong_constant(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %half = mt.fill {value = 0.5 : f64} : tensor<f32>
  %cubic = mt.fill {value = 0.045 : f64} : tensor<f32>
  %k = mt.fill {value = 0.79788456080286541 : f64} : tensor<f32>
  %one = mt.fill {value = 1.0 : f64} : tensor<f32>
  %0 = mt.mul %x, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %1 = mt.powf %x {exponent = 3.0 : f64} : tensor<4x8xf32>
  %2 = mt.mul %1, %cubic : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %3 = mt.add %x, %2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = mt.mul %3, %k : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %5 = mt.tanh %4 : tensor<4x8xf32>
  %6 = mt.add %5, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %7 = mt.mul %0, %6 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %7 : tensor<4x8xf32>
}

// -----

// Must not fuse: the tanh is also returned.
// CHECK-LABEL: func.func @gelu_tanh_read_twice
// CHECK-NOT:     mt.gelu
// CHECK:         mt.tanh
func.func @gelu_tanh_read_twice(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %half = mt.fill {value = 0.5 : f64} : tensor<f32>
  %cubic = mt.fill {value = 0.044715 : f64} : tensor<f32>
  %k = mt.fill {value = 0.79788456080286541 : f64} : tensor<f32>
  %one = mt.fill {value = 1.0 : f64} : tensor<f32>
  %0 = mt.mul %x, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %1 = mt.powf %x {exponent = 3.0 : f64} : tensor<4x8xf32>
  %2 = mt.mul %1, %cubic : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %3 = mt.add %x, %2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = mt.mul %3, %k : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %5 = mt.tanh %4 : tensor<4x8xf32>
  %6 = mt.add %5, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %7 = mt.mul %0, %6 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %7, %5 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Must not fuse: the erf reads a different value than the one multiplied.
// CHECK-LABEL: func.func @gelu_erf_two_values
// CHECK-NOT:     mt.gelu
func.func @gelu_erf_two_values(%x: tensor<4x8xf32>, %z: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %one = mt.fill {value = 1.0 : f64} : tensor<f32>
  %0 = mt.scale %z {alpha = 0.70710678118654757 : f64} : tensor<4x8xf32>
  %1 = mt.erf %0 : tensor<4x8xf32>
  %2 = mt.add %1, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %3 = mt.mul %x, %2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = mt.scale %3 {alpha = 0.5 : f64} : tensor<4x8xf32>
  return %4 : tensor<4x8xf32>
}
