// RUN: megatrain-opt %s --split-input-file --mt-fuse-attention | FileCheck %s

// Fragments of the tiny models' `megatrain-compile --emit=mt` output
// (tests/models/llm), with the sequence cut to 4 and q, k, v as arguments.
// The causal mask is the folded constant the exporter writes: 0 on and below
// the diagonal, the lowest float above it.

// Llama (llama_opt.onnx): grouped-query attention, 4 query heads on 2 kv
// heads, k and v repeated by reshape/broadcast_to/reshape, k^T spelled as
// reshape/transpose/reshape, q and k each pre-scaled by sqrt(1/sqrt(16)),
// where(isnan(p), 0, p) after the softmax.
// CHECK-LABEL: func.func @llama_gqa
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x4x4x16xf32>, %[[K:.*]]: tensor<2x2x4x16xf32>, %[[V:.*]]: tensor<2x2x4x16xf32>)
// CHECK-NEXT:    %[[Y:.*]], %{{.*}} = mt.attention %[[Q]], %[[K]], %[[V]] {causal = true, scale = 2.500000e-01 : f64} : (tensor<2x4x4x16xf32>, tensor<2x2x4x16xf32>, tensor<2x2x4x16xf32>) -> (tensor<2x4x4x16xf32>, tensor<2x4x4xf32>)
// CHECK-NEXT:    %[[O:.*]] = mt.transpose %[[Y]]
// CHECK-NEXT:    return %[[O]]
func.func @llama_gqa(%q: tensor<2x4x4x16xf32>, %k: tensor<2x2x4x16xf32>, %v: tensor<2x2x4x16xf32>) -> tensor<2x4x4x16xf32> {
  %9 = mt.constant {value = dense<5.000000e-01> : tensor<f32>} : tensor<f32>
  %10 = mt.constant {value = dense<[[[[0.000000e+00, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.000000e+00, 0.000000e+00, -3.40282347E+38, -3.40282347E+38], [0.000000e+00, 0.000000e+00, 0.000000e+00, -3.40282347E+38], [0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00]]], [[[0.000000e+00, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.000000e+00, 0.000000e+00, -3.40282347E+38, -3.40282347E+38], [0.000000e+00, 0.000000e+00, 0.000000e+00, -3.40282347E+38], [0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00]]]]> : tensor<2x1x4x4xf32>} : tensor<2x1x4x4xf32>
  %11 = mt.constant {value = dense<0.000000e+00> : tensor<f32>} : tensor<f32>
  %55 = mt.reshape %k : (tensor<2x2x4x16xf32>) -> tensor<2x2x1x4x16xf32>
  %56 = mt.broadcast_to %55 : (tensor<2x2x1x4x16xf32>) -> tensor<2x2x2x4x16xf32>
  %57 = mt.reshape %v : (tensor<2x2x4x16xf32>) -> tensor<2x2x1x4x16xf32>
  %58 = mt.broadcast_to %57 : (tensor<2x2x1x4x16xf32>) -> tensor<2x2x2x4x16xf32>
  %59 = mt.reshape %58 : (tensor<2x2x2x4x16xf32>) -> tensor<2x4x4x16xf32>
  %60 = mt.reshape %56 : (tensor<2x2x2x4x16xf32>) -> tensor<8x4x16xf32>
  %61 = mt.transpose %60 {perm = array<i64: 0, 2, 1>} : (tensor<8x4x16xf32>) -> tensor<8x16x4xf32>
  %62 = mt.reshape %61 : (tensor<8x16x4xf32>) -> tensor<2x4x16x4xf32>
  %63 = mt.mul %q, %9 : (tensor<2x4x4x16xf32>, tensor<f32>) -> tensor<2x4x4x16xf32>
  %64 = mt.mul %62, %9 : (tensor<2x4x16x4xf32>, tensor<f32>) -> tensor<2x4x16x4xf32>
  %65 = mt.matmul %63, %64 : (tensor<2x4x4x16xf32>, tensor<2x4x16x4xf32>) -> tensor<2x4x4x4xf32>
  %66 = mt.add %65, %10 : (tensor<2x4x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x4x4x4xf32>
  %67 = mt.softmax %66 {axis = 3 : i64} : tensor<2x4x4x4xf32>
  %68 = mt.isnan %67 : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xi1>
  %69 = mt.where %68, %11, %67 : (tensor<2x4x4x4xi1>, tensor<f32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %70 = mt.matmul %69, %59 : (tensor<2x4x4x4xf32>, tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  %71 = mt.transpose %70 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  return %71 : tensor<2x4x4x16xf32>
}

// -----

// GPT-2 (gpt2_opt.onnx): multi-head attention; q, k and v are the heads of
// one projection, so the traced bases are the transposes, not the slices.
// CHECK-LABEL: func.func @gpt2_mha
// CHECK:         %[[K:.*]] = mt.transpose %{{.*}} {perm = array<i64: 0, 2, 1, 3>}
// CHECK:         %[[V:.*]] = mt.transpose
// CHECK:         %[[Q:.*]] = mt.transpose
// CHECK-NEXT:    %[[Y:.*]], %{{.*}} = mt.attention %[[Q]], %[[K]], %[[V]] {causal = true, scale = 2.500000e-01 : f64}
// CHECK-NOT:     mt.softmax
// CHECK-NOT:     mt.matmul
// CHECK:         return %[[Y]]
func.func @gpt2_mha(%qkv: tensor<2x4x192xf32>) -> tensor<2x4x4x16xf32> {
  %6 = mt.constant {value = dense<5.000000e-01> : tensor<f32>} : tensor<f32>
  %7 = mt.constant {value = dense<[[[[0.000000e+00, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.000000e+00, 0.000000e+00, -3.40282347E+38, -3.40282347E+38], [0.000000e+00, 0.000000e+00, 0.000000e+00, -3.40282347E+38], [0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00]]], [[[0.000000e+00, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.000000e+00, 0.000000e+00, -3.40282347E+38, -3.40282347E+38], [0.000000e+00, 0.000000e+00, 0.000000e+00, -3.40282347E+38], [0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00]]]]> : tensor<2x1x4x4xf32>} : tensor<2x1x4x4xf32>
  %8 = mt.constant {value = dense<0.000000e+00> : tensor<f32>} : tensor<f32>
  %25 = mt.slice %qkv {ends = array<i64: 2, 4, 64>, starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<2x4x192xf32>) -> tensor<2x4x64xf32>
  %26 = mt.slice %qkv {ends = array<i64: 2, 4, 128>, starts = array<i64: 0, 0, 64>, steps = array<i64: 1, 1, 1>} : (tensor<2x4x192xf32>) -> tensor<2x4x64xf32>
  %27 = mt.slice %qkv {ends = array<i64: 2, 4, 192>, starts = array<i64: 0, 0, 128>, steps = array<i64: 1, 1, 1>} : (tensor<2x4x192xf32>) -> tensor<2x4x64xf32>
  %28 = mt.reshape %26 : (tensor<2x4x64xf32>) -> tensor<2x4x4x16xf32>
  %29 = mt.transpose %28 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  %30 = mt.reshape %27 : (tensor<2x4x64xf32>) -> tensor<2x4x4x16xf32>
  %31 = mt.transpose %30 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  %32 = mt.reshape %25 : (tensor<2x4x64xf32>) -> tensor<2x4x4x16xf32>
  %33 = mt.transpose %32 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  %34 = mt.reshape %29 : (tensor<2x4x4x16xf32>) -> tensor<8x4x16xf32>
  %35 = mt.transpose %34 {perm = array<i64: 0, 2, 1>} : (tensor<8x4x16xf32>) -> tensor<8x16x4xf32>
  %36 = mt.reshape %35 : (tensor<8x16x4xf32>) -> tensor<2x4x16x4xf32>
  %37 = mt.mul %33, %6 : (tensor<2x4x4x16xf32>, tensor<f32>) -> tensor<2x4x4x16xf32>
  %38 = mt.mul %36, %6 : (tensor<2x4x16x4xf32>, tensor<f32>) -> tensor<2x4x16x4xf32>
  %39 = mt.matmul %37, %38 : (tensor<2x4x4x16xf32>, tensor<2x4x16x4xf32>) -> tensor<2x4x4x4xf32>
  %40 = mt.add %39, %7 : (tensor<2x4x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x4x4x4xf32>
  %41 = mt.softmax %40 {axis = 3 : i64} : tensor<2x4x4x4xf32>
  %42 = mt.isnan %41 : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xi1>
  %43 = mt.where %42, %8, %41 : (tensor<2x4x4x4xi1>, tensor<f32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %44 = mt.matmul %43, %31 : (tensor<2x4x4x4xf32>, tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  return %44 : tensor<2x4x4x16xf32>
}

// -----

// Opset 23 (llama_opset23_opt.onnx, imported Attention node): mt.scale on q
// and k, k used through transpose_b, no isnan guard; here with one kv head
// (multi-query, as the Mistral export has) and the mask without a batch dim.
// CHECK-LABEL: func.func @opset23_mqa
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x4x4x16xf32>, %[[K:.*]]: tensor<2x1x4x16xf32>, %[[V:.*]]: tensor<2x1x4x16xf32>)
// CHECK-NEXT:    %[[Y:.*]], %{{.*}} = mt.attention %[[Q]], %[[K]], %[[V]] {causal = true, scale = 2.500000e-01 : f64}
// CHECK-NEXT:    return %[[Y]]
func.func @opset23_mqa(%q: tensor<2x4x4x16xf32>, %k: tensor<2x1x4x16xf32>, %v: tensor<2x1x4x16xf32>) -> tensor<2x4x4x16xf32> {
  %8 = mt.constant {value = dense<[[0.000000e+00, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.000000e+00, 0.000000e+00, -3.40282347E+38, -3.40282347E+38], [0.000000e+00, 0.000000e+00, 0.000000e+00, -3.40282347E+38], [0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00]]> : tensor<4x4xf32>} : tensor<4x4xf32>
  %53 = mt.reshape %k : (tensor<2x1x4x16xf32>) -> tensor<2x1x1x4x16xf32>
  %54 = mt.broadcast_to %53 : (tensor<2x1x1x4x16xf32>) -> tensor<2x1x4x4x16xf32>
  %55 = mt.reshape %54 : (tensor<2x1x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  %56 = mt.reshape %v : (tensor<2x1x4x16xf32>) -> tensor<2x1x1x4x16xf32>
  %57 = mt.broadcast_to %56 : (tensor<2x1x1x4x16xf32>) -> tensor<2x1x4x4x16xf32>
  %58 = mt.reshape %57 : (tensor<2x1x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  %59 = mt.scale %q {alpha = 5.000000e-01 : f64} : tensor<2x4x4x16xf32>
  %60 = mt.scale %55 {alpha = 5.000000e-01 : f64} : tensor<2x4x4x16xf32>
  %61 = mt.matmul %59, %60 {transpose_b = true} : (tensor<2x4x4x16xf32>, tensor<2x4x4x16xf32>) -> tensor<2x4x4x4xf32>
  %62 = mt.add %61, %8 : (tensor<2x4x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4x4xf32>
  %63 = mt.softmax %62 {axis = 3 : i64} : tensor<2x4x4x4xf32>
  %64 = mt.matmul %63, %58 : (tensor<2x4x4x4xf32>, tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  return %64 : tensor<2x4x4x16xf32>
}

// -----

// Not causal: key 3 is visible to query 0. Must not fuse.
// CHECK-LABEL: func.func @mask_not_causal
// CHECK-NOT:     mt.attention
// CHECK:         mt.softmax
func.func @mask_not_causal(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x4x16xf32>, %v: tensor<1x2x4x16xf32>) -> tensor<1x2x4x16xf32> {
  %m = mt.constant {value = dense<[[0.000000e+00, -3.40282347E+38, -3.40282347E+38, 0.000000e+00], [0.000000e+00, 0.000000e+00, -3.40282347E+38, -3.40282347E+38], [0.000000e+00, 0.000000e+00, 0.000000e+00, -3.40282347E+38], [0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00]]> : tensor<4x4xf32>} : tensor<4x4xf32>
  %s = mt.matmul %q, %k {transpose_b = true} : (tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>) -> tensor<1x2x4x4xf32>
  %a = mt.add %s, %m : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = mt.softmax %a {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %y = mt.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32>) -> tensor<1x2x4x16xf32>
  return %y : tensor<1x2x4x16xf32>
}

// -----

// A mask known only at run time (an attention_mask input): must not fuse.
// CHECK-LABEL: func.func @mask_at_run_time
// CHECK-NOT:     mt.attention
// CHECK:         mt.softmax
func.func @mask_at_run_time(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x4x16xf32>, %v: tensor<1x2x4x16xf32>, %m: tensor<4x4xf32>) -> tensor<1x2x4x16xf32> {
  %s = mt.matmul %q, %k {transpose_b = true} : (tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>) -> tensor<1x2x4x4xf32>
  %a = mt.add %s, %m : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = mt.softmax %a {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %y = mt.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32>) -> tensor<1x2x4x16xf32>
  return %y : tensor<1x2x4x16xf32>
}

// -----

// The probabilities are also an output (output_attentions): must not fuse.
// CHECK-LABEL: func.func @probs_extra_user
// CHECK-NOT:     mt.attention
// CHECK:         %[[P:.*]] = mt.softmax
// CHECK:         return %{{.*}}, %[[P]]
func.func @probs_extra_user(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x4x16xf32>, %v: tensor<1x2x4x16xf32>) -> (tensor<1x2x4x16xf32>, tensor<1x2x4x4xf32>) {
  %m = mt.constant {value = dense<[[0.000000e+00, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.000000e+00, 0.000000e+00, -3.40282347E+38, -3.40282347E+38], [0.000000e+00, 0.000000e+00, 0.000000e+00, -3.40282347E+38], [0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00]]> : tensor<4x4xf32>} : tensor<4x4xf32>
  %s = mt.matmul %q, %k {transpose_b = true} : (tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>) -> tensor<1x2x4x4xf32>
  %a = mt.add %s, %m : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = mt.softmax %a {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %y = mt.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32>) -> tensor<1x2x4x16xf32>
  return %y, %p : tensor<1x2x4x16xf32>, tensor<1x2x4x4xf32>
}

// -----

// k read through a transpose that swaps heads and positions: the layout does
// not match k^T of any [B, H, S, D] tensor on the chain, so no fusion.
// CHECK-LABEL: func.func @k_layout_mismatch
// CHECK-NOT:     mt.attention
// CHECK:         mt.softmax
func.func @k_layout_mismatch(%q: tensor<1x4x4x16xf32>, %k: tensor<1x4x4x16xf32>, %v: tensor<1x4x4x16xf32>) -> tensor<1x4x4x16xf32> {
  %m = mt.constant {value = dense<[[0.000000e+00, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.000000e+00, 0.000000e+00, -3.40282347E+38, -3.40282347E+38], [0.000000e+00, 0.000000e+00, 0.000000e+00, -3.40282347E+38], [0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00]]> : tensor<4x4xf32>} : tensor<4x4xf32>
  %kt = mt.transpose %k {perm = array<i64: 0, 2, 3, 1>} : (tensor<1x4x4x16xf32>) -> tensor<1x4x16x4xf32>
  %s = mt.matmul %q, %kt : (tensor<1x4x4x16xf32>, tensor<1x4x16x4xf32>) -> tensor<1x4x4x4xf32>
  %a = mt.add %s, %m : (tensor<1x4x4x4xf32>, tensor<4x4xf32>) -> tensor<1x4x4x4xf32>
  %p = mt.softmax %a {axis = 3 : i64} : tensor<1x4x4x4xf32>
  %y = mt.matmul %p, %v : (tensor<1x4x4x4xf32>, tensor<1x4x4x16xf32>) -> tensor<1x4x4x16xf32>
  return %y : tensor<1x4x4x16xf32>
}

// -----

// At long sequences the constant folder leaves the broadcast of the mask
// over the batch unfolded (Llama at seq 2048: [1, 1, S, S] -> [B, 1, S, S]);
// the mask is still the constant behind it, and the broadcast goes with it.
// CHECK-LABEL: func.func @mask_through_broadcast
// CHECK-NEXT:    %[[Y:.*]], %{{.*}} = mt.attention %arg0, %arg1, %arg2 {causal = true, scale = 2.500000e-01 : f64}
// CHECK-NOT:     mt.broadcast_to
// CHECK-NOT:     mt.softmax
// CHECK:         return %[[Y]]
func.func @mask_through_broadcast(%q: tensor<2x4x4x16xf32>, %k: tensor<2x4x4x16xf32>, %v: tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32> {
  %s = mt.constant {value = dense<2.500000e-01> : tensor<f32>} : tensor<f32>
  %m = mt.constant {value = dense<[[[[0.000000e+00, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.000000e+00, 0.000000e+00, -3.40282347E+38, -3.40282347E+38], [0.000000e+00, 0.000000e+00, 0.000000e+00, -3.40282347E+38], [0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00]]]]> : tensor<1x1x4x4xf32>} : tensor<1x1x4x4xf32>
  %kt = mt.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x4x16xf32>) -> tensor<2x4x16x4xf32>
  %qs = mt.mul %q, %s : (tensor<2x4x4x16xf32>, tensor<f32>) -> tensor<2x4x4x16xf32>
  %sc = mt.matmul %qs, %kt : (tensor<2x4x4x16xf32>, tensor<2x4x16x4xf32>) -> tensor<2x4x4x4xf32>
  %mb = mt.broadcast_to %m : (tensor<1x1x4x4xf32>) -> tensor<2x1x4x4xf32>
  %a = mt.add %sc, %mb : (tensor<2x4x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x4x4x4xf32>
  %p = mt.softmax %a {axis = 3 : i64} : tensor<2x4x4x4xf32>
  %y = mt.matmul %p, %v : (tensor<2x4x4x4xf32>, tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  return %y : tensor<2x4x4x16xf32>
}

// -----

// A broadcast that stretches the mask's own rows is not a causal mask over
// the scores: left alone.
// CHECK-LABEL: func.func @mask_rows_broadcast
// CHECK-NOT:     mt.attention
// CHECK:         mt.softmax
func.func @mask_rows_broadcast(%q: tensor<2x4x4x16xf32>, %k: tensor<2x4x4x16xf32>, %v: tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32> {
  %m = mt.constant {value = dense<[[[[0.000000e+00, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38]]]]> : tensor<1x1x1x4xf32>} : tensor<1x1x1x4xf32>
  %kt = mt.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x4x16xf32>) -> tensor<2x4x16x4xf32>
  %sc = mt.matmul %q, %kt : (tensor<2x4x4x16xf32>, tensor<2x4x16x4xf32>) -> tensor<2x4x4x4xf32>
  %mb = mt.broadcast_to %m : (tensor<1x1x1x4xf32>) -> tensor<2x1x4x4xf32>
  %a = mt.add %sc, %mb : (tensor<2x4x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x4x4x4xf32>
  %p = mt.softmax %a {axis = 3 : i64} : tensor<2x4x4x4xf32>
  %y = mt.matmul %p, %v : (tensor<2x4x4x4xf32>, tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  return %y : tensor<2x4x4x16xf32>
}
