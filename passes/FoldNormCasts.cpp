//===- FoldNormCasts.cpp - mt-fold-norm-casts: norms that write the bf16 copy ===//
//
// Under --precision bf16 every matmul reads bf16 operands, so mt-precision
// casts the output of each RMS norm that feeds one (the input layernorm
// before q, k and v, the post-attention norm before gate and up) to bf16: an
// f32 [tokens, hidden] written by the norm, read back by the cast and written
// again at half the size. When the cast is the norm's only reader, the norm
// can round its own result: this pass gives such an mt.rms_norm a bf16
// result and removes the cast.
//
// It runs on the whole training step after mt-precision (which wrote the
// casts) and mt-fuse-pointwise, whose first step makes the weight gradients
// read the norm's bf16 cast (reshaped) rather than cast a reshape of the f32
// norm, so the cast is left the norm's only reader; off with
// megatrain-compile --no-fold-norm-casts. A cast that mt-fuse-pointwise took
// into a program is no candidate (the program reads the f32 norm).
// Candidates: an mt.rms_norm with an f32 x, weight and result, whose every
// reader is an mt.cast to bf16 of the same shape, directly or through
// reshapes, which then move bf16 (CastReaders.h; readers CSE did not merge
// yet are all replaced by the one result). The fused norm computes what it
// computed before and rounds once, to nearest even, as the cast did (the
// kernels round their f32 result with the cast's rounding, so the bits are
// the unfused pair's: docs/ops.md "rms_norm with a bf16 result").
//
// Not optimal for: layer norm (its kernels keep their input's type), a norm
// whose f32 result is also read elsewhere (both forms must be written), and
// a transpose read only by casts (its kernel writes its input's type). A
// product's casts fold in mt-fold-product-casts, rotary's in
// mt-bf16-attention.
//
//===----------------------------------------------------------------------===//
#include "CastReaders.h"

#include "megatrain/Passes/Passes.h"

#include "mlir/IR/TypeUtilities.h"

namespace megatrain {
#define GEN_PASS_DEF_FOLDNORMCASTS
#include "megatrain/Passes/Passes.h.inc"
} // namespace megatrain

using namespace mlir;
using namespace megatrain;

namespace {

struct FoldNormCasts : megatrain::impl::FoldNormCastsBase<FoldNormCasts> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<mt::RmsNormOp> norms;
    getOperation().walk([&](mt::RmsNormOp op) { norms.push_back(op); });
    for (mt::RmsNormOp norm : norms) {
      if (!getElementTypeOrSelf(norm.getX()).isF32() || !getElementTypeOrSelf(norm.getWeight()).isF32())
        continue;
      if (CastReaders readers = castReadersOf(norm.getResult()); readers.any())
        narrowToBf16(norm.getResult(), readers);
    }
  }
};

} // namespace
