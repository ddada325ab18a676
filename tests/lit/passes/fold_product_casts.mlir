// RUN: megatrain-opt %s --split-input-file --mt-fold-product-casts | FileCheck %s

// A bf16 product read only by its bf16 cast (through a reshape, as the
// attention's v projection is): the product writes bf16, the reshape moves
// bf16 and the cast is gone.
// CHECK-LABEL: func.func @product_then_cast
// CHECK-NOT:     mt.cast
// CHECK:         %[[P:.*]] = mt.matmul %{{.*}}, %{{.*}} {precision = "bf16", transpose_b = true} : (tensor<2x3x8xbf16>, tensor<4x8xbf16>) -> tensor<2x3x4xbf16>
// CHECK-NEXT:    %[[R:.*]] = mt.reshape %[[P]] : (tensor<2x3x4xbf16>) -> tensor<2x3x2x2xbf16>
// CHECK-NEXT:    mt.output %[[R]] {name = "v"} : tensor<2x3x2x2xbf16>
func.func @product_then_cast() {
  %x = mt.input {name = "x"} : tensor<2x3x8xbf16>
  %w = mt.param {name = "w", trainable = true} : tensor<4x8xbf16>
  %y = mt.matmul %x, %w {precision = "bf16", transpose_b = true} : (tensor<2x3x8xbf16>, tensor<4x8xbf16>) -> tensor<2x3x4xf32>
  %r = mt.reshape %y : (tensor<2x3x4xf32>) -> tensor<2x3x2x2xf32>
  %b = mt.cast %r : (tensor<2x3x2x2xf32>) -> tensor<2x3x2x2xbf16>
  mt.output %b {name = "v"} : tensor<2x3x2x2xbf16>
  return
}

// -----

// A product with an f32 reader besides its cast keeps its f32 result.
// CHECK-LABEL: func.func @f32_reader
// CHECK:         mt.matmul {{.*}} -> tensor<3x4xf32>
// CHECK:         mt.cast
func.func @f32_reader() {
  %x = mt.input {name = "x"} : tensor<3x8xbf16>
  %w = mt.input {name = "w"} : tensor<8x4xbf16>
  %y = mt.matmul %x, %w {precision = "bf16"} : (tensor<3x8xbf16>, tensor<8x4xbf16>) -> tensor<3x4xf32>
  %b = mt.cast %y : (tensor<3x4xf32>) -> tensor<3x4xbf16>
  mt.output %b {name = "b"} : tensor<3x4xbf16>
  mt.output %y {name = "y"} : tensor<3x4xf32>
  return
}

// -----

// f32 products (no bf16 operands) and residual products (matmul_add) stay.
// CHECK-LABEL: func.func @not_candidates
// CHECK:         mt.matmul {{.*}} -> tensor<3x4xf32>
// CHECK:         mt.matmul_add {{.*}} -> tensor<3x4xf32>
// CHECK-COUNT-2: mt.cast
func.func @not_candidates() {
  %x = mt.input {name = "x"} : tensor<3x8xf32>
  %w = mt.input {name = "w"} : tensor<8x4xf32>
  %y = mt.matmul %x, %w : (tensor<3x8xf32>, tensor<8x4xf32>) -> tensor<3x4xf32>
  %xb = mt.input {name = "xb"} : tensor<3x8xbf16>
  %wb = mt.input {name = "wb"} : tensor<8x4xbf16>
  %r = mt.input {name = "r"} : tensor<3x4xf32>
  %z = mt.matmul_add %xb, %wb, %r {precision = "bf16"} : (tensor<3x8xbf16>, tensor<8x4xbf16>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %yb = mt.cast %y : (tensor<3x4xf32>) -> tensor<3x4xbf16>
  %zb = mt.cast %z : (tensor<3x4xf32>) -> tensor<3x4xbf16>
  mt.output %yb {name = "y"} : tensor<3x4xbf16>
  mt.output %zb {name = "z"} : tensor<3x4xbf16>
  return
}
