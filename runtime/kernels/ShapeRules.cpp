// ShapeRules.cpp - the shape rule of every kernel family (ShapeRules.h), shared by both backends and the plan validator.
#include "megatrain/kernels/ShapeRules.h"

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "megatrain/plan/PointwiseProgram.h"

namespace megatrain::kernels {
namespace {

// `axis` checked against `shape`; `outside` says how a bad one relates to it.
int axisWithin(const KernelCall& call, int64_t axis, const Shape& shape, const char* outside) {
  if (axis < 0 || axis >= shape.rank)
    fail(call, "axis " + std::to_string(axis) + " " + outside + " " + shape.str());
  return static_cast<int>(axis);
}

// The dims [from, rank) of `shape`.
Shape trailing(const Shape& shape, int from) {
  Shape result;
  for (int i = from; i < shape.rank; ++i) result.dims[result.rank++] = shape[i];
  return result;
}

std::optional<int64_t> ignoreIndex(const KernelCall& call) {
  if (!call.attrs.has("ignore_index")) return std::nullopt;
  return call.attrs.getInt("ignore_index");
}

}  // namespace

// ---- elementwise ----

void fillRule(const KernelCall& call) {}

void broadcastBinaryRule(const KernelCall& call) {
  const Operand &a = call.in[0], &b = call.in[1];
  Shape expected;
  if (!broadcastShapes(a.shape, b.shape, expected))
    fail(call, "shapes " + a.shape.str() + " and " + b.shape.str() + " do not broadcast");
  requireShape(call, call.out[0], expected, "output");
}

void sameShapesRule(const KernelCall& call) {
  const Shape& shape = call.out[0].shape;
  for (int i = 0; i < call.numIn; ++i) requireShape(call, call.in[i], shape, "input");
  for (int i = 1; i < call.numOut; ++i) requireShape(call, call.out[i], shape, "output");
}

void pointwiseRule(const KernelCall& call) {
  const std::vector<int64_t>& code = call.attrs.getInts("code");
  const std::vector<int64_t>& outputs = call.attrs.getInts("outputs");
  const std::string wrong = pointwise::checkProgram(call.numIn, code.data(), code.size(),
                                                    call.attrs.getFloats("constants").size(), outputs.data(),
                                                    outputs.size());
  if (!wrong.empty()) fail(call, wrong);
  if (outputs.size() != static_cast<size_t>(call.numOut))
    fail(call, "'outputs' names " + std::to_string(outputs.size()) + " registers for " +
                   std::to_string(call.numOut) + " outputs");
  const Shape& shape = call.out[0].shape;
  for (int i = 0; i < call.numIn; ++i)
    if (!broadcastsTo(call.in[i].shape, shape))
      fail(call, std::string("input '") + call.in[i].name + "' has shape " + call.in[i].shape.str() +
                     ", which does not broadcast to " + shape.str());
  for (int i = 1; i < call.numOut; ++i) requireShape(call, call.out[i], shape, "output");
}

void minMaxGradRule(const KernelCall& call) {
  const Operand &a = call.in[0], &b = call.in[1];
  Shape expected;
  if (!broadcastShapes(a.shape, b.shape, expected))
    fail(call, "shapes " + a.shape.str() + " and " + b.shape.str() + " do not broadcast");
  requireShape(call, call.in[2], expected, "dy");
  requireShape(call, call.out[0], expected, "output");
  requireShape(call, call.out[1], expected, "output");
}

// ---- activations ----

bool geluTanhForm(const KernelCall& call) {
  const std::string_view form = call.attrs.getString("approximate", "");
  if (form == "tanh") return true;
  if (form != "none") fail(call, "approximate must be \"none\" or \"tanh\", got \"" + std::string(form) + "\"");
  return false;
}

void geluRule(const KernelCall& call) {
  sameShapesRule(call);
  geluTanhForm(call);
}

// ---- matmul ----

Shape matmulBatchOf(const Shape& operand) {
  Shape batch = operand;
  batch.rank = operand.rank - 2;
  return batch;
}

MatmulDims matmulDims(const KernelCall& call) {
  const std::string_view precision = call.attrs.getString("precision", "fp32");
  if (precision != "fp32" && precision != "tf32" && precision != "bf16")
    fail(call, "precision must be fp32, tf32 or bf16, got '" + std::string(precision) + "'");
  const Operand &a = call.in[0], &b = call.in[1], &y = call.out[0];
  if (a.shape.rank < 2 || b.shape.rank < 2)
    fail(call, "operands must have rank >= 2, got " + a.shape.str() + " and " + b.shape.str());
  MatmulDims d;
  d.transA = call.attrs.getInt("transpose_a", 0) != 0;
  d.transB = call.attrs.getInt("transpose_b", 0) != 0;
  const int64_t a0 = a.shape[a.shape.rank - 2], a1 = a.shape[a.shape.rank - 1];
  const int64_t b0 = b.shape[b.shape.rank - 2], b1 = b.shape[b.shape.rank - 1];
  d.m = d.transA ? a1 : a0;
  d.k = d.transA ? a0 : a1;
  const int64_t kb = d.transB ? b1 : b0;
  d.n = d.transB ? b0 : b1;
  if (d.k != kb)
    fail(call, "inner dimensions differ: a " + a.shape.str() + (d.transA ? "^T" : "") + ", b " +
                   b.shape.str() + (d.transB ? "^T" : ""));
  if (!broadcastShapes(matmulBatchOf(a.shape), matmulBatchOf(b.shape), d.batch))
    fail(call, "batch dims of " + a.shape.str() + " and " + b.shape.str() + " do not broadcast");
  Shape expected = d.batch;
  expected.dims[expected.rank++] = d.m;
  expected.dims[expected.rank++] = d.n;
  requireShape(call, y, expected, "output");
  return d;
}

void matmulRule(const KernelCall& call) { matmulDims(call); }

bool matmulAddendIsBias(const KernelCall& call) {
  const Shape &r = call.in[2].shape, &y = call.out[0].shape;
  return r.rank == 1 && y.rank >= 2 && !(r == y) && r.dims[0] == y.dims[y.rank - 1];
}

void matmulAddRule(const KernelCall& call) {
  matmulDims(call);
  const Operand &r = call.in[2], &y = call.out[0];
  if (!(r.shape == y.shape) && !matmulAddendIsBias(call)) {
    Shape bias;
    bias.rank = 1;
    bias.dims[0] = y.shape.rank ? y.shape.dims[y.shape.rank - 1] : 0;
    fail(call, "addend r 'in2' has shape " + r.shape.str() + ", expected " + y.shape.str() + " (the output's) or " +
                   bias.str() + " (a bias over its last dim)");
  }
  if (y.dtype == DType::BF16)
    fail(call, "the output is bf16; matmul_add writes f32 or f64 (only matmul rounds its product to bf16)");
  if (r.dtype != y.dtype)
    fail(call, std::string("addend r is ") + dtypeLabel(r.dtype) + ", the output " + dtypeLabel(y.dtype) +
                   "; they must match");
}

void matmulBiasGeluRule(const KernelCall& call) {
  const MatmulDims d = matmulDims(call);
  const Operand &bias = call.in[2], &y = call.out[0], &z = call.out[1];
  requireShape(call, z, y.shape, "pre-activation z");
  if (bias.shape.rank != 1 || bias.shape.dims[0] != d.n) {
    Shape expected;
    expected.rank = 1;
    expected.dims[0] = d.n;
    fail(call, "bias 'in2' has shape " + bias.shape.str() + ", expected " + expected.str() +
                   " (the output's last dim)");
  }
  for (const Operand* operand : {&bias, &y, &z})
    if (operand->dtype != DType::F32)
      fail(call, std::string("the bias, y and z are f32; got bias ") + dtypeLabel(bias.dtype) + ", y " +
                     dtypeLabel(y.dtype) + ", z " + dtypeLabel(z.dtype));
}

void matmulGeluGradRule(const KernelCall& call) {
  matmulDims(call);
  const Operand &z = call.in[2], &dz = call.out[0];
  requireShape(call, z, dz.shape, "pre-activation z");
  if (z.dtype != DType::F32 || dz.dtype != DType::F32)
    fail(call, std::string("z and dz are f32; got z ") + dtypeLabel(z.dtype) + ", dz " + dtypeLabel(dz.dtype));
}

// ---- shape kernels ----

void reshapeRule(const KernelCall& call) {
  const Operand &x = call.in[0], &y = call.out[0];
  if (x.shape.elements() != y.shape.elements())
    fail(call, "cannot reshape " + x.shape.str() + " to " + y.shape.str());
}

void transposeDims(const KernelCall& call, int64_t* strides) {
  const Operand &x = call.in[0], &y = call.out[0];
  const std::vector<int64_t>& perm = call.attrs.getInts("perm");
  if (perm.size() != static_cast<size_t>(x.shape.rank))
    fail(call, "perm has " + std::to_string(perm.size()) + " entries, input " + x.shape.str() +
                   " has rank " + std::to_string(x.shape.rank));
  bool seen[kMaxRank] = {};
  Shape expected;
  expected.rank = x.shape.rank;
  int64_t xStrides[kMaxRank];
  contiguousStrides(x.shape, xStrides);
  for (int i = 0; i < x.shape.rank; ++i) {
    const int64_t p = perm[i];
    if (p < 0 || p >= x.shape.rank || seen[p]) fail(call, "perm is not a permutation");
    seen[p] = true;
    expected.dims[i] = x.shape[static_cast<int>(p)];
    strides[i] = xStrides[p];
  }
  requireShape(call, y, expected, "output");
}

void transposeRule(const KernelCall& call) {
  int64_t strides[kMaxRank];
  transposeDims(call, strides);
}

void broadcastToRule(const KernelCall& call) {
  const Operand &x = call.in[0], &y = call.out[0];
  if (!broadcastsTo(x.shape, y.shape)) fail(call, x.shape.str() + " does not broadcast to " + y.shape.str());
}

void sumToRule(const KernelCall& call) {
  const Operand &x = call.in[0], &y = call.out[0];
  if (!broadcastsTo(y.shape, x.shape))
    fail(call, "output " + y.shape.str() + " does not broadcast to input " + x.shape.str());
}

// ---- reductions ----

ReduceDims reduceDims(const KernelCall& call) {
  const Operand &x = call.in[0], &y = call.out[0];
  const std::vector<int64_t>& axes = call.attrs.getInts("axes");
  const bool keepdims = call.attrs.getInt("keepdims", 1) != 0;
  bool reduced[kMaxRank] = {};
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= x.shape.rank)
      fail(call, "axis " + std::to_string(axes[i]) + " is outside input " + x.shape.str());
    if (i && axes[i] <= axes[i - 1]) fail(call, "axes must be sorted and distinct");
    reduced[axes[i]] = true;
  }
  if (axes.empty())
    for (int i = 0; i < x.shape.rank; ++i) reduced[i] = true;
  ReduceDims d;
  d.kept = x.shape;
  Shape expected;
  for (int i = 0; i < x.shape.rank; ++i) {
    if (reduced[i]) {
      d.count *= x.shape[i];
      d.kept.dims[i] = 1;
      if (keepdims) expected.dims[expected.rank++] = 1;
    } else {
      expected.dims[expected.rank++] = x.shape[i];
    }
  }
  requireShape(call, y, expected, "output");
  return d;
}

