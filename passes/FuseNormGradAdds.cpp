//===- FuseNormGradAdds.cpp - mt-fuse-norm-grad-adds: the residual gradient's sum in the norm's gradient ===//
//
// In the backward of a pre-norm residual block (Llama, Qwen2, Mistral) the
// gradient through an RMS norm meets the one that skipped it: rms_norm_grad
// writes dx, an add reads it back beside the skip's gradient and writes the
// sum, and under --precision bf16 a cast reads the sum again to write the
// bf16 copy the next products read. On a [tokens, hidden] f32 gradient that
// is 30 bytes an element over three kernels; the norm's gradient can add
// the other gradient to the dx it holds in registers and round the sum
// itself, 18 bytes in one kernel.
//
// It runs on the whole training step after mt-fuse-pointwise (which leaves
// these adds: the sum is read again a layer later, so a program holding it
// would hold more bytes than the add) and before mt-fold-norm-casts; off
// with megatrain-compile --no-fuse-norm-grad-adds. Candidates: an
// mt.rms_norm_grad whose dx is read only by an mt.add whose operands and
// result all have dx's type (no broadcast) and whose other operand is
// defined before the norm's gradient in its block. The two become one
// mt.rms_norm_grad_add at the norm gradient's place (its dweight's readers
// come before the add). When dx is f32, the sum's readers that are mt.casts
// to bf16 of its shape read the fused op's third result instead. The fused
// kernels add in dx's type after rounding dx to it and round the sum as the
// cast does, so the bits are the unfused ops' (docs/ops.md
// "rms_norm_grad_add").
//
// Not optimal for: an add that mt-fuse-pointwise took into a program (it
// stays), casts of a reshape of the sum (they stay casts), the last norm's
// gradient (no add: its cast stays), and layer norm (its gradient has no
// fused form).
//
//===----------------------------------------------------------------------===//
#include "CastReaders.h"

#include "megatrain/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"

namespace megatrain {
#define GEN_PASS_DEF_FUSENORMGRADADDS
#include "megatrain/Passes/Passes.h.inc"
} // namespace megatrain

using namespace mlir;
using namespace megatrain;

namespace {

/// Whether `value` is defined before `op` in op's block (or is an argument
/// of that block), so an op at op's place can read it.
bool availableAt(Value value, Operation *op) {
  if (auto arg = dyn_cast<BlockArgument>(value))
    return arg.getOwner() == op->getBlock();
  Operation *def = value.getDefiningOp();
  return def->getBlock() == op->getBlock() && def->isBeforeInBlock(op);
}

/// The add that reads `grad`'s dx and nothing else does, or null.
mt::AddOp soleAdd(mt::RmsNormGradOp grad) {
  Value dx = grad.getDx();
  if (!dx.hasOneUse())
    return nullptr;
  auto add = dyn_cast<mt::AddOp>(*dx.getUsers().begin());
  if (!add || add.getLhs() == add.getRhs() || add->getBlock() != grad->getBlock())
    return nullptr;
  Type type = dx.getType();
  if (add.getLhs().getType() != type || add.getRhs().getType() != type ||
      add.getResult().getType() != type)
    return nullptr;
  return add;
}

void fuse(mt::RmsNormGradOp grad) {
  mt::AddOp add = soleAdd(grad);
  if (!add)
    return;
  Value addend = add.getLhs() == grad.getDx() ? add.getRhs() : add.getLhs();
  if (!availableAt(addend, grad))
    return;
  SmallVector<Operation *> casts;
  if (getElementTypeOrSelf(add.getResult()).isF32())
    for (Operation *reader : add.getResult().getUsers())
      if (isBf16Cast(reader, /*toBf16=*/true))
        casts.push_back(reader);
  Type copyType;
  if (!casts.empty())
    copyType = casts.front()->getResult(0).getType();

  OpBuilder b(grad);
  auto fused = b.create<mt::RmsNormGradAddOp>(
      grad.getLoc(), grad.getDx().getType(), grad.getDweight().getType(), copyType, grad.getX(),
      grad.getWeight(), grad.getDy(), addend, grad.getAxisAttr(), grad.getEpsilonAttr());
  grad.getDweight().replaceAllUsesWith(fused.getDweight());
  add.getResult().replaceAllUsesWith(fused.getDx());
  for (Operation *cast : casts) {
    cast->getResult(0).replaceAllUsesWith(fused.getDxBf16());
    cast->erase();
  }
  add.erase();
  grad.erase();
}

struct FuseNormGradAdds : megatrain::impl::FuseNormGradAddsBase<FuseNormGradAdds> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<mt::RmsNormGradOp> grads;
    getOperation().walk([&](mt::RmsNormGradOp op) { grads.push_back(op); });
    for (mt::RmsNormGradOp grad : grads)
      fuse(grad);
  }
};

} // namespace
