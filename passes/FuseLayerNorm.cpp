//===- FuseLayerNorm.cpp - mt-fuse-layer-norm: decomposed LayerNorm to mt.layer_norm ===//
//
// A layer norm written out in primitives,
//   d = x - reduce_mean(x); n = d / sqrt(reduce_mean(d^2) + eps);
//   y = n * gamma + beta,
// is rewritten in one walk in program order:
//   1. the normalization n becomes mt.layer_norm(x, fill 1, fill 0);
//   2. a product of a layer_norm whose scale is all ones and bias all zeros
//      (and that has no other user) with a gamma of the normalized shape
//      becomes mt.layer_norm(x, gamma, bias);
//   3. a sum of a layer_norm whose bias is all zeros (no other user) with a
//      beta of the normalized shape becomes mt.layer_norm(x, scale, beta).
// Later rules see earlier results because gamma and beta come later in the
// block; they apply to imported layer norms too (a LayerNormalization
// without bias has a zero fill). Every rewritten op precedes the op being
// visited, so the walk's next op survives. Run before mt-fuse-rms-norm:
// n is an RMS norm of d.
//
//===----------------------------------------------------------------------===//
#include "FusionMatch.h"

#include "megatrain/Passes/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"

namespace megatrain {
#define GEN_PASS_DEF_FUSELAYERNORM
#include "megatrain/Passes/Passes.h.inc"
} // namespace megatrain

using namespace mlir;
using namespace megatrain;
using namespace megatrain::fusion;

namespace {

bool fuseNormalization(IRRewriter &rewriter, Operation *op) {
  std::optional<RootMeanSquareMatch> m = matchRootMeanSquare(op);
  if (!m)
    return false;
  // y = x - mean(x), the mean over the same axes.
  auto sub = m->y.getDefiningOp<mt::SubOp>();
  if (!sub || sub.getLhs().getType() != sub.getType())
    return false;
  Value x = sub.getLhs();
  auto mean = singleUseDef<mt::ReduceMeanOp>(sub.getRhs());
  int64_t axis;
  if (!mean || mean.getX() != x || !mean.getKeepdims() ||
      !trailingAxes(mean.getAxes(), cast<RankedTensorType>(x.getType()).getRank(), axis) ||
      axis != m->axis)
    return false;
  // d is read by the square and the normalization only.
  Operation *square = m->ops.back();
  for (Operation *user : sub->getUsers())
    if (user != square && user != op)
      return false;

  auto type = cast<RankedTensorType>(x.getType());
  RankedTensorType normalized = mt::tensorLike(type, type.getShape().drop_front(m->axis));
  rewriter.setInsertionPoint(op);
  Value ones = rewriter.create<mt::FillOp>(op->getLoc(), normalized, rewriter.getF64FloatAttr(1.0));
  Value zeros = rewriter.create<mt::FillOp>(op->getLoc(), normalized, rewriter.getF64FloatAttr(0.0));
  Value fused = rewriter.create<mt::LayerNormOp>(
      op->getLoc(), type, x, ones, zeros, rewriter.getI64IntegerAttr(m->axis),
      rewriter.getF64FloatAttr(m->epsilon));
  rewriter.replaceAllUsesWith(op->getResult(0), fused);
  SmallVector<Operation *> ops(m->ops);
  ops.append({sub, mean});
  erasePattern(rewriter, ops);
  return true;
}

/// ln * gamma or ln + beta (either side) folded into the layer_norm.
template <typename OpTy>
bool fuseAffine(IRRewriter &rewriter, OpTy op) {
  constexpr bool scales = std::is_same_v<OpTy, mt::MulOp>;
  for (auto [normalized, other] : {std::pair(op.getLhs(), op.getRhs()),
                                   std::pair(op.getRhs(), op.getLhs())}) {
    auto norm = singleUseDef<mt::LayerNormOp>(normalized);
    if (!norm || op.getType() != norm.getType() || splatValue(norm.getBias()) != 0.0)
      continue;
    if (scales && splatValue(norm.getScale()) != 1.0)
      continue;
    Value replaced = scales ? norm.getScale() : norm.getBias();
    if (other.getType() != replaced.getType())
      continue;
    rewriter.setInsertionPoint(op);
    Value fused = rewriter.create<mt::LayerNormOp>(
        op.getLoc(), norm.getType(), norm.getX(), scales ? other : norm.getScale(),
        scales ? norm.getBias() : other, norm.getAxisAttr(), norm.getEpsilonAttr());
    rewriter.replaceAllUsesWith(op.getResult(), fused);
    erasePattern(rewriter, {op, norm});
    return true;
  }
  return false;
}

struct FuseLayerNorm : megatrain::impl::FuseLayerNormBase<FuseLayerNorm> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    for (Block &block : getOperation().getBody())
      for (Operation &op : llvm::make_early_inc_range(block)) {
        if (fuseNormalization(rewriter, &op))
          continue;
        if (auto mul = dyn_cast<mt::MulOp>(op))
          fuseAffine(rewriter, mul);
        else if (auto add = dyn_cast<mt::AddOp>(op))
          fuseAffine(rewriter, add);
      }
  }
};

} // namespace
