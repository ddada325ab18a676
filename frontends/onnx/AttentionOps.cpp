//===- AttentionOps.cpp - ONNX Attention (opset 23) as a composition --------===//
//
// torch.onnx.export at opset 23 writes scaled_dot_product_attention as one
// Attention node. It becomes what the opset-18 export spells out:
//   Y = softmax((Q * sqrt(s)) @ (K * sqrt(s))^T + bias) @ V
// with K and V heads repeated for grouped-query attention, the mask turned
// into an additive bias (a bool mask known at import time is folded into a
// float constant), and the optional causal mask and softcap.
//
//===----------------------------------------------------------------------===//
#include "GraphImporter.h"
#include "OnnxShapes.h"

#include "megatrain/Dialect/MtDialect.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace megatrain::onnx_import {

/// What a masked-out score becomes: the lowest float, as torch's export of
/// the same attention uses, so a row is never all -inf.
static constexpr double kMasked = -std::numeric_limits<float>::max();

namespace {
struct AttentionImport {
  NodeImport &n;
  OpBuilder &b;
  Location loc;

  Type like(Value v, ArrayRef<int64_t> shape) {
    return mt::tensorLike(v.getType(), shape);
  }
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    if (shapeOf(x) == shape)
      return x;
    return b.create<mt::ReshapeOp>(loc, like(x, shape), x);
  }
  Value transpose(Value x, ArrayRef<int64_t> perm) {
    return b.create<mt::TransposeOp>(loc, like(x, permuteShape(shapeOf(x), perm)), x,
                                     b.getDenseI64ArrayAttr(perm));
  }

  /// [B, S, heads * H] -> [B, heads, S, H] (3-D inputs name their heads).
  FailureOr<Value> toHeads(Value x, const char *attr, int64_t &heads) {
    ArrayRef<int64_t> s = shapeOf(x);
    if (s.size() == 4) {
      heads = s[1];
      return x;
    }
    if (s.size() != 3) {
      n.error() << "Q, K and V must have rank 3 or 4, got " << shapeStr(s);
      return failure();
    }
    heads = n.intAttr(attr, 0);
    if (heads <= 0 || s[2] % heads != 0) {
      n.error() << "3-D inputs need attribute '" << attr << "' dividing the hidden size "
                << s[2];
      return failure();
    }
    return transpose(reshape(x, {s[0], s[1], heads, s[2] / heads}), {0, 2, 1, 3});
  }

  /// K or V [B, kv, S, H] repeated to [B, kv * group, S, H], each head
  /// `group` times in a row (torch's repeat_interleave).
  Value repeatHeads(Value x, int64_t group) {
    if (group == 1)
      return x;
    ArrayRef<int64_t> s = shapeOf(x);
    Value wide = reshape(x, {s[0], s[1], 1, s[2], s[3]});
    Value spread =
        b.create<mt::BroadcastToOp>(loc, like(x, {s[0], s[1], group, s[2], s[3]}), wide);
    return reshape(spread, {s[0], s[1] * group, s[2], s[3]});
  }

  /// The additive bias of a bool mask: 0 where it holds, kMasked elsewhere.
  Value boolBias(Value mask, Type element) {
    Type type = RankedTensorType::get(shapeOf(mask), element);
    Value zero =
        b.create<mt::FillOp>(loc, mt::tensorLike(type, {}), b.getF64FloatAttr(0.0));
    Value low =
        b.create<mt::FillOp>(loc, mt::tensorLike(type, {}), b.getF64FloatAttr(kMasked));
    return b.create<mt::WhereOp>(loc, type, mask, zero, low);
  }
};
} // namespace

