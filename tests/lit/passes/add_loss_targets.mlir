// RUN: megatrain-opt %s --split-input-file --verify-diagnostics \
// RUN:   --mt-add-loss="mode=next-token-ce logits=out tokens=ids targets=tgt" | FileCheck %s

// With targets=NAME the cross-entropy reads a new input NAME of the tokens'
// type, placed after them and marked with the tokens it stands for; the model
// itself still reads the tokens.
// CHECK-LABEL: func.func @targets() {
// CHECK:         %[[IDS:.*]] = mt.input {name = "ids"} : tensor<2x8xi64>
// CHECK-NEXT:    %[[TGT:.*]] = mt.input {mt.targets_of = "ids", name = "tgt"} : tensor<2x8xi64>
// CHECK:         mt.gather %{{.*}}, %[[IDS]]
// CHECK:         %[[LOGITS:.*]] = mt.matmul
// CHECK:         %[[L:.*]] = mt.next_token_ce %[[LOGITS]], %[[TGT]] {ignore_index = -100 : i64}
// CHECK-NEXT:    mt.loss %[[L]] : tensor<f32>
func.func @targets() -> (tensor<2x8x16xf32> {mt.output_name = "out"}) {
  %ids = mt.input {name = "ids"} : tensor<2x8xi64>
  %emb = mt.param {name = "emb", trainable = true} : tensor<16x4xf32>
  %x = mt.gather %emb, %ids {axis = 0 : i64} : (tensor<16x4xf32>, tensor<2x8xi64>) -> tensor<2x8x4xf32>
  %logits = mt.matmul %x, %emb {transpose_b = true} : (tensor<2x8x4xf32>, tensor<16x4xf32>) -> tensor<2x8x16xf32>
  return %logits : tensor<2x8x16xf32>
}

// -----

// A targets name the graph already uses would make two inputs one name.
// expected-error@+1 {{targets input 'tgt' is already a graph input; name the targets input something else}}
func.func @taken() -> (tensor<2x8x16xf32> {mt.output_name = "out"}) {
  %t = mt.input {name = "ids"} : tensor<2x8xi64>
  %u = mt.input {name = "tgt"} : tensor<2x8xi64>
  %x = mt.input {name = "x"} : tensor<2x8x16xf32>
  return %x : tensor<2x8x16xf32>
}