void reduceRule(const KernelCall& call) { reduceDims(call); }

// ---- softmax ----

SoftmaxLanes softmaxLanes(const KernelCall& call) {
  const Shape& shape = call.out[0].shape;
  for (int i = 0; i < call.numIn; ++i) requireShape(call, call.in[i], shape, "input");
  const int a = axisWithin(call, call.attrs.getInt("axis"), shape, "is outside");
  return {shape.product(0, a), shape[a], shape.product(a + 1, shape.rank)};
}

void softmaxRule(const KernelCall& call) { softmaxLanes(call); }

// ---- gather ----

namespace {
// `data` is the gathered-from operand (data or ddata), `gathered` the gathered
// one (y or dy); checks gathered.shape = data[:axis] + indices.shape + data[axis+1:].
GatherDims checkGather(const KernelCall& call, const Operand& data, const Operand& indices,
                       const Operand& gathered, const char* gatheredRole) {
  requireDType(call, indices, DType::I64, "indices");
  const int ax = axisWithin(call, call.attrs.getInt("axis", 0), data.shape, "is outside");
  Shape expected;
  expected.rank = data.shape.rank - 1 + indices.shape.rank;
  if (expected.rank > kMaxRank) fail(call, "result rank exceeds " + std::to_string(kMaxRank));
  int at = 0;
  for (int i = 0; i < ax; ++i) expected.dims[at++] = data.shape[i];
  for (int i = 0; i < indices.shape.rank; ++i) expected.dims[at++] = indices.shape[i];
  for (int i = ax + 1; i < data.shape.rank; ++i) expected.dims[at++] = data.shape[i];
  requireShape(call, gathered, expected, gatheredRole);
  return {data.shape.product(0, ax), data.shape[ax], data.shape.product(ax + 1, data.shape.rank),
          indices.shape.elements()};
}
}  // namespace