static LogicalResult importAttention(NodeImport &n) {
  for (int k = 4; k < n.node().input_size(); ++k)
    if (n.hasInput(k))
      return n.error() << "input " << k << " (past key/value, sequence lengths) is not "
                       << "supported: export without a KV cache (use_cache=False)";
  for (int k = 1; k < n.node().output_size(); ++k)
    if (n.outputUsed(k))
      return n.error() << "output " << k << " is used; only Y is supported";
  if (n.floatAttr("softcap", 0.0) < 0)
    return n.error() << "softcap must not be negative";

  FailureOr<Value> q = n.operand(0), k = failure(), v = failure();
  if (failed(q) || failed(k = n.operand(1)) || failed(v = n.operand(2)))
    return failure();
  Type element = elementOf(*q);
  if (!isa<FloatType>(element) || elementOf(*k) != element || elementOf(*v) != element)
    return n.error() << "Q, K and V must share one floating-point type";
  AttentionImport a{n, n.builder(), n.loc()};
  bool threeD = shapeOf(*q).size() == 3;
  int64_t qHeads, kvHeads, vHeads;
  FailureOr<Value> q4 = a.toHeads(*q, "q_num_heads", qHeads), k4 = failure(),
                   v4 = failure();
  if (failed(q4) || failed(k4 = a.toHeads(*k, "kv_num_heads", kvHeads)) ||
      failed(v4 = a.toHeads(*v, "kv_num_heads", vHeads)))
    return failure();
  ArrayRef<int64_t> qs = shapeOf(*q4), ks = shapeOf(*k4), vs = shapeOf(*v4);
  if (kvHeads != vHeads || ks[0] != qs[0] || vs[0] != qs[0] || ks[2] != vs[2] ||
      ks[3] != qs[3] || qHeads % kvHeads != 0)
    return n.error() << "Q " << shapeStr(qs) << ", K " << shapeStr(ks) << " and V "
                     << shapeStr(vs) << " do not fit [B, heads, S, H] with K/V heads "
                     << "dividing Q's";
  int64_t batch = qs[0], sq = qs[2], skv = ks[2], headSize = qs[3];
  double scale = n.floatAttr("scale", 1.0 / std::sqrt((double)headSize));
  Value keys = a.repeatHeads(*k4, qHeads / kvHeads);
  Value values = a.repeatHeads(*v4, qHeads / kvHeads);

  OpBuilder &b = a.b;
  Location loc = a.loc;
  double rootScale = std::sqrt(scale);
  Value qScaled = b.create<mt::ScaleOp>(loc, *q4, b.getF64FloatAttr(rootScale));
  Value kScaled = b.create<mt::ScaleOp>(loc, keys, b.getF64FloatAttr(rootScale));
  SmallVector<int64_t> scoreShape = {batch, qHeads, sq, skv};
  Value scores = b.create<mt::MatMulOp>(loc, a.like(qScaled, scoreShape), qScaled,
                                        kScaled, false, true);

  // The mask: known bool masks become a float bias at import time.
  if (n.hasInput(3)) {
    Value bias;
    const ConstTensor *known = n.constant(3);
    if (known && known->kind == ConstKind::Bool) {
      ConstTensor folded;
      folded.kind = constKindOf(element).value_or(ConstKind::F32);
      folded.shape = known->shape;
      for (int64_t m : known->i)
        folded.f.push_back(m ? 0.0 : (double)(float)kMasked);
      FailureOr<Value> made = n.computedConstant(folded, n.node().input(3) + "/bias");
      if (failed(made))
        return failure();
      bias = *made;
    } else {
      FailureOr<Value> mask = n.operand(3);
      if (failed(mask))
        return failure();
      if (elementOf(*mask).isInteger(1))
        bias = a.boolBias(*mask, element);
      else if (elementOf(*mask) == element)
        bias = *mask;
      else
        return n.error() << "attn_mask must be BOOL or Q's type, got " << mask->getType();
    }
    auto shape = mt::broadcastShapes(shapeOf(bias), scoreShape);
    if (failed(shape) || ArrayRef<int64_t>(*shape) != ArrayRef<int64_t>(scoreShape))
      return n.error() << "attn_mask " << shapeStr(shapeOf(bias))
                       << " does not broadcast to the scores " << shapeStr(scoreShape);
    scores = b.create<mt::AddOp>(loc, scores.getType(), scores, bias);
  }
  if (n.intAttr("is_causal", 0) != 0) {
    // Upper-left aligned: query i sees keys j <= i.
    ConstTensor causal;
    causal.kind = constKindOf(element).value_or(ConstKind::F32);
    causal.shape = {sq, skv};
    if (failed(n.checkComputedSize(causal, n.node().output(0) + "/causal")))
      return failure();
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t j = 0; j < skv; ++j)
        causal.f.push_back(j <= i ? 0.0 : (double)(float)kMasked);
    FailureOr<Value> bias = n.computedConstant(causal, n.node().output(0) + "/causal");
    if (failed(bias))
      return failure();
    scores = b.create<mt::AddOp>(loc, scores.getType(), scores, *bias);
  }
  if (double softcap = n.floatAttr("softcap", 0.0); softcap > 0) {
    Value squashed = b.create<mt::TanhOp>(
        loc, b.create<mt::ScaleOp>(loc, scores, b.getF64FloatAttr(1.0 / softcap)));
    scores = b.create<mt::ScaleOp>(loc, squashed, b.getF64FloatAttr(softcap));
  }
  Value probs = b.create<mt::SoftmaxOp>(loc, scores, b.getI64IntegerAttr(3));
  SmallVector<int64_t> outShape = {batch, qHeads, sq, vs[3]};
  Value y =
      b.create<mt::MatMulOp>(loc, a.like(probs, outShape), probs, values, false, false);
  if (threeD)
    y = a.reshape(a.transpose(y, {0, 2, 1, 3}), {batch, sq, qHeads * vs[3]});
  n.setResult(0, y);
  return success();
}

void registerAttentionOps(llvm::StringMap<OpImportFn> &table) {
  table["Attention"] = importAttention;
}

} // namespace megatrain::onnx_import
