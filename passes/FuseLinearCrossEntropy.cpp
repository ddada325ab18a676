//===- FuseLinearCrossEntropy.cpp - mt-fuse-linear-ce: the output projection and its loss as one op ===//
//
// A language model's loss is the next-token cross-entropy of the output
// projection of its last hidden states:
//
//   %wt = mt.transpose %w {perm = [1, 0]}          (or transpose_b = true)
//   %logits = mt.matmul %h, %wt : [B, T, H] x [H, V] -> [B, T, V]
//   %loss = mt.next_token_ce %logits, %ids
//
// The logits (and, in the backward, their gradient) are [B*T, V] f32: 2 GiB
// each for 16k tokens and a 32k vocabulary. When the logits have no other
// user (no kept output, no other loss), this becomes
//
//   %loss, %lse = mt.linear_ce %h, %w, %ids {chunk = C, ignore_index = n}
//
// which computes the logits C vocabulary rows at a time (docs/ops.md). C is
// the largest multiple of 128 whose [B*T, C] f32 tile fits `tile-bytes`
// (at least 128, at most V), or the `chunk` option when it is set. The
// transpose is left to die when nothing else reads it.
//
//===----------------------------------------------------------------------===//
#include "megatrain/Passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace megatrain {
#define GEN_PASS_DEF_FUSELINEARCROSSENTROPY
#include "megatrain/Passes/Passes.h.inc"

namespace {

using mlir::Value;

llvm::ArrayRef<int64_t> shapeOf(Value v) {
  return mlir::cast<mlir::RankedTensorType>(v.getType()).getShape();
}

mlir::Type elementOf(Value v) {
  return mlir::cast<mlir::RankedTensorType>(v.getType()).getElementType();
}

/// The [V, H] weight that `matmul`'s b operand presents as [H, V]; null when
/// it is not a transpose of a matrix (or transpose_b of one).
Value projectionWeight(mt::MatMulOp matmul) {
  Value b = matmul.getB();
  if (shapeOf(b).size() != 2)
    return nullptr;
  if (matmul.getTransposeB())
    return b;
  auto transpose = b.getDefiningOp<mt::TransposeOp>();
  if (!transpose || transpose.getPerm() != llvm::ArrayRef<int64_t>{1, 0})
    return nullptr;
  return transpose.getX();
}

/// Vocabulary rows per chunk: a [tokens, chunk] f32 tile within `tileBytes`.
int64_t chooseChunk(int64_t tokens, int64_t vocab, uint64_t tileBytes) {
  constexpr int64_t kQuantum = 128;
  int64_t rows = static_cast<int64_t>(tileBytes / (4 * static_cast<uint64_t>(std::max<int64_t>(tokens, 1))));
  rows = std::max(kQuantum, rows / kQuantum * kQuantum);
  return std::min(rows, std::max<int64_t>(vocab, 1));
}

struct FuseLinearCrossEntropy
    : impl::FuseLinearCrossEntropyBase<FuseLinearCrossEntropy> {
  using Base::Base;

  bool fuse(mt::NextTokenCrossEntropyOp ce) {
    Value logits = ce.getLogits();
    auto matmul = logits.getDefiningOp<mt::MatMulOp>();
    if (!matmul || !logits.hasOneUse() || matmul.getTransposeA())
      return false;
    Value hidden = matmul.getA(), weight = projectionWeight(matmul);
    // One floating type throughout (f32 as imported; f64 in the gradient
    // checks); mt-precision later casts hidden and weight to bf16.
    mlir::Type element = elementOf(logits);
    if (!weight || !(element.isF32() || element.isF64()) || elementOf(hidden) != element ||
        elementOf(weight) != element)
      return false;
    llvm::ArrayRef<int64_t> h = shapeOf(hidden), w = shapeOf(weight), l = shapeOf(logits);
    if (h.size() != 3 || l.size() != 3 || w[1] != h[2] || l[2] != w[0])
      return false;

    int64_t vocab = w[0];
    int64_t size = chunk > 0 ? std::min<int64_t>(chunk, vocab)
                             : chooseChunk(h[0] * h[1], vocab, tileBytes);
    mlir::OpBuilder b(ce);
    auto lseType = mlir::RankedTensorType::get(shapeOf(ce.getTokens()), element);
    auto fused = b.create<mt::LinearCrossEntropyOp>(
        ce.getLoc(), ce.getResult().getType(), lseType, hidden, weight, ce.getTokens(),
        ce.getIgnoreIndexAttr(), b.getI64IntegerAttr(std::max<int64_t>(size, 1)));
    ce.getResult().replaceAllUsesWith(fused.getResult());
    mlir::Operation *transpose = matmul.getB().getDefiningOp();
    ce.erase();
    matmul.erase();
    if (transpose && mlir::isa<mt::TransposeOp>(transpose) && transpose->use_empty())
      transpose->erase();
    return true;
  }

  void runOnOperation() override {
    llvm::SmallVector<mt::NextTokenCrossEntropyOp> anchors;
    getOperation().walk([&](mt::NextTokenCrossEntropyOp op) { anchors.push_back(op); });
    for (mt::NextTokenCrossEntropyOp op : anchors)
      fuse(op);
  }
};

} // namespace
} // namespace megatrain
