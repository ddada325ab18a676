// RUN: megatrain-opt %s --split-input-file --mt-fuse-rotary | FileCheck %s

// Fragments of the tiny Llama's `megatrain-compile --emit=mt` output
// (tests/models/llm/llama_opt.onnx: the query heads' rotary embedding), with
// the sequence cut to 4. There, cos and sin are folded constants of shape
// [1, 1, S, D]; here they are splats, which is all the pass looks at.

// CHECK-LABEL: func.func @llama_q
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4x4x16xf32>)
// CHECK:         %[[COS:.*]] = mt.constant {{.*}} : tensor<1x1x4x16xf32>
// CHECK:         %[[SIN:.*]] = mt.constant {{.*}} : tensor<1x1x4x16xf32>
// CHECK-NEXT:    %[[Y:.*]] = mt.rotary %[[X]], %[[COS]], %[[SIN]] : (tensor<2x4x4x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32>) -> tensor<2x4x4x16xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @llama_q(%x: tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32> {
  %7 = mt.constant {value = dense<0.5> : tensor<1x1x4x16xf32>} : tensor<1x1x4x16xf32>
  %8 = mt.constant {value = dense<0.25> : tensor<1x1x4x16xf32>} : tensor<1x1x4x16xf32>
  %41 = mt.mul %x, %7 : (tensor<2x4x4x16xf32>, tensor<1x1x4x16xf32>) -> tensor<2x4x4x16xf32>
  %42 = mt.slice %x {ends = array<i64: 2, 4, 4, 8>, starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x4x4x16xf32>) -> tensor<2x4x4x8xf32>
  %43 = mt.slice %x {ends = array<i64: 2, 4, 4, 16>, starts = array<i64: 0, 0, 0, 8>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x4x4x16xf32>) -> tensor<2x4x4x8xf32>
  %44 = mt.neg %43 : tensor<2x4x4x8xf32>
  %45 = mt.concat %44, %42 {axis = 3 : i64} : (tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>) -> tensor<2x4x4x16xf32>
  %46 = mt.mul %45, %8 : (tensor<2x4x4x16xf32>, tensor<1x1x4x16xf32>) -> tensor<2x4x4x16xf32>
  %47 = mt.add %41, %46 : (tensor<2x4x4x16xf32>, tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  return %47 : tensor<2x4x4x16xf32>
}

// -----

