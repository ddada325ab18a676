//===- Liveness.cpp - mt-liveness: the last step that reads each value ----===//
//
// The step is one straight-line block, so a value's live range is simply
// [its def's mt.step, the largest mt.step among its users]; no dataflow over
// blocks is needed. The result is stored per op as `mt.live_end` (one entry
// per result, -1 for a result nobody reads) for mt-plan-memory and plan
// emission to read.
//
//===----------------------------------------------------------------------===//
#include "megatrain/Passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace megatrain {
#define GEN_PASS_DEF_LIVENESS
#include "megatrain/Passes/Passes.h.inc"

namespace {

struct Liveness : impl::LivenessBase<Liveness> {
  void runOnOperation() override {
    mlir::func::FuncOp func = getOperation();
    mlir::Builder builder(&getContext());

    auto stepOf = [](mlir::Operation *op) -> std::optional<int64_t> {
      if (auto step = op->getAttrOfType<mlir::IntegerAttr>(mt::attr::kStep))
        return step.getInt();
      return std::nullopt;
    };

    mlir::WalkResult result = func.walk([&](mlir::Operation *op) {
      if (op == func.getOperation() || op->getNumResults() == 0)
        return mlir::WalkResult::advance();
      std::optional<int64_t> defStep = stepOf(op);
      if (!defStep) {
        op->emitError("op has no mt.step; run mt-schedule before mt-liveness");
        return mlir::WalkResult::interrupt();
      }
      llvm::SmallVector<int64_t> liveEnd;
      for (mlir::Value value : op->getResults()) {
        int64_t end = -1;
        for (mlir::Operation *user : value.getUsers()) {
          std::optional<int64_t> useStep = stepOf(user);
          if (!useStep) {
            user->emitError("op has no mt.step; run mt-schedule before mt-liveness");
            return mlir::WalkResult::interrupt();
          }
          // A use at or before the def means the order is not the schedule's.
          if (*useStep <= *defStep) {
            user->emitError("op at mt.step ")
                << *useStep << " uses a value defined at mt.step " << *defStep
                << "; the schedule is stale, rerun mt-schedule";
            return mlir::WalkResult::interrupt();
          }
          end = std::max(end, *useStep);
        }
        liveEnd.push_back(end);
      }
      op->setAttr(mt::attr::kLiveEnd, builder.getDenseI64ArrayAttr(liveEnd));
      return mlir::WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
} // namespace megatrain
