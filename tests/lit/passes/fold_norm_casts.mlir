// RUN: megatrain-opt %s --split-input-file --mt-fold-norm-casts | FileCheck %s

// The norm before a bf16 product: its only reader is the cast, so the norm
// writes bf16 itself and the cast is gone; the product reads the norm.
// CHECK-LABEL: func.func @norm_then_product
// CHECK-NOT:     mt.cast
// CHECK:         %[[N:.*]] = mt.rms_norm %{{.*}}, %{{.*}} {axis = 2 : i64, epsilon = {{.*}} : f64} : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xbf16>
// CHECK-NEXT:    %{{.*}} = mt.matmul %[[N]], %{{.*}} {precision = "bf16", transpose_b = true}
func.func @norm_then_product() {
  %x = mt.input {name = "x"} : tensor<2x3x8xf32>
  %g = mt.param {name = "g", trainable = true} : tensor<8xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<4x8xbf16>
  %n = mt.rms_norm %x, %g {axis = 2 : i64, epsilon = 1.0e-6 : f64} : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %b = mt.cast %n : (tensor<2x3x8xf32>) -> tensor<2x3x8xbf16>
  %y = mt.matmul %b, %w {precision = "bf16", transpose_b = true} : (tensor<2x3x8xbf16>, tensor<4x8xbf16>) -> tensor<2x3x4xf32>
  mt.output %y {name = "y"} : tensor<2x3x4xf32>
  return
}

// -----

// Two casts of the one norm (CSE has not merged them): both readers take the
// bf16 norm.
// CHECK-LABEL: func.func @two_casts
// CHECK-NOT:     mt.cast
// CHECK:         %[[N:.*]] = mt.rms_norm {{.*}} -> tensor<4x8xbf16>
// CHECK-NEXT:    mt.output %[[N]] {name = "a"} : tensor<4x8xbf16>
// CHECK-NEXT:    mt.output %[[N]] {name = "b"} : tensor<4x8xbf16>
func.func @two_casts() {
  %x = mt.input {name = "x"} : tensor<4x8xf32>
  %g = mt.param {name = "g", trainable = true} : tensor<8xf32>
  %n = mt.rms_norm %x, %g {axis = 1 : i64, epsilon = 1.0e-6 : f64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %a = mt.cast %n : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  %b = mt.cast %n : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  mt.output %a {name = "a"} : tensor<4x8xbf16>
  mt.output %b {name = "b"} : tensor<4x8xbf16>
  return
}

// -----

// A norm whose f32 result is also read (an output) keeps it: both forms
// would be written, so nothing is folded. A cast to f64 is no candidate,
// and neither is an f64 norm.
// CHECK-LABEL: func.func @not_folded
// CHECK:         mt.rms_norm {{.*}} -> tensor<4x8xf32>
// CHECK-NEXT:    mt.cast {{.*}} -> tensor<4x8xbf16>
// CHECK:         mt.rms_norm {{.*}} -> tensor<4x8xf32>
// CHECK-NEXT:    mt.cast {{.*}} -> tensor<4x8xf64>
// CHECK:         mt.rms_norm {{.*}} -> tensor<4x8xf64>
// CHECK-NEXT:    mt.cast {{.*}} -> tensor<4x8xbf16>
func.func @not_folded() {
  %x = mt.input {name = "x"} : tensor<4x8xf32>
  %g = mt.param {name = "g", trainable = true} : tensor<8xf32>
  %n = mt.rms_norm %x, %g {axis = 1 : i64, epsilon = 1.0e-6 : f64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %a = mt.cast %n : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  mt.output %n {name = "n"} : tensor<4x8xf32>
  mt.output %a {name = "a"} : tensor<4x8xbf16>
  %m = mt.rms_norm %x, %g {axis = 1 : i64, epsilon = 1.0e-6 : f64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %c = mt.cast %m : (tensor<4x8xf32>) -> tensor<4x8xf64>
  mt.output %c {name = "c"} : tensor<4x8xf64>
  %x64 = mt.input {name = "x64"} : tensor<4x8xf64>
  %g64 = mt.param {name = "g64", trainable = true} : tensor<8xf64>
  %k = mt.rms_norm %x64, %g64 {axis = 1 : i64, epsilon = 1.0e-6 : f64} : (tensor<4x8xf64>, tensor<8xf64>) -> tensor<4x8xf64>
  %d = mt.cast %k : (tensor<4x8xf64>) -> tensor<4x8xbf16>
  mt.output %d {name = "d"} : tensor<4x8xbf16>
  return
}
