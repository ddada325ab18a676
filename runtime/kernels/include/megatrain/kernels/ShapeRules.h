// ShapeRules.h - one shape rule per kernel family: what operand shapes and attributes a kernel accepts.
//
// Each family has a geometry function that checks a call and returns the dims
// both backends compute with (the CPU kernels and the CUDA launchers call it
// at every launch; it allocates nothing), and the manifest (Manifest.h) names
// one rule per kernel that the plan validator runs at load time. A violation
// is an Error "<kernel>: <what>" naming the operand. Dtype checks stay with
// the backends; only the index dtype of gather and the label dtype of the
// cross-entropy kernels, which are part of the shape contract, are checked
// here.
#pragma once

#include <cstdint>
#include <optional>

#include "megatrain/kernels/KernelCall.h"

namespace megatrain::kernels {

// ---- elementwise: fill, broadcasting binary ops, unary maps and their gradients ----

// fill: no inputs, any output.
void fillRule(const KernelCall& call);
// add, sub, mul, div, max, min: out = broadcast(a.shape, b.shape).
void broadcastBinaryRule(const KernelCall& call);
// Every operand (inputs and outputs) has out[0]'s shape: unary maps and their gradients.
void sameShapesRule(const KernelCall& call);
// max_grad, min_grad: (a, b, dy) -> (da, db); dy, da and db the broadcast shape.
void minMaxGradRule(const KernelCall& call);

// pointwise: a valid program (megatrain/plan/PointwiseProgram.h) over the
// inputs, every input broadcasting to out[0].shape and every output that shape.
void pointwiseRule(const KernelCall& call);

// ---- activations: silu, swiglu, gelu and their gradients ----

// gelu's "approximate" attribute (required): true for "tanh", false for "none".
bool geluTanhForm(const KernelCall& call);
// sameShapesRule plus a valid "approximate".
void geluRule(const KernelCall& call);

// ---- matmul ----

struct MatmulDims {
  int64_t m = 0, n = 0, k = 0;
  bool transA = false, transB = false;
  Shape batch;  // the broadcast batch shape of y
};
// y[..., m, n] = A[..., m, k] B[..., k, n], A = a or a^T and B = b or b^T on the last two dims;
// the "precision" attribute, when present, is fp32, tf32 or bf16.
MatmulDims matmulDims(const KernelCall& call);
// An operand's batch dims: all but the last two.
Shape matmulBatchOf(const Shape& operand);
void matmulRule(const KernelCall& call);
// matmul_add: matmul's rule, y is not bf16 (only matmul rounds its product to bf16), and the
// addend r (in[2]) has y's dtype and either y's shape or [n], y's last dim (a bias added to
// every row).
void matmulAddRule(const KernelCall& call);
// Whether matmul_add's addend is a bias [n] rather than a tensor of y's shape.
bool matmulAddendIsBias(const KernelCall& call);
// matmul_bias_gelu (a, b, bias -> y, z): matmul's rule, a bias [n] (y's last dim), z of
// y's shape; the bias, y and z f32 (a and b f32, or bf16 accumulated in fp32).
void matmulBiasGeluRule(const KernelCall& call);
// matmul_gelu_grad (a, b, z -> dz): matmul's rule, the pre-activation z of dz's shape; z and dz
// f32 (a and b f32, or bf16 accumulated in fp32).
void matmulGeluGradRule(const KernelCall& call);

// ---- shape kernels: reshape, transpose, broadcast_to, sum_to ----

void reshapeRule(const KernelCall& call);
// y.shape[i] = x.shape[perm[i]]; fills strides[i] = x's row-major stride of dim perm[i].
void transposeDims(const KernelCall& call, int64_t* strides);
void transposeRule(const KernelCall& call);
void broadcastToRule(const KernelCall& call);
void sumToRule(const KernelCall& call);

// ---- reductions: reduce_sum, reduce_mean ----

struct ReduceDims {
  Shape kept;         // x.shape with the reduced dims set to 1 (y's layout)
  int64_t count = 1;  // elements summed into each output
};
// Axes sorted and distinct; empty axes reduce every dim (ONNX ReduceSum).
ReduceDims reduceDims(const KernelCall& call);
void reduceRule(const KernelCall& call);

// ---- softmax along one axis ----

struct SoftmaxLanes {
  int64_t outer = 0, n = 0, inner = 0;  // viewed as [outer, n, inner] around the axis
};
SoftmaxLanes softmaxLanes(const KernelCall& call);
void softmaxRule(const KernelCall& call);

// ---- gather along one axis, and its scatter-add gradient ----

struct GatherDims {
  int64_t outer = 0, a = 0, inner = 0, n = 0;  // data as [outer, a, inner], n indices
};
// gather: (data, indices) -> y; gather_grad: (indices, dy) -> ddata.
GatherDims gatherDims(const KernelCall& call);
GatherDims gatherGradDims(const KernelCall& call);
void gatherRule(const KernelCall& call);
void gatherGradRule(const KernelCall& call);

// ---- normalizations over dims [axis, rank) ----

struct NormRows {
  int64_t rows = 0, d = 0;
  double epsilon = 0;
};
// layer_norm: (x, scale, bias) -> y; layer_norm_grad: (x, scale, dy) -> (dx, dscale, dbias).
NormRows layerNormRows(const KernelCall& call);
NormRows layerNormGradRows(const KernelCall& call);
void layerNormRule(const KernelCall& call);
void layerNormGradRule(const KernelCall& call);
// rms_norm: (x, weight) -> y; rms_norm_grad: (x, weight, dy) -> (dx, dweight).
NormRows rmsNormRows(const KernelCall& call);
NormRows rmsNormGradRows(const KernelCall& call);
// rms_norm_grad_add: (x, weight, dy, addend) -> (dx, dweight) or (dx, dweight,
// dx_bf16): rms_norm_grad's rows, addend of x's shape and type, dx_bf16 of
// x's shape, bf16, from an f32 x.
NormRows rmsNormGradAddRows(const KernelCall& call);
void rmsNormRule(const KernelCall& call);
void rmsNormGradRule(const KernelCall& call);
void rmsNormGradAddRule(const KernelCall& call);

// ---- cross-entropy losses ----

struct SoftmaxCeDims {
  int64_t n = 0, c = 0, inner = 0;  // logits [N, C, D...] with inner = prod(D...)
  std::optional<int64_t> ignore;
  bool mean = true;
};
// softmax_ce: (logits, labels) -> loss; softmax_ce_grad: (logits, labels, dloss) -> dlogits.
SoftmaxCeDims softmaxCeDims(const KernelCall& call);
void softmaxCeRule(const KernelCall& call);
void softmaxCeGradRule(const KernelCall& call);

struct NextTokenDims {
  int64_t b = 0, t = 0, v = 0;  // logits [B, T, V], tokens [B, T]
  std::optional<int64_t> ignore;
};
// next_token_ce: (logits, tokens) -> loss; next_token_ce_grad: (logits, tokens, dloss) -> dlogits.
NextTokenDims nextTokenDims(const KernelCall& call);
void nextTokenCeRule(const KernelCall& call);
void nextTokenCeGradRule(const KernelCall& call);

struct LinearCeDims {
  int64_t b = 0, t = 0, h = 0, v = 0;  // hidden [B, T, H], weight [V, H], tokens [B, T]
  int64_t chunk = 0;                   // vocabulary rows per chunk, 1 <= chunk
  std::optional<int64_t> ignore;
  DType operands = DType::Unspecified;  // hidden and weight (F32, F64 or BF16)
  DType results = DType::Unspecified;   // loss, lse, dloss, dhidden, dweight: F32 for BF16 operands, else the operands'
  int64_t rows() const { return b * t; }
};
// linear_ce: (hidden, weight, tokens) -> (loss, lse [B, T]);
// linear_ce_grad: (hidden, weight, tokens, lse, dloss) -> (dhidden, dweight).
LinearCeDims linearCeDims(const KernelCall& call);
void linearCeRule(const KernelCall& call);
void linearCeGradRule(const KernelCall& call);

// ---- where ----

// cond ? x : y, all three broadcast to the output.
void whereRule(const KernelCall& call);

// ---- concat, slice, slice_grad ----

void concatRule(const KernelCall& call);

// Where a slice of `full` reads: `sliced` its shape, `base` the element offset
// of its first element and `strides` the per-dim steps in `full`'s elements.
struct SliceWalk {
  Shape sliced;
  int64_t base = 0;
  int64_t strides[kMaxRank] = {};
};
// slice: x -> y = x[starts : ends : steps]; slice_grad: dy -> dx (x's shape).
SliceWalk sliceWalk(const KernelCall& call);
SliceWalk sliceGradWalk(const KernelCall& call);
void sliceRule(const KernelCall& call);
void sliceGradRule(const KernelCall& call);

// ---- cast ----

void castRule(const KernelCall& call);

// ---- attention ----

// The `bshd` attribute's bits: the operand lies as [B, S, H, D] instead of
// [B, H, S, D] (attention_grad's dq, dk, dv follow q, k, v).
enum AttentionRole : int64_t { kRoleQ = 1, kRoleK = 2, kRoleV = 4, kRoleY = 8, kRoleDy = 16 };

struct AttentionDims {
  int64_t batch = 0, qHeads = 0, kvHeads = 0, sq = 0, skv = 0, d = 0;
  double scale = 1;
  bool causal = false;
  int64_t bshd = 0;  // AttentionRole bits
  DType operands = DType::Unspecified;  // q, k, v, y, dy, dq, dk, dv: F32, F64 or BF16
  DType lse = DType::Unspecified;       // F32 for BF16 operands, else the operands'
  int64_t group() const { return qHeads / kvHeads; }
  bool bshdOf(AttentionRole role) const { return (bshd & role) != 0; }
  // Element offset of row (b, h, s) of a [B, heads, seq, D] operand in the layout of `role`.
  int64_t row(AttentionRole role, int64_t heads, int64_t seq, int64_t b, int64_t h, int64_t s) const {
    return (bshdOf(role) ? (b * seq + s) * heads + h : (b * heads + h) * seq + s) * d;
  }
  int64_t qRow(AttentionRole role, int64_t b, int64_t h, int64_t s) const { return row(role, qHeads, sq, b, h, s); }
  int64_t kvRow(AttentionRole role, int64_t b, int64_t h, int64_t s) const { return row(role, kvHeads, skv, b, h, s); }
};
// q [B, Hq, Sq, D], k and v [B, Hkv, Skv, D] with Hkv dividing Hq; an
// operand whose `bshd` bit is set lies as [B, S, H, D] (its dims 1 and 2
// swapped). lse is [B, Hq, Sq] in every layout.
// attention: (q, k, v) -> (y, lse [B, Hq, Sq]);
// attention_grad: (q, k, v, y, lse, dy) -> (dq, dk, dv).
// Element types: all f32, or all f64, or (--precision bf16) every operand
// but lse bf16 with lse f32 and the `precision` attribute "bf16"; another
// combination is an Error naming the operand and its type.
AttentionDims attentionDims(const KernelCall& call);
AttentionDims attentionGradDims(const KernelCall& call);
Shape attentionLseShape(const AttentionDims& d);
void attentionRule(const KernelCall& call);
void attentionGradRule(const KernelCall& call);

// ---- rotary position embedding ----

// (x, cos, sin) -> y: x has an even last dim, cos and sin broadcast to x and keep its last dim.
// With the `bshd` attribute x is rank 4 and read as [B, S, H, D]: the tables
// broadcast to its [B, H, S, D] form. Element types: rotaryTypes.
void rotaryRule(const KernelCall& call);
// rotary and rotary_grad's element types: all four f32, or all f64, or x (dy)
// and the result each f32 or bf16 with cos and sin f32; another combination
// is an Error naming the operand and its type.
struct RotaryTypes {
  DType x = DType::Unspecified, tables = DType::Unspecified, result = DType::Unspecified;
};
RotaryTypes rotaryTypes(const KernelCall& call);
// x's shape as the tables see it: x, or x with dims 1 and 2 swapped under `bshd`.
Shape rotaryLogicalShape(const KernelCall& call);
// Strides (over x's stored dims) that read `table` for each element of x,
// through `bshd`: what rotary's kernels walk the tables with.
void rotaryTableStrides(const KernelCall& call, const Shape& table, int64_t* strides);

}  // namespace megatrain::kernels