// The same with the operands of the muls and the add swapped.
// CHECK-LABEL: func.func @operands_swapped
// CHECK:         mt.rotary
// CHECK-NOT:     mt.concat
func.func @operands_swapped(%x: tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32> {
  %7 = mt.constant {value = dense<0.5> : tensor<1x1x4x16xf32>} : tensor<1x1x4x16xf32>
  %8 = mt.constant {value = dense<0.25> : tensor<1x1x4x16xf32>} : tensor<1x1x4x16xf32>
  %41 = mt.mul %7, %x : (tensor<1x1x4x16xf32>, tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  %42 = mt.slice %x {ends = array<i64: 2, 4, 4, 8>, starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x4x4x16xf32>) -> tensor<2x4x4x8xf32>
  %43 = mt.slice %x {ends = array<i64: 2, 4, 4, 16>, starts = array<i64: 0, 0, 0, 8>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x4x4x16xf32>) -> tensor<2x4x4x8xf32>
  %44 = mt.neg %43 : tensor<2x4x4x8xf32>
  %45 = mt.concat %44, %42 {axis = 3 : i64} : (tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>) -> tensor<2x4x4x16xf32>
  %46 = mt.mul %8, %45 : (tensor<1x1x4x16xf32>, tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  %47 = mt.add %46, %41 : (tensor<2x4x4x16xf32>, tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  return %47 : tensor<2x4x4x16xf32>
}

// -----

// cos and sin computed at run time (arguments here): rotary has no gradient
// with respect to them, so no fusion.
// CHECK-LABEL: func.func @tables_not_constant
// CHECK-NOT:     mt.rotary
// CHECK:         mt.concat
func.func @tables_not_constant(%x: tensor<2x4x4x16xf32>, %7: tensor<1x1x4x16xf32>, %8: tensor<1x1x4x16xf32>) -> tensor<2x4x4x16xf32> {
  %41 = mt.mul %x, %7 : (tensor<2x4x4x16xf32>, tensor<1x1x4x16xf32>) -> tensor<2x4x4x16xf32>
  %42 = mt.slice %x {ends = array<i64: 2, 4, 4, 8>, starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x4x4x16xf32>) -> tensor<2x4x4x8xf32>
  %43 = mt.slice %x {ends = array<i64: 2, 4, 4, 16>, starts = array<i64: 0, 0, 0, 8>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x4x4x16xf32>) -> tensor<2x4x4x8xf32>
  %44 = mt.neg %43 : tensor<2x4x4x8xf32>
  %45 = mt.concat %44, %42 {axis = 3 : i64} : (tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>) -> tensor<2x4x4x16xf32>
  %46 = mt.mul %45, %8 : (tensor<2x4x4x16xf32>, tensor<1x1x4x16xf32>) -> tensor<2x4x4x16xf32>
  %47 = mt.add %41, %46 : (tensor<2x4x4x16xf32>, tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  return %47 : tensor<2x4x4x16xf32>
}

// -----

// The halves in the wrong order (concat(-x1, x2)): not rotate_half.
// CHECK-LABEL: func.func @halves_swapped
// CHECK-NOT:     mt.rotary
// CHECK:         mt.concat
func.func @halves_swapped(%x: tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32> {
  %7 = mt.constant {value = dense<0.5> : tensor<1x1x4x16xf32>} : tensor<1x1x4x16xf32>
  %8 = mt.constant {value = dense<0.25> : tensor<1x1x4x16xf32>} : tensor<1x1x4x16xf32>
  %41 = mt.mul %x, %7 : (tensor<2x4x4x16xf32>, tensor<1x1x4x16xf32>) -> tensor<2x4x4x16xf32>
  %42 = mt.slice %x {ends = array<i64: 2, 4, 4, 16>, starts = array<i64: 0, 0, 0, 8>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x4x4x16xf32>) -> tensor<2x4x4x8xf32>
  %43 = mt.slice %x {ends = array<i64: 2, 4, 4, 8>, starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x4x4x16xf32>) -> tensor<2x4x4x8xf32>
  %44 = mt.neg %43 : tensor<2x4x4x8xf32>
  %45 = mt.concat %44, %42 {axis = 3 : i64} : (tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>) -> tensor<2x4x4x16xf32>
  %46 = mt.mul %45, %8 : (tensor<2x4x4x16xf32>, tensor<1x1x4x16xf32>) -> tensor<2x4x4x16xf32>
  %47 = mt.add %41, %46 : (tensor<2x4x4x16xf32>, tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  return %47 : tensor<2x4x4x16xf32>
}

// -----

// The rotated half is also read elsewhere: no fusion.
// CHECK-LABEL: func.func @rotated_extra_user
// CHECK-NOT:     mt.rotary
// CHECK:         %[[R:.*]] = mt.concat
// CHECK:         return %{{.*}}, %[[R]]
func.func @rotated_extra_user(%x: tensor<2x4x4x16xf32>) -> (tensor<2x4x4x16xf32>, tensor<2x4x4x16xf32>) {
  %7 = mt.constant {value = dense<0.5> : tensor<1x1x4x16xf32>} : tensor<1x1x4x16xf32>
  %8 = mt.constant {value = dense<0.25> : tensor<1x1x4x16xf32>} : tensor<1x1x4x16xf32>
  %41 = mt.mul %x, %7 : (tensor<2x4x4x16xf32>, tensor<1x1x4x16xf32>) -> tensor<2x4x4x16xf32>
  %42 = mt.slice %x {ends = array<i64: 2, 4, 4, 8>, starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x4x4x16xf32>) -> tensor<2x4x4x8xf32>
  %43 = mt.slice %x {ends = array<i64: 2, 4, 4, 16>, starts = array<i64: 0, 0, 0, 8>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x4x4x16xf32>) -> tensor<2x4x4x8xf32>
  %44 = mt.neg %43 : tensor<2x4x4x8xf32>
  %45 = mt.concat %44, %42 {axis = 3 : i64} : (tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>) -> tensor<2x4x4x16xf32>
  %46 = mt.mul %45, %8 : (tensor<2x4x4x16xf32>, tensor<1x1x4x16xf32>) -> tensor<2x4x4x16xf32>
  %47 = mt.add %41, %46 : (tensor<2x4x4x16xf32>, tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  return %47, %45 : tensor<2x4x4x16xf32>, tensor<2x4x4x16xf32>
}
