// RUN: megatrain-opt %s --split-input-file --mt-fuse-linear-ce | FileCheck %s
// RUN: megatrain-opt %s --split-input-file --mt-fuse-linear-ce="tile-bytes=4096" | FileCheck %s --check-prefix=TILE
// RUN: megatrain-opt %s --split-input-file --mt-fuse-linear-ce="chunk=96" | FileCheck %s --check-prefix=CHUNK
// RUN: megatrain-opt %s --split-input-file --mt-fuse-linear-ce --mt-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: megatrain-opt %s --split-input-file --mt-fuse-linear-ce --mt-autodiff --mt-precision="precision=bf16" | FileCheck %s --check-prefix=BF16

// The tail of a causal LM as mt-add-loss leaves it (B = 2, T = 8, H = 16,
// V = 300): the final hidden states projected through the transpose of the
// [V, H] weight, then the next-token loss.

// CHECK-LABEL: func.func @projection_loss
// CHECK:         %[[H:.*]] = mt.param {name = "h"
// CHECK:         %[[W:.*]] = mt.param {name = "w"
// CHECK-NEXT:    %[[L:.*]], %[[LSE:.*]] = mt.linear_ce %[[H]], %[[W]], %[[IDS:.*]] {chunk = 300 : i64, ignore_index = -100 : i64} : (tensor<2x8x16xf32>, tensor<300x16xf32>, tensor<2x8xi64>) -> (tensor<f32>, tensor<2x8xf32>)
// CHECK-NEXT:    mt.loss %[[L]]
// 16 tokens: a 4096-byte tile is 64 rows, raised to the 128-row quantum.
// TILE-LABEL:  func.func @projection_loss
// TILE:          mt.linear_ce {{.*}} {chunk = 128 : i64, ignore_index = -100 : i64}
// CHUNK-LABEL: func.func @projection_loss
// CHUNK:         mt.linear_ce {{.*}} {chunk = 96 : i64, ignore_index = -100 : i64}
// The gradient: one linear_ce_grad reads the forward's lse; dweight goes to
// the weight itself (no transpose, no matmul).
// GRAD-LABEL:  func.func @projection_loss
// GRAD:          %[[H:.*]] = mt.param {name = "h"
// GRAD:          %[[W:.*]] = mt.param {name = "w"
// GRAD:          %[[L:.*]], %[[LSE:.*]] = mt.linear_ce %[[H]], %[[W]], %[[IDS:[^ ]*]] {chunk = 300 : i64
// GRAD-NOT:      mt.matmul
// GRAD:          %[[DH:.*]], %[[DW:.*]] = mt.linear_ce_grad %[[H]], %[[W]], %[[IDS]], %[[LSE]], %{{.*}} {chunk = 300 : i64, ignore_index = -100 : i64} : (tensor<2x8x16xf32>, tensor<300x16xf32>, tensor<2x8xi64>, tensor<2x8xf32>, tensor<f32>) -> (tensor<2x8x16xf32>, tensor<300x16xf32>)
// GRAD-NOT:      mt.matmul
// GRAD-DAG:      mt.param_grad %[[DH]] {param = "h"}
// GRAD-DAG:      mt.param_grad %[[DW]] {param = "w"}
// mt-precision bf16: hidden and weight are products' operands (here parameters,
// so bf16 fetches); loss, lse and the gradients stay f32.
// BF16-LABEL:  func.func @projection_loss
// BF16:          %[[H:.*]] = mt.param {mt.master_element = f32, name = "h", trainable = true} : tensor<2x8x16xbf16>
// BF16:          %[[W:.*]] = mt.param {mt.master_element = f32, name = "w", trainable = true} : tensor<300x16xbf16>
// BF16:          mt.linear_ce %[[H]], %[[W]], %{{.*}} {chunk = 300 : i64, ignore_index = -100 : i64, precision = "bf16"} : (tensor<2x8x16xbf16>, tensor<300x16xbf16>, tensor<2x8xi64>) -> (tensor<f32>, tensor<2x8xf32>)
// BF16:          mt.linear_ce_grad %[[H]], %[[W]], {{.*}} {chunk = 300 : i64, ignore_index = -100 : i64, precision = "bf16"} : (tensor<2x8x16xbf16>, tensor<300x16xbf16>, tensor<2x8xi64>, tensor<2x8xf32>, tensor<f32>) -> (tensor<2x8x16xf32>, tensor<300x16xf32>)
func.func @projection_loss() {
  %ids = mt.input {name = "ids"} : tensor<2x8xi64>
  %h = mt.param {name = "h", trainable = true} : tensor<2x8x16xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<300x16xf32>
  %wt = mt.transpose %w {perm = array<i64: 1, 0>} : (tensor<300x16xf32>) -> tensor<16x300xf32>
  %logits = mt.matmul %h, %wt : (tensor<2x8x16xf32>, tensor<16x300xf32>) -> tensor<2x8x300xf32>
  %loss = mt.next_token_ce %logits, %ids {ignore_index = -100 : i64} : (tensor<2x8x300xf32>, tensor<2x8xi64>) -> tensor<f32>
  mt.loss %loss : tensor<f32>
  return
}