GatherDims gatherDims(const KernelCall& call) {
  return checkGather(call, call.in[0], call.in[1], call.out[0], "output");
}

GatherDims gatherGradDims(const KernelCall& call) {
  return checkGather(call, call.out[0], call.in[0], call.in[1], "dy");
}

void gatherRule(const KernelCall& call) { gatherDims(call); }
void gatherGradRule(const KernelCall& call) { gatherGradDims(call); }

// ---- normalizations ----

namespace {
// x viewed as [rows, d] around `axis`; `param` (scale or weight) has x.shape[axis:].
NormRows normRows(const KernelCall& call, const Operand& x, const Operand& param, const char* paramRole,
                  double epsilon) {
  const int ax = axisWithin(call, call.attrs.getInt("axis"), x.shape, "is outside");
  const Shape normalized = trailing(x.shape, ax);
  requireShape(call, param, normalized, paramRole);
  return {x.shape.product(0, ax), normalized.elements(), epsilon};
}
}  // namespace

NormRows layerNormRows(const KernelCall& call) {
  const NormRows r = normRows(call, call.in[0], call.in[1], "scale", call.attrs.getFloat("epsilon", 1e-5));
  requireShape(call, call.in[2], call.in[1].shape, "bias");
  requireShape(call, call.out[0], call.in[0].shape, "output");
  return r;
}

