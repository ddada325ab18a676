//===- FoldProductCasts.cpp - mt-fold-product-casts: products that write bf16 ===//
//
// Under --precision bf16 a product has bf16 operands and an f32 result (fp32
// accumulation). Where every reader of that result casts it to bf16 (the
// attention's v projection and the attention output's gradient, once
// mt-bf16-attention gave attention bf16 tensors), the f32 result is written,
// read back by the cast and written again at half the size. This pass gives
// such an mt.matmul a bf16 result and removes the casts: the product's
// kernel rounds its f32 result to bf16 as the cast did (docs/ops.md
// "matmul with a bf16 result"), so the values do not change.
//
// It runs on the whole training step after mt-fuse-pointwise (whose first
// step turns a cast of a reshape into a reshape of a cast, so the cast reads
// the product), beside mt-fold-norm-casts; off with megatrain-compile
// --no-fold-product-casts. Candidates: an mt.matmul with bf16 operands and an
// f32 result whose every reader is an mt.cast to bf16 of its shape, directly
// or through reshapes (CastReaders.h). A cast that mt-fuse-pointwise took into
// a program is no candidate (the program reads the f32 product).
//
// Not optimal for: mt.matmul_add (its addend is f32), and a product whose
// f32 result is also read elsewhere (both forms would have to be written).
//
//===----------------------------------------------------------------------===//
#include "CastReaders.h"

#include "megatrain/Passes/Passes.h"

#include "mlir/IR/TypeUtilities.h"

namespace megatrain {
#define GEN_PASS_DEF_FOLDPRODUCTCASTS
#include "megatrain/Passes/Passes.h.inc"
} // namespace megatrain

using namespace mlir;
using namespace megatrain;

namespace {

struct FoldProductCasts : megatrain::impl::FoldProductCastsBase<FoldProductCasts> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<mt::MatMulOp> products;
    getOperation().walk([&](mt::MatMulOp op) {
      if (getElementTypeOrSelf(op.getA()).isBF16() && getElementTypeOrSelf(op.getB()).isBF16())
        products.push_back(op);
    });
    for (mt::MatMulOp product : products)
      if (CastReaders readers = castReadersOf(product.getResult()); readers.any())
        narrowToBf16(product.getResult(), readers);
  }
};

} // namespace
