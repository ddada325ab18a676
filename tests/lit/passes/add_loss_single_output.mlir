// RUN: megatrain-opt %s --split-input-file --verify-diagnostics \
// RUN:   --mt-add-loss="mode=next-token-ce" | FileCheck %s

// With the default names and a graph of one output and one input, as
// torch.onnx.export writes it (linear_14, ids): they are the logits and the
// tokens.
// CHECK-LABEL: func.func @one_output() {
// CHECK:         %[[IDS:.*]] = mt.input {name = "ids"} : tensor<2x8xi64>
// CHECK:         %[[LOGITS:.*]] = mt.matmul
// CHECK:         %[[L:.*]] = mt.next_token_ce %[[LOGITS]], %[[IDS]] {ignore_index = -100 : i64}
// CHECK-NEXT:    mt.loss %[[L]] : tensor<f32>
// CHECK-NEXT:    return{{$}}
func.func @one_output() -> (tensor<2x8x16xf32> {mt.output_name = "linear_14"}) {
  %ids = mt.input {name = "ids"} : tensor<2x8xi64>
  %emb = mt.param {name = "emb", trainable = true} : tensor<16x4xf32>
  %x = mt.gather %emb, %ids {axis = 0 : i64} : (tensor<16x4xf32>, tensor<2x8xi64>) -> tensor<2x8x4xf32>
  %logits = mt.matmul %x, %emb {transpose_b = true} : (tensor<2x8x4xf32>, tensor<16x4xf32>) -> tensor<2x8x16xf32>
  return %logits : tensor<2x8x16xf32>
}

// -----

// Two outputs, neither named logits: which one is ambiguous.
// expected-error@+1 {{no graph output named 'logits' (logits); the graph outputs are: a, b}}
func.func @two_outputs() -> (tensor<2x8x16xf32> {mt.output_name = "a"}, tensor<2x8x16xf32> {mt.output_name = "b"}) {
  %ids = mt.input {name = "ids"} : tensor<2x8xi64>
  %x = mt.input {name = "x"} : tensor<2x8x16xf32>
  return %x, %x : tensor<2x8x16xf32>, tensor<2x8x16xf32>
}

// -----

// One output, but two inputs, neither named input_ids.
// expected-error@+1 {{no graph input named 'input_ids' (tokens); the graph inputs are: ids, x}}
func.func @two_inputs() -> (tensor<2x8x16xf32> {mt.output_name = "out"}) {
  %ids = mt.input {name = "ids"} : tensor<2x8xi64>
  %x = mt.input {name = "x"} : tensor<2x8x16xf32>
  return %x : tensor<2x8x16xf32>
}