NormRows layerNormGradRows(const KernelCall& call) {
  const NormRows r = normRows(call, call.in[0], call.in[1], "scale", call.attrs.getFloat("epsilon", 1e-5));
  requireShape(call, call.in[2], call.in[0].shape, "dy");
  requireShape(call, call.out[0], call.in[0].shape, "dx");
  requireShape(call, call.out[1], call.in[1].shape, "dscale");
  requireShape(call, call.out[2], call.in[1].shape, "dbias");
  return r;
}

void layerNormRule(const KernelCall& call) { layerNormRows(call); }
void layerNormGradRule(const KernelCall& call) { layerNormGradRows(call); }

NormRows rmsNormRows(const KernelCall& call) {
  const NormRows r = normRows(call, call.in[0], call.in[1], "weight", call.attrs.getFloat("epsilon"));
  requireShape(call, call.out[0], call.in[0].shape, "output");
  return r;
}

NormRows rmsNormGradRows(const KernelCall& call) {
  const NormRows r = normRows(call, call.in[0], call.in[1], "weight", call.attrs.getFloat("epsilon"));
  requireShape(call, call.in[2], call.in[0].shape, "dy");
  requireShape(call, call.out[0], call.in[0].shape, "dx");
  requireShape(call, call.out[1], call.in[1].shape, "dweight");
  return r;
}

NormRows rmsNormGradAddRows(const KernelCall& call) {
  if (call.numOut != 2 && call.numOut != 3)
    fail(call, std::to_string(call.numOut) + " outputs, it writes 2 (dx, dweight) or 3 (and dx_bf16)");
  const NormRows r = rmsNormGradRows(call);
  const Operand& x = call.in[0];
  requireShape(call, call.in[3], x.shape, "addend");
  requireDType(call, call.in[3], x.dtype, "addend");
  if (call.numOut == 3) {
    requireShape(call, call.out[2], x.shape, "dx_bf16");
    requireDType(call, call.out[2], DType::BF16, "dx_bf16");
    if (x.dtype != DType::F32)
      fail(call, std::string("dx_bf16 is the bf16 copy of an f32 dx; x is ") + dtypeLabel(x.dtype));
  }
  return r;
}

void rmsNormRule(const KernelCall& call) { rmsNormRows(call); }
void rmsNormGradRule(const KernelCall& call) { rmsNormGradRows(call); }
void rmsNormGradAddRule(const KernelCall& call) { rmsNormGradAddRows(call); }

// ---- cross-entropy ----

