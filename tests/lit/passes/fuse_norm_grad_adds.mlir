// RUN: megatrain-opt %s --split-input-file --mt-fuse-norm-grad-adds | FileCheck %s

// A pre-norm block's backward under bf16: the norm's dx is added to the
// gradient that skipped the norm and the sum is cast for the product. One
// fused op at the norm gradient's place writes the sum and its bf16 copy;
// the adamw of dweight keeps reading it, the product reads the copy and the
// output the f32 sum.
// CHECK-LABEL: func.func @add_and_cast
// CHECK-NOT:     mt.add
// CHECK-NOT:     mt.cast
// CHECK:         %[[S:.*]], %[[DW:.*]], %[[C:.*]] = mt.rms_norm_grad_add %{{.*}}, %{{.*}}, %{{.*}}, %[[R:.*]] {axis = 2 : i64, epsilon = {{.*}} : f64} : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<8xf32>, tensor<2x3x8xbf16>)
// CHECK-NEXT:    mt.adamw %[[DW]]
// CHECK-NEXT:    %{{.*}} = mt.matmul %[[C]], %{{.*}}
// CHECK-NEXT:    mt.output %[[S]] {name = "s"}
func.func @add_and_cast() {
  %x = mt.input {name = "x"} : tensor<2x3x8xf32>
  %dy = mt.input {name = "dy"} : tensor<2x3x8xf32>
  %r = mt.input {name = "r"} : tensor<2x3x8xf32>
  %g = mt.param {name = "g", trainable = true} : tensor<8xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<8x4xbf16>
  %dx, %dw = mt.rms_norm_grad %x, %g, %dy {axis = 2 : i64, epsilon = 1.0e-6 : f64} : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<8xf32>)
  mt.adamw %dw {beta1 = 9.0e-01 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, param = "g", weight_decay = 0.0 : f64} : tensor<8xf32>
  %s = mt.add %dx, %r : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %c = mt.cast %s : (tensor<2x3x8xf32>) -> tensor<2x3x8xbf16>
  %y = mt.matmul %c, %w {precision = "bf16"} : (tensor<2x3x8xbf16>, tensor<8x4xbf16>) -> tensor<2x3x4xf32>
  mt.output %s {name = "s"} : tensor<2x3x8xf32>
  mt.output %y {name = "y"} : tensor<2x3x4xf32>
  return
}

// -----

// fp32: the add alone fuses (no cast, no third result), the addend on
// either side of the add.
// CHECK-LABEL: func.func @add_only
// CHECK:         %[[S:.*]], %{{.*}} = mt.rms_norm_grad_add {{.*}} -> (tensor<4x8xf32>, tensor<8xf32>)
// CHECK-NOT:     mt.add
// CHECK:         mt.output %[[S]]
func.func @add_only() {
  %x = mt.input {name = "x"} : tensor<4x8xf32>
  %dy = mt.input {name = "dy"} : tensor<4x8xf32>
  %r = mt.input {name = "r"} : tensor<4x8xf32>
  %g = mt.param {name = "g", trainable = true} : tensor<8xf32>
  %dx, %dw = mt.rms_norm_grad %x, %g, %dy {axis = 1 : i64, epsilon = 1.0e-6 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
  %s = mt.add %r, %dx : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  mt.output %s {name = "s"} : tensor<4x8xf32>
  mt.output %dw {name = "dw"} : tensor<8xf32>
  return
}

// -----

// Not fused: dx read by more than the add; an addend defined after the
// norm's gradient (the fused op could not read it at its place); an addend
// broadcast into dx's shape.
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT:     mt.rms_norm_grad_add
// CHECK-COUNT-3: mt.add
func.func @not_fused() {
  %x = mt.input {name = "x"} : tensor<4x8xf32>
  %dy = mt.input {name = "dy"} : tensor<4x8xf32>
  %r = mt.input {name = "r"} : tensor<4x8xf32>
  %b = mt.input {name = "b"} : tensor<8xf32>
  %g = mt.param {name = "g", trainable = true} : tensor<8xf32>
  %dx, %dw = mt.rms_norm_grad %x, %g, %dy {axis = 1 : i64, epsilon = 1.0e-6 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
  %s = mt.add %dx, %r : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  mt.output %dx {name = "dx"} : tensor<4x8xf32>
  %dx2, %dw2 = mt.rms_norm_grad %x, %g, %dy {axis = 1 : i64, epsilon = 1.0e-6 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
  %late = mt.input {name = "late"} : tensor<4x8xf32>
  %s2 = mt.add %dx2, %late : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %dx3, %dw3 = mt.rms_norm_grad %x, %g, %dy {axis = 1 : i64, epsilon = 1.0e-6 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
  %s3 = mt.add %dx3, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  mt.output %s {name = "s"} : tensor<4x8xf32>
  mt.output %s2 {name = "s2"} : tensor<4x8xf32>
  mt.output %s3 {name = "s3"} : tensor<4x8xf32>
  mt.output %dw {name = "dw"} : tensor<8xf32>
  mt.output %dw2 {name = "dw2"} : tensor<8xf32>
  mt.output %dw3 {name = "dw3"} : tensor<8xf32>
  return
}
