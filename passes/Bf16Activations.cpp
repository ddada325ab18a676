//===- Bf16Activations.cpp - mt-bf16-activations: products into programs in bf16 ===//
//
// Under --precision bf16 a product has bf16 operands and an f32 result. The
// products that elementwise programs read (a Llama layer's gate and up
// projections, read by swiglu and kept for swiglu_grad; the gradient of the
// MLP's activation, read by swiglu_grad) are the widest values a layer keeps
// for its backward: [tokens, intermediate] in f32, twice. torch.autocast
// rounds every bf16 product's result to bf16. This pass does that for these
// products, so they are written, kept (or offloaded) and read back at half
// the bytes; the programs read bf16 exactly and compute in f32 as before.
// The query and key projections, read only as rotary's x, are taken the same
// way: rotary reads a bf16 x exactly and computes in f32 (torch.autocast
// runs the rotation itself in bf16, rounding after each op).
//
// Opt-in (megatrain-compile --bf16-activations): unlike the cast folds, it
// changes the values, by one rounding of each such product to bf16, the
// rounding autocast makes. It runs on the whole training step after
// mt-fuse-pointwise. Candidates: an mt.matmul with bf16 operands and an f32
// result whose every reader is an mt.pointwise or reads it as an mt.rotary's
// x, directly or through reshapes. The product rounds its f32 result to
// nearest even (docs/ops.md "matmul with a bf16 result"), bit for bit what a
// cast would write.
//
// Not taken: mt.matmul_add (its residual or gradient sum stays f32), a
// product with another reader (a norm, attention, an output), and products
// whose chains mt-fuse-pointwise left unfused (their kernels read f32).
//
//===----------------------------------------------------------------------===//
#include "CastReaders.h"

#include "megatrain/Passes/Passes.h"

#include "mlir/IR/TypeUtilities.h"

#include "llvm/ADT/STLExtras.h"

namespace megatrain {
#define GEN_PASS_DEF_BF16ACTIVATIONS
#include "megatrain/Passes/Passes.h.inc"
} // namespace megatrain

using namespace mlir;
using namespace megatrain;

namespace {

struct Bf16Activations : megatrain::impl::Bf16ActivationsBase<Bf16Activations> {
  using Base::Base;

  void runOnOperation() override {
    getOperation().walk([&](mt::MatMulOp op) {
      Value y = op.getResult();
      if (!getElementTypeOrSelf(op.getA()).isBF16() || !getElementTypeOrSelf(op.getB()).isBF16() ||
          !getElementTypeOrSelf(y).isF32())
        return;
      SmallVector<Operation *> readers, reshapes;
      auto isReader = [](Operation *user) { return isa<mt::PointwiseOp, mt::RotaryOp>(user); };
      if (!readersThroughReshapes(y, isReader, readers, reshapes))
        return;
      // A rotary must read the product (or a reshape of it) as its x, never
      // as a table.
      auto isProduct = [&](Value value) {
        return value == y || llvm::is_contained(reshapes, value.getDefiningOp());
      };
      for (Operation *reader : readers)
        if (auto rotary = dyn_cast<mt::RotaryOp>(reader))
          if (!isProduct(rotary.getX()) || isProduct(rotary.getCos()) ||
              isProduct(rotary.getSin()))
            return;
      setBf16(y, reshapes);
    });
  }
};

} // namespace
