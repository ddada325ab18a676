// RUN: megatrain-opt %s --split-input-file --mt-fuse-cross-entropy | FileCheck %s

// torch.onnx.export of F.cross_entropy(logits[:, :-1].reshape(-1, V),
// ids[:, 1:].reshape(-1)) on a tiny embedding + linear model (B = 2, T = 6,
// V = 10), as `megatrain-compile --emit=mt` prints it, from the logits on.

// CHECK-LABEL: func.func @shifted_mean
// CHECK-SAME:    (%[[L:.*]]: tensor<2x6x10xf32>, %[[IDS:.*]]: tensor<2x6xi64>)
// CHECK-NEXT:    %[[Y:.*]] = mt.next_token_ce %[[L]], %[[IDS]] {ignore_index = -100 : i64} : (tensor<2x6x10xf32>, tensor<2x6xi64>) -> tensor<f32>
// CHECK-NEXT:    return %[[Y]]
func.func @shifted_mean(%logits: tensor<2x6x10xf32>, %ids: tensor<2x6xi64>) -> tensor<f32> {
  %7 = mt.slice %logits {ends = array<i64: 2, 5, 10>, starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<2x6x10xf32>) -> tensor<2x5x10xf32>
  %8 = mt.reshape %7 : (tensor<2x5x10xf32>) -> tensor<10x10xf32>
  %9 = mt.slice %ids {ends = array<i64: 2, 6>, starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : (tensor<2x6xi64>) -> tensor<2x5xi64>
  %10 = mt.reshape %9 : (tensor<2x5xi64>) -> tensor<10xi64>
  %11 = mt.softmax_ce %8, %10 {ignore_index = -100 : i64, reduction = "mean"} : (tensor<10x10xf32>, tensor<10xi64>) -> tensor<f32>
  return %11 : tensor<f32>
}

// -----

// reduction = "sum" is not next_token_ce's mean: no fusion.
// CHECK-LABEL: func.func @shifted_sum
// CHECK-NOT:     mt.next_token_ce
// CHECK:         mt.softmax_ce
func.func @shifted_sum(%logits: tensor<2x6x10xf32>, %ids: tensor<2x6xi64>) -> tensor<f32> {
  %7 = mt.slice %logits {ends = array<i64: 2, 5, 10>, starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<2x6x10xf32>) -> tensor<2x5x10xf32>
  %8 = mt.reshape %7 : (tensor<2x5x10xf32>) -> tensor<10x10xf32>
  %9 = mt.slice %ids {ends = array<i64: 2, 6>, starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : (tensor<2x6xi64>) -> tensor<2x5xi64>
  %10 = mt.reshape %9 : (tensor<2x5xi64>) -> tensor<10xi64>
  %11 = mt.softmax_ce %8, %10 {ignore_index = -100 : i64, reduction = "sum"} : (tensor<10x10xf32>, tensor<10xi64>) -> tensor<f32>
  return %11 : tensor<f32>
}

// -----

// Logits of positions 1..T-1 against tokens 1..T-1: not a next-token loss.
// CHECK-LABEL: func.func @not_shifted
// CHECK-NOT:     mt.next_token_ce
// CHECK:         mt.softmax_ce
func.func @not_shifted(%logits: tensor<2x6x10xf32>, %ids: tensor<2x6xi64>) -> tensor<f32> {
  %7 = mt.slice %logits {ends = array<i64: 2, 6, 10>, starts = array<i64: 0, 1, 0>, steps = array<i64: 1, 1, 1>} : (tensor<2x6x10xf32>) -> tensor<2x5x10xf32>
  %8 = mt.reshape %7 : (tensor<2x5x10xf32>) -> tensor<10x10xf32>
  %9 = mt.slice %ids {ends = array<i64: 2, 6>, starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : (tensor<2x6xi64>) -> tensor<2x5xi64>
  %10 = mt.reshape %9 : (tensor<2x5xi64>) -> tensor<10xi64>
  %11 = mt.softmax_ce %8, %10 {ignore_index = -100 : i64, reduction = "mean"} : (tensor<10x10xf32>, tensor<10xi64>) -> tensor<f32>
  return %11 : tensor<f32>
}

// -----

// The sliced logits are read elsewhere too: no fusion.
// CHECK-LABEL: func.func @sliced_logits_extra_user
// CHECK-NOT:     mt.next_token_ce
// CHECK:         mt.softmax_ce
func.func @sliced_logits_extra_user(%logits: tensor<2x6x10xf32>, %ids: tensor<2x6xi64>) -> (tensor<f32>, tensor<2x5x10xf32>) {
  %7 = mt.slice %logits {ends = array<i64: 2, 5, 10>, starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<2x6x10xf32>) -> tensor<2x5x10xf32>
  %8 = mt.reshape %7 : (tensor<2x5x10xf32>) -> tensor<10x10xf32>
  %9 = mt.slice %ids {ends = array<i64: 2, 6>, starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : (tensor<2x6xi64>) -> tensor<2x5xi64>
  %10 = mt.reshape %9 : (tensor<2x5xi64>) -> tensor<10xi64>
  %11 = mt.softmax_ce %8, %10 {ignore_index = -100 : i64, reduction = "mean"} : (tensor<10x10xf32>, tensor<10xi64>) -> tensor<f32>
  return %11, %7 : tensor<f32>, tensor<2x5x10xf32>
}