SoftmaxCeDims softmaxCeDims(const KernelCall& call) {
  const Operand &logits = call.in[0], &labels = call.in[1];
  requireDType(call, labels, DType::I64, "labels");
  if (logits.shape.rank < 2) fail(call, "logits must be [N, C, D...], got " + logits.shape.str());
  Shape expected;
  expected.dims[expected.rank++] = logits.shape[0];
  for (int i = 2; i < logits.shape.rank; ++i) expected.dims[expected.rank++] = logits.shape[i];
  requireShape(call, labels, expected, "labels");
  const std::string_view reduction = call.attrs.getString("reduction", "mean");
  if (reduction != "mean" && reduction != "sum")
    fail(call, "reduction '" + std::string(reduction) + "' is not supported (mean or sum)");
  return {logits.shape[0], logits.shape[1], logits.shape.product(2, logits.shape.rank), ignoreIndex(call),
          reduction == "mean"};
}

void softmaxCeRule(const KernelCall& call) {
  softmaxCeDims(call);
  requireScalar(call, call.out[0], "loss");
}

void softmaxCeGradRule(const KernelCall& call) {
  softmaxCeDims(call);
  requireScalar(call, call.in[2], "dloss");
  requireShape(call, call.out[0], call.in[0].shape, "dlogits");
}

NextTokenDims nextTokenDims(const KernelCall& call) {
  const Operand &logits = call.in[0], &tokens = call.in[1];
  requireDType(call, tokens, DType::I64, "tokens");
  if (logits.shape.rank != 3) fail(call, "logits must be [B, T, V], got " + logits.shape.str());
  Shape expected;
  expected.rank = 2;
  expected.dims[0] = logits.shape[0];
  expected.dims[1] = logits.shape[1];
  requireShape(call, tokens, expected, "tokens");
  return {logits.shape[0], logits.shape[1], logits.shape[2], ignoreIndex(call)};
}

void nextTokenCeRule(const KernelCall& call) {
  nextTokenDims(call);
  requireScalar(call, call.out[0], "loss");
}

void nextTokenCeGradRule(const KernelCall& call) {
  nextTokenDims(call);
  requireScalar(call, call.in[2], "dloss");
  requireShape(call, call.out[0], call.in[0].shape, "dlogits");
}

LinearCeDims linearCeDims(const KernelCall& call) {
  const Operand &hidden = call.in[0], &weight = call.in[1], &tokens = call.in[2];
  requireDType(call, tokens, DType::I64, "tokens");
  if (hidden.shape.rank != 3) fail(call, "hidden must be [B, T, H], got " + hidden.shape.str());
  if (weight.shape.rank != 2 || weight.shape[1] != hidden.shape[2])
    fail(call, "weight must be [V, H] with H = " + std::to_string(hidden.shape[2]) + ", got " + weight.shape.str());
  LinearCeDims d;
  d.b = hidden.shape[0];
  d.t = hidden.shape[1];
  d.h = hidden.shape[2];
  d.v = weight.shape[0];
  d.chunk = call.attrs.getInt("chunk");
  if (d.chunk < 1) fail(call, "chunk must be at least 1, got " + std::to_string(d.chunk));
  d.ignore = ignoreIndex(call);
  d.operands = hidden.dtype;
  if (d.operands != DType::F32 && d.operands != DType::F64 && d.operands != DType::BF16)
    fail(call, std::string("hidden must be f32, f64 or bf16, got ") + dtypeLabel(d.operands));
  requireDType(call, weight, d.operands, "weight");
  d.results = d.operands == DType::BF16 ? DType::F32 : d.operands;
  Shape rows;
  rows.rank = 2;
  rows.dims[0] = d.b;
  rows.dims[1] = d.t;
  requireShape(call, tokens, rows, "tokens");
  return d;
}

void linearCeRule(const KernelCall& call) {
  const LinearCeDims d = linearCeDims(call);
  requireScalar(call, call.out[0], "loss");
  requireDType(call, call.out[0], d.results, "loss");
  requireShape(call, call.out[1], call.in[2].shape, "lse");
  requireDType(call, call.out[1], d.results, "lse");
}

void linearCeGradRule(const KernelCall& call) {
  const LinearCeDims d = linearCeDims(call);
  requireShape(call, call.in[3], call.in[2].shape, "lse");
  requireDType(call, call.in[3], d.results, "lse");
  requireScalar(call, call.in[4], "dloss");
  requireDType(call, call.in[4], d.results, "dloss");
  requireShape(call, call.out[0], call.in[0].shape, "dhidden");
  requireDType(call, call.out[0], d.results, "dhidden");
  requireShape(call, call.out[1], call.in[1].shape, "dweight");
  requireDType(call, call.out[1], d.results, "dweight");
}

