//===- FuseCrossEntropy.cpp - mt-fuse-cross-entropy: shifted softmax_ce as next_token_ce ===//
//
// torch.onnx.export writes F.cross_entropy as one SoftmaxCrossEntropyLoss
// node (the importer makes it mt.softmax_ce; no LogSoftmax/NLL decomposition
// reaches the IR). A causal-LM loss computed the usual way,
//
//   F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))
//
// imports as
//
//   %l = mt.slice %logits [0:B, 0:T-1, 0:V]  ->  mt.reshape to [B*(T-1), V]
//   %t = mt.slice %ids    [0:B, 1:T]         ->  mt.reshape to [B*(T-1)]
//   %loss = mt.softmax_ce %l, %t {reduction = "mean", ignore_index = n}
//
// which is exactly `mt.next_token_ce %logits, %ids {ignore_index = n}`: the
// same mean over the non-ignored targets, without the sliced copy of the
// logits or its slice_grad. Only "mean" fuses, and only when the sliced
// logits have no other user.
//
//===----------------------------------------------------------------------===//
#include "megatrain/Passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace megatrain {
#define GEN_PASS_DEF_FUSECROSSENTROPY
#include "megatrain/Passes/Passes.h.inc"

namespace {

using mlir::Value;

llvm::ArrayRef<int64_t> shapeOf(Value v) {
  return mlir::cast<mlir::RankedTensorType>(v.getType()).getShape();
}

/// If `v` = reshape(slice(x)) with the slice keeping every dim whole but dim
/// 1, which it cuts to [begin, begin + extent) with step 1: x.
Value unshift(Value v, int64_t begin, bool singleUse) {
  auto reshape = v.getDefiningOp<mt::ReshapeOp>();
  if (!reshape || (singleUse && !v.hasOneUse()))
    return nullptr;
  Value sliced = reshape.getX();
  auto slice = sliced.getDefiningOp<mt::SliceOp>();
  if (!slice || (singleUse && !sliced.hasOneUse()))
    return nullptr;
  Value x = slice.getX();
  llvm::ArrayRef<int64_t> shape = shapeOf(x);
  if (shape.size() < 2 || shape[1] < 2)
    return nullptr;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t b = d == 1 ? begin : 0, e = d == 1 ? begin + shape[1] - 1 : shape[d];
    if (slice.getStarts()[d] != b || slice.getEnds()[d] != e || slice.getSteps()[d] != 1)
      return nullptr;
  }
  return x;
}

bool fuse(mt::SoftmaxCrossEntropyOp ce) {
  if (ce.getReduction() != "mean")
    return false;
  Value logits = unshift(ce.getLogits(), 0, /*singleUse=*/true);
  Value tokens = unshift(ce.getLabels(), 1, /*singleUse=*/false);
  if (!logits || !tokens)
    return false;
  llvm::ArrayRef<int64_t> l = shapeOf(logits), t = shapeOf(tokens);
  if (l.size() != 3 || t.size() != 2 || l[0] != t[0] || l[1] != t[1] ||
      !mlir::cast<mlir::RankedTensorType>(tokens.getType()).getElementType().isInteger(64) ||
      shapeOf(ce.getLogits()) != llvm::ArrayRef<int64_t>{l[0] * (l[1] - 1), l[2]})
    return false;

  mlir::OpBuilder b(ce);
  auto fused = b.create<mt::NextTokenCrossEntropyOp>(
      ce.getLoc(), ce.getResult().getType(), logits, tokens, ce.getIgnoreIndexAttr());
  ce.getResult().replaceAllUsesWith(fused.getResult());
  mlir::Operation *chain[] = {ce, ce.getLogits().getDefiningOp(),
                              ce.getLabels().getDefiningOp()};
  mlir::Operation *slices[] = {chain[1]->getOperand(0).getDefiningOp(),
                               chain[2]->getOperand(0).getDefiningOp()};
  for (mlir::Operation *op : chain)
    if (op->use_empty())
      op->erase();
  for (mlir::Operation *op : slices)
    if (op->use_empty())
      op->erase();
  return true;
}

struct FuseCrossEntropy : impl::FuseCrossEntropyBase<FuseCrossEntropy> {
  void runOnOperation() override {
    llvm::SmallVector<mt::SoftmaxCrossEntropyOp> anchors;
    getOperation().walk([&](mt::SoftmaxCrossEntropyOp op) { anchors.push_back(op); });
    for (mt::SoftmaxCrossEntropyOp op : anchors)
      fuse(op);
  }
};

} // namespace
} // namespace megatrain
