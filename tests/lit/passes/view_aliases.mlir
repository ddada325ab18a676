// RUN: megatrain-opt %s --split-input-file --mt-view-aliases | FileCheck %s

// Reshapes (Flatten, Squeeze and Unsqueeze import as mt.reshape) keep every
// element at its row-major position: each is a view of its operand, a view
// of a view included.
// CHECK-LABEL: func.func @reshapes
// CHECK: mt.reshape %{{.*}} {mt.alias} : (tensor<2x3x8xf32>) -> tensor<6x8xf32>
// CHECK: mt.reshape %{{.*}} {mt.alias} : (tensor<6x8xf32>) -> tensor<6x1x8xf32>
// CHECK: mt.reshape %{{.*}} {mt.alias} : (tensor<2x3x8xf32>) -> tensor<48xf32>
func.func @reshapes() -> (tensor<6x1x8xf32>, tensor<48xf32>) {
  %x = mt.input {name = "x"} : tensor<2x3x8xf32>
  %a = mt.reshape %x : (tensor<2x3x8xf32>) -> tensor<6x8xf32>
  %b = mt.reshape %a : (tensor<6x8xf32>) -> tensor<6x1x8xf32>
  %c = mt.reshape %x : (tensor<2x3x8xf32>) -> tensor<48xf32>
  return %b, %c : tensor<6x1x8xf32>, tensor<48xf32>
}

// -----

// A transpose is a view only when it moves dims of extent 1 alone: the head
// transpose of a one-token sequence is one, of a longer sequence is not, and
// a swap of two real dims never is.
// CHECK-LABEL: func.func @transposes
// CHECK: mt.transpose %{{.*}} {mt.alias, perm = array<i64: 0, 2, 1, 3>} : (tensor<2x1x4x8xf32>) -> tensor<2x4x1x8xf32>
// CHECK: mt.transpose %{{.*}} {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x3x4x8xf32>) -> tensor<2x4x3x8xf32>
// CHECK: mt.transpose %{{.*}} {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
func.func @transposes() -> (tensor<2x4x1x8xf32>, tensor<2x4x3x8xf32>, tensor<8x4xf32>) {
  %x = mt.input {name = "x"} : tensor<2x1x4x8xf32>
  %y = mt.input {name = "y"} : tensor<2x3x4x8xf32>
  %z = mt.input {name = "z"} : tensor<4x8xf32>
  %a = mt.transpose %x {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x1x4x8xf32>) -> tensor<2x4x1x8xf32>
  %b = mt.transpose %y {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x3x4x8xf32>) -> tensor<2x4x3x8xf32>
  %c = mt.transpose %z {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return %a, %b, %c : tensor<2x4x1x8xf32>, tensor<2x4x3x8xf32>, tensor<8x4xf32>
}

// -----

// An offloaded value lives in the host staging pool, and only mt.prefetch may
// read it (the dialect's rule): the reshape of the prefetched value, a device
// value again, is a view of it.
// CHECK-LABEL: func.func @prefetched
// CHECK: mt.reshape %{{.*}} {mt.alias} : (tensor<4x8xf32>) -> tensor<32xf32>
func.func @prefetched() -> tensor<32xf32> {
  %x = mt.input {name = "x"} : tensor<4x8xf32>
  %h = mt.offload %x : tensor<4x8xf32>
  %p = mt.prefetch %h : tensor<4x8xf32>
  %b = mt.reshape %p : (tensor<4x8xf32>) -> tensor<32xf32>
  return %b : tensor<32xf32>
}