// ---- where ----

void whereRule(const KernelCall& call) {
  const Operand &cond = call.in[0], &x = call.in[1], &y = call.in[2];
  Shape xy, expected;
  if (!broadcastShapes(x.shape, y.shape, xy) || !broadcastShapes(cond.shape, xy, expected))
    fail(call, "shapes " + cond.shape.str() + ", " + x.shape.str() + " and " + y.shape.str() +
                   " do not broadcast");
  requireShape(call, call.out[0], expected, "output");
}

// ---- concat and slice ----

void concatRule(const KernelCall& call) {
  const Operand& y = call.out[0];
  const int a = axisWithin(call, call.attrs.getInt("axis"), y.shape, "out of range for output");
  Shape expected = y.shape;
  expected.dims[a] = 0;
  for (int k = 0; k < call.numIn; ++k) {
    const Operand& x = call.in[k];
    Shape like = y.shape;
    if (x.shape.rank == y.shape.rank) like.dims[a] = x.shape[a];
    requireShape(call, x, like, "input");
    expected.dims[a] += x.shape[a];
  }
  requireShape(call, y, expected, "output");
}

namespace {
// Reads starts/ends/steps (one per dim, normalized as docs/ops.md says) against `full`.
SliceWalk walkOf(const KernelCall& call, const Shape& full) {
  const std::vector<int64_t>& starts = call.attrs.getInts("starts");
  const std::vector<int64_t>& ends = call.attrs.getInts("ends");
  const std::vector<int64_t>& steps = call.attrs.getInts("steps");
  const size_t rank = static_cast<size_t>(full.rank);
  if (starts.size() != rank || ends.size() != rank || steps.size() != rank)
    fail(call, "starts, ends and steps need " + std::to_string(full.rank) + " entries each for " + full.str());
  SliceWalk walk;
  walk.sliced.rank = full.rank;
  int64_t fullStrides[kMaxRank];
  contiguousStrides(full, fullStrides);
  for (int d = 0; d < full.rank; ++d) {
    const int64_t start = starts[d], end = ends[d], step = steps[d];
    if (step < 1) fail(call, "step " + std::to_string(step) + " of dim " + std::to_string(d) + " must be >= 1");
    if (start < 0 || start > full[d] || end < 0 || end > full[d])
      fail(call, "range [" + std::to_string(start) + ", " + std::to_string(end) + ") of dim " +
                     std::to_string(d) + " is not within [0, " + std::to_string(full[d]) + "]");
    walk.sliced.dims[d] = end > start ? (end - start + step - 1) / step : 0;
    walk.base += start * fullStrides[d];
    walk.strides[d] = step * fullStrides[d];
  }
  return walk;
}
}  // namespace

SliceWalk sliceWalk(const KernelCall& call) {
  const SliceWalk walk = walkOf(call, call.in[0].shape);
  requireShape(call, call.out[0], walk.sliced, "output");
  return walk;
}

SliceWalk sliceGradWalk(const KernelCall& call) {
  const SliceWalk walk = walkOf(call, call.out[0].shape);
  requireShape(call, call.in[0], walk.sliced, "input");
  return walk;
}

void sliceRule(const KernelCall& call) { sliceWalk(call); }
void sliceGradRule(const KernelCall& call) { sliceGradWalk(call); }

// ---- cast ----

void castRule(const KernelCall& call) { requireShape(call, call.out[0], call.in[0].shape, "output"); }

// ---- attention ----

Shape attentionLseShape(const AttentionDims& d) {
  Shape s;
  s.rank = 3;
  s.dims[0] = d.batch;
  s.dims[1] = d.qHeads;
  s.dims[2] = d.sq;
  return s;
}

