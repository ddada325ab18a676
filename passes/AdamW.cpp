//===- AdamW.cpp - mt-adamw: one AdamW update per final parameter gradient ===//
#include "megatrain/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

#include <sstream>

namespace megatrain {
#define GEN_PASS_DEF_ADAMW
#include "megatrain/Passes/Passes.h.inc"
} // namespace megatrain

using namespace mlir;
using namespace megatrain;

namespace {

struct AdamW : megatrain::impl::AdamWBase<AdamW> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    // The same ranges torch.optim.AdamW accepts; anything else would diverge
    // silently at run time instead of failing here.
    if (failed(checkOption(func, "lr", lr, lr >= 0.0)) ||
        failed(checkOption(func, "beta1", beta1, beta1 >= 0.0 && beta1 < 1.0)) ||
        failed(checkOption(func, "beta2", beta2, beta2 >= 0.0 && beta2 < 1.0)) ||
        failed(checkOption(func, "eps", eps, eps >= 0.0)) ||
        failed(checkOption(func, "weight-decay", weightDecay, weightDecay >= 0.0)))
      return signalPassFailure();

    SmallVector<mt::ParamGradOp> grads(func.getOps<mt::ParamGradOp>());
    for (mt::ParamGradOp grad : grads) {
      OpBuilder builder(grad);
      builder.create<mt::AdamWOp>(
          grad.getLoc(), grad.getGrad(), grad.getParamAttr(),
          builder.getF64FloatAttr(lr), builder.getF64FloatAttr(beta1),
          builder.getF64FloatAttr(beta2), builder.getF64FloatAttr(eps),
          builder.getF64FloatAttr(weightDecay));
      grad.erase();
    }
  }

  static LogicalResult checkOption(func::FuncOp func, StringRef name,
                                   double value, bool valid) {
    if (valid)
      return success();
    std::ostringstream shown; // as written on the command line: 1, not 1.0e+00
    shown << value;
    return func.emitError("invalid mt-adamw option ")
           << name << "=" << shown.str()
           << " (lr, eps and weight-decay must be >= 0, betas in [0, 1))";
  }
};

} // namespace
