//===- FuseRmsNorm.cpp - mt-fuse-rms-norm: decomposed RMSNorm to mt.rms_norm ===//
//
// Llama, Qwen2 and Mistral export RMSNorm as
//   weight * (x * reciprocal(sqrt(reduce_mean(x * x) + eps)))
// (torch writes x.pow(2), which the importer turns into x * x; opset 23's
// RMSNormalization imports the same way). Two rewrites, in one walk in
// program order:
//   1. the normalization x * 1/sqrt(mean(x^2) + eps) becomes
//      mt.rms_norm(x, fill 1);
//   2. a product of an rms_norm whose weight is all ones (and that has no
//      other user) with a weight of the normalized shape becomes
//      mt.rms_norm(x, weight).
// The second sees the first's result because the weight multiply comes
// later in the block. Every rewritten op precedes the op being visited, so
// the walk's next op survives.
//
//===----------------------------------------------------------------------===//
#include "FusionMatch.h"

#include "megatrain/Passes/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"

namespace megatrain {
#define GEN_PASS_DEF_FUSERMSNORM
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
  auto type = cast<RankedTensorType>(m->y.getType());
  rewriter.setInsertionPoint(op);
  Value ones = rewriter.create<mt::FillOp>(
      op->getLoc(), mt::tensorLike(type, type.getShape().drop_front(m->axis)),
      rewriter.getF64FloatAttr(1.0));
  Value fused = rewriter.create<mt::RmsNormOp>(
      op->getLoc(), type, m->y, ones, rewriter.getI64IntegerAttr(m->axis),
      rewriter.getF64FloatAttr(m->epsilon));
  rewriter.replaceAllUsesWith(op->getResult(0), fused);
  erasePattern(rewriter, m->ops);
  return true;
}

bool fuseWeight(IRRewriter &rewriter, mt::MulOp mul) {
  for (auto [normalized, weight] : {std::pair(mul.getLhs(), mul.getRhs()),
                                    std::pair(mul.getRhs(), mul.getLhs())}) {
    auto norm = singleUseDef<mt::RmsNormOp>(normalized);
    if (!norm || splatValue(norm.getWeight()) != 1.0 ||
        weight.getType() != norm.getWeight().getType() || mul.getType() != norm.getType())
      continue;
    rewriter.setInsertionPoint(mul);
    Value fused = rewriter.create<mt::RmsNormOp>(mul.getLoc(), norm.getType(), norm.getX(),
                                                 weight, norm.getAxisAttr(),
                                                 norm.getEpsilonAttr());
    rewriter.replaceAllUsesWith(mul.getResult(), fused);
    erasePattern(rewriter, {mul, norm});
    return true;
  }
  return false;
}

struct FuseRmsNorm : megatrain::impl::FuseRmsNormBase<FuseRmsNorm> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    for (Block &block : getOperation().getBody())
      for (Operation &op : llvm::make_early_inc_range(block)) {
        if (fuseNormalization(rewriter, &op))
          continue;
        if (auto mul = dyn_cast<mt::MulOp>(op))
          fuseWeight(rewriter, mul);
      }
  }
};

} // namespace