namespace {
// `shape` with dims 1 and 2 swapped when `bshd` (rank 4).
Shape headMajor(const Shape& shape, bool bshd) {
  Shape out = shape;
  if (bshd && out.rank == 4) std::swap(out.dims[1], out.dims[2]);
  return out;
}

// The stored shape of a [B, heads, seq, D] operand in the layout of `role`.
Shape stored(const AttentionDims& d, AttentionRole role, int64_t heads, int64_t seq) {
  Shape s;
  s.rank = 4;
  s.dims[0] = d.batch;
  s.dims[1] = d.bshdOf(role) ? seq : heads;
  s.dims[2] = d.bshdOf(role) ? heads : seq;
  s.dims[3] = d.d;
  return s;
}

AttentionDims checkQkv(const KernelCall& call, int64_t roles) {
  const Operand &q = call.in[0], &k = call.in[1], &v = call.in[2];
  if (q.shape.rank != 4 || k.shape.rank != 4)
    fail(call, "q " + q.shape.str() + " and k " + k.shape.str() + " must have rank 4");
  AttentionDims d;
  d.bshd = call.attrs.getInt("bshd", 0);
  if (d.bshd < 0 || (d.bshd & ~roles) != 0)
    fail(call, "bshd " + std::to_string(d.bshd) + " has bits outside " + std::to_string(roles) +
                   " (q 1, k 2, v 4, y 8" + ((roles & kRoleDy) ? ", dy 16)" : ")"));
  const Shape qs = headMajor(q.shape, d.bshdOf(kRoleQ)), ks = headMajor(k.shape, d.bshdOf(kRoleK));
  d.batch = qs[0];
  d.qHeads = qs[1];
  d.kvHeads = ks[1];
  d.sq = qs[2];
  d.skv = ks[2];
  d.d = qs[3];
  d.scale = call.attrs.getFloat("scale");
  d.causal = call.attrs.getInt("causal", 0) != 0;
  if (ks[0] != d.batch || ks[3] != d.d || d.kvHeads <= 0 || d.qHeads % d.kvHeads != 0)
    fail(call, "k " + k.shape.str() + " does not fit q " + q.shape.str() +
                   " as [B, Hkv, Skv, D] with Hkv dividing Hq" +
                   (d.bshd ? " (bshd " + std::to_string(d.bshd) + ")" : std::string()));
  requireShape(call, v, stored(d, kRoleV, d.kvHeads, d.skv), "v");
  return d;
}

// An operand and what the messages call it.
struct Named {
  const Operand* operand;
  const char* role;
};

std::string named(const Named& n) {
  return std::string(n.role) + " '" + n.operand->name + "' is " + dtypeLabel(n.operand->dtype);
}

// Sets d.operands and d.lse from `operands` (every one but lse) and `lse`.
void attentionTypes(const KernelCall& call, std::initializer_list<Named> operands, Named lse, AttentionDims& d) {
  bool bf16 = false;
  for (const Named& n : operands) bf16 = bf16 || n.operand->dtype == DType::BF16;
  if (bf16) {
    for (const Named& n : operands)
      if (n.operand->dtype != DType::BF16)
        fail(call, named(n) + ", expected bf16 (bf16 attention takes every operand but lse in bf16)");
    if (lse.operand->dtype != DType::F32) fail(call, named(lse) + ", expected f32 (bf16 attention keeps lse in f32)");
    const std::string_view precision = call.attrs.getString("precision", "fp32");
    if (precision != "bf16")
      fail(call, "bf16 operands need the precision 'bf16', got '" + std::string(precision) + "'");
    d.operands = DType::BF16;
    d.lse = DType::F32;
    return;
  }
  const Named& first = *operands.begin();
  if (first.operand->dtype != DType::F32 && first.operand->dtype != DType::F64)
    fail(call, named(first) + "; attention computes in f32, f64 or bf16");
  for (const Named& n : operands)
    if (n.operand->dtype != first.operand->dtype) fail(call, named(n) + " but " + named(first));
  if (lse.operand->dtype != first.operand->dtype) fail(call, named(lse) + " but " + named(first));
  d.operands = d.lse = first.operand->dtype;
}
}  // namespace

AttentionDims attentionDims(const KernelCall& call) {
  AttentionDims d = checkQkv(call, kRoleQ | kRoleK | kRoleV | kRoleY);
  requireShape(call, call.out[0], stored(d, kRoleY, d.qHeads, d.sq), "output");
  requireShape(call, call.out[1], attentionLseShape(d), "lse");
  attentionTypes(call, {{&call.in[0], "q"}, {&call.in[1], "k"}, {&call.in[2], "v"}, {&call.out[0], "output"}},
                 {&call.out[1], "lse"}, d);
  return d;
}

