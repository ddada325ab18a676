// RUN: megatrain-opt %s --split-input-file --verify-diagnostics \
// RUN:   --mt-add-loss="mode=next-token-ce logits=out tokens=ids ignore-index=0" | FileCheck %s

// The loss is appended on the logits output against the tokens input, with
// the requested ignore index; the function then returns nothing.
// CHECK-LABEL: func.func @next_token() {
// CHECK:         %[[IDS:.*]] = mt.input {name = "ids"} : tensor<2x8xi64>
// CHECK:         %[[LOGITS:.*]] = mt.matmul
// CHECK:         %[[L:.*]] = mt.next_token_ce %[[LOGITS]], %[[IDS]] {ignore_index = 0 : i64} : (tensor<2x8x16xf32>, tensor<2x8xi64>) -> tensor<f32>
// CHECK-NEXT:    mt.loss %[[L]] : tensor<f32>
// CHECK-NEXT:    return{{$}}
func.func @next_token() -> (tensor<2x8x16xf32> {mt.output_name = "out"}, tensor<2x8x4xf32> {mt.output_name = "hidden"}) {
  %ids = mt.input {name = "ids"} : tensor<2x8xi64>
  %emb = mt.param {name = "emb", trainable = true} : tensor<16x4xf32>
  %x = mt.gather %emb, %ids {axis = 0 : i64} : (tensor<16x4xf32>, tensor<2x8xi64>) -> tensor<2x8x4xf32>
  %logits = mt.matmul %x, %emb {transpose_b = true} : (tensor<2x8x4xf32>, tensor<16x4xf32>) -> tensor<2x8x16xf32>
  return %logits, %x : tensor<2x8x16xf32>, tensor<2x8x4xf32>
}

// -----

// expected-error@+1 {{no graph output named 'out' (logits); the graph outputs are: logits}}
func.func @no_logits() -> (tensor<2x8x16xf32> {mt.output_name = "logits"}) {
  %x = mt.input {name = "x"} : tensor<2x8x16xf32>
  return %x : tensor<2x8x16xf32>
}

// -----

// expected-error@+1 {{no graph input named 'ids' (tokens); the graph inputs are: input_ids, x}}
func.func @no_tokens() -> (tensor<2x8x16xf32> {mt.output_name = "out"}) {
  %t = mt.input {name = "input_ids"} : tensor<2x8xi64>
  %x = mt.input {name = "x"} : tensor<2x8x16xf32>
  return %x : tensor<2x8x16xf32>
}

// -----

func.func @tokens_not_i64() -> (tensor<2x8x16xf32> {mt.output_name = "out"}) {
  // expected-error@+1 {{tokens input 'ids' must be i64 [B, T], got 'tensor<2x8xi32>'}}
  %t = mt.input {name = "ids"} : tensor<2x8xi32>
  %x = mt.input {name = "x"} : tensor<2x8x16xf32>
  return %x : tensor<2x8x16xf32>
}

// -----

// The logits' [B, T] must match the tokens'.
// expected-error@+1 {{logits output 'out' must be floating-point [B, T, V] with [B, T] = the shape of tokens 'tensor<2x8xi64>', got 'tensor<2x7x16xf32>'}}
func.func @logits_mismatch() -> (tensor<2x7x16xf32> {mt.output_name = "out"}) {
  %t = mt.input {name = "ids"} : tensor<2x8xi64>
  %x = mt.input {name = "x"} : tensor<2x7x16xf32>
  return %x : tensor<2x7x16xf32>
}