// -----

// transpose_b = true names the [V, H] weight directly.
// CHECK-LABEL: func.func @transpose_flag
// CHECK:         mt.linear_ce %{{.*}}, %{{.*}}, %{{.*}} {chunk = 300 : i64, ignore_index = 7 : i64}
// CHECK-NOT:     mt.matmul
func.func @transpose_flag() {
  %ids = mt.input {name = "ids"} : tensor<2x8xi64>
  %h = mt.param {name = "h", trainable = true} : tensor<2x8x16xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<300x16xf32>
  %logits = mt.matmul %h, %w {transpose_b = true} : (tensor<2x8x16xf32>, tensor<300x16xf32>) -> tensor<2x8x300xf32>
  %loss = mt.next_token_ce %logits, %ids {ignore_index = 7 : i64} : (tensor<2x8x300xf32>, tensor<2x8xi64>) -> tensor<f32>
  mt.loss %loss : tensor<f32>
  return
}

// -----

// The logits are also a kept output: they must exist, so no fusion.
// CHECK-LABEL: func.func @logits_kept
// CHECK-NOT:     mt.linear_ce
// CHECK:         mt.matmul
// CHECK:         mt.next_token_ce
// CHECK:         mt.output
func.func @logits_kept() {
  %ids = mt.input {name = "ids"} : tensor<2x8xi64>
  %h = mt.param {name = "h", trainable = true} : tensor<2x8x16xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<300x16xf32>
  %wt = mt.transpose %w {perm = array<i64: 1, 0>} : (tensor<300x16xf32>) -> tensor<16x300xf32>
  %logits = mt.matmul %h, %wt : (tensor<2x8x16xf32>, tensor<16x300xf32>) -> tensor<2x8x300xf32>
  %loss = mt.next_token_ce %logits, %ids {ignore_index = -100 : i64} : (tensor<2x8x300xf32>, tensor<2x8xi64>) -> tensor<f32>
  mt.loss %loss : tensor<f32>
  mt.output %logits {name = "logits"} : tensor<2x8x300xf32>
  return
}

// -----

// A weight stored [H, V] (no transpose to look through) is not the [V, H]
// projection the op takes: no fusion.
// CHECK-LABEL: func.func @weight_h_by_v
// CHECK-NOT:     mt.linear_ce
// CHECK:         mt.next_token_ce
func.func @weight_h_by_v() {
  %ids = mt.input {name = "ids"} : tensor<2x8xi64>
  %h = mt.param {name = "h", trainable = true} : tensor<2x8x16xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<16x300xf32>
  %logits = mt.matmul %h, %w : (tensor<2x8x16xf32>, tensor<16x300xf32>) -> tensor<2x8x300xf32>
  %loss = mt.next_token_ce %logits, %ids {ignore_index = -100 : i64} : (tensor<2x8x300xf32>, tensor<2x8xi64>) -> tensor<f32>
  mt.loss %loss : tensor<f32>
  return
}

// -----

// The transpose has another reader: it stays, and the projection still fuses.
// CHECK-LABEL: func.func @transpose_shared
// CHECK:         mt.transpose
// CHECK:         mt.linear_ce
// CHECK-NOT:     mt.next_token_ce
// CHECK:         mt.output
func.func @transpose_shared() {
  %ids = mt.input {name = "ids"} : tensor<2x8xi64>
  %h = mt.param {name = "h", trainable = true} : tensor<2x8x16xf32>
  %w = mt.param {name = "w", trainable = true} : tensor<300x16xf32>
  %wt = mt.transpose %w {perm = array<i64: 1, 0>} : (tensor<300x16xf32>) -> tensor<16x300xf32>
  %logits = mt.matmul %h, %wt : (tensor<2x8x16xf32>, tensor<16x300xf32>) -> tensor<2x8x300xf32>
  %loss = mt.next_token_ce %logits, %ids {ignore_index = -100 : i64} : (tensor<2x8x300xf32>, tensor<2x8xi64>) -> tensor<f32>
  mt.loss %loss : tensor<f32>
  mt.output %wt {name = "wt"} : tensor<16x300xf32>
  return
}