AttentionDims attentionGradDims(const KernelCall& call) {
  AttentionDims d = checkQkv(call, kRoleQ | kRoleK | kRoleV | kRoleY | kRoleDy);
  requireShape(call, call.in[3], stored(d, kRoleY, d.qHeads, d.sq), "y");
  requireShape(call, call.in[4], attentionLseShape(d), "lse");
  requireShape(call, call.in[5], stored(d, kRoleDy, d.qHeads, d.sq), "dy");
  requireShape(call, call.out[0], call.in[0].shape, "dq");
  requireShape(call, call.out[1], call.in[1].shape, "dk");
  requireShape(call, call.out[2], call.in[2].shape, "dv");
  attentionTypes(call,
                 {{&call.in[0], "q"}, {&call.in[1], "k"}, {&call.in[2], "v"}, {&call.in[3], "y"}, {&call.in[5], "dy"},
                  {&call.out[0], "dq"}, {&call.out[1], "dk"}, {&call.out[2], "dv"}},
                 {&call.in[4], "lse"}, d);
  return d;
}

void attentionRule(const KernelCall& call) { attentionDims(call); }
void attentionGradRule(const KernelCall& call) { attentionGradDims(call); }

// ---- rotary ----

Shape rotaryLogicalShape(const KernelCall& call) {
  return headMajor(call.in[0].shape, call.attrs.getInt("bshd", 0) != 0);
}

void rotaryTableStrides(const KernelCall& call, const Shape& table, int64_t* strides) {
  const Shape logical = rotaryLogicalShape(call);
  broadcastStrides(table, logical, strides);
  if (call.attrs.getInt("bshd", 0) != 0) std::swap(strides[1], strides[2]);
}

void rotaryRule(const KernelCall& call) {
  const Operand &x = call.in[0], &cos = call.in[1], &sin = call.in[2];
  const int64_t bshd = call.attrs.getInt("bshd", 0);
  if (bshd != 0 && bshd != 1) fail(call, "bshd " + std::to_string(bshd) + " is not 0 or 1");
  if (bshd && x.shape.rank != 4) fail(call, "bshd needs x of rank 4, got " + x.shape.str());
  const Shape s = rotaryLogicalShape(call);
  if (s.rank == 0 || s[s.rank - 1] % 2 != 0) fail(call, "x " + s.str() + " must have an even last dim");
  for (const Operand* table : {&cos, &sin}) {
    Shape joint;
    if (table->shape.rank == 0 || table->shape[table->shape.rank - 1] != s[s.rank - 1] ||
        !broadcastShapes(table->shape, s, joint) || joint != s)
      fail(call, "cos and sin " + table->shape.str() + " must broadcast to " + s.str() + " and keep its last dim" +
                     (bshd ? " (x " + x.shape.str() + " read as [B, H, S, D])" : ""));
  }
  requireShape(call, call.out[0], x.shape, "output");
  rotaryTypes(call);
}

RotaryTypes rotaryTypes(const KernelCall& call) {
  const bool grad = std::string_view(call.kernel) == "rotary_grad";
  const Named x{&call.in[0], grad ? "dy" : "x"}, cos{&call.in[1], "cos"}, sin{&call.in[2], "sin"},
      y{&call.out[0], "output"};
  if (x.operand->dtype == DType::BF16 || y.operand->dtype == DType::BF16) {
    for (const Named& n : {x, y})
      if (n.operand->dtype != DType::F32 && n.operand->dtype != DType::BF16)
        fail(call, named(n) + ", expected f32 or bf16 (with a bf16 " + x.role + " or output, both are f32 or bf16)");
    for (const Named& n : {cos, sin})
      if (n.operand->dtype != DType::F32)
        fail(call, named(n) + ", expected f32 (with a bf16 " + x.role + " or output the tables stay f32)");
    return {x.operand->dtype, DType::F32, y.operand->dtype};
  }
  if (x.operand->dtype != DType::F32 && x.operand->dtype != DType::F64)
    fail(call, named(x) + "; rotary computes in f32, f64 or bf16");
  for (const Named& n : {cos, sin, y})
    if (n.operand->dtype != x.operand->dtype) fail(call, named(n) + " but " + named(x));
  return {x.operand->dtype, x.operand->dtype, x.operand->dtype};
}

}  // namespace megatrain::kernels
