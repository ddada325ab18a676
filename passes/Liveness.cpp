//===- Liveness.cpp - mt-liveness: the last step that reads each value ----===//
//
// The step is one straight-line block, so a value's live range is simply
// [its def's mt.step, the largest mt.step among its users]; no dataflow over
// blocks is needed. The result is stored per op as `mt.live_end` (one entry
// per result, -1 for a result nobody reads) for mt-plan-memory and plan
// emission to read.
//
// The copy hold (`hold-copies`; mt-tier's last stage asks for it when the
// budget allows): a value copied to the host (mt.offload, the gradient of an
// mt.adamw, mt.loss, a kept mt.output) is read by a device-to-host copy that
// runs beside compute. Dead at the copy's step, its bytes could go to the
// next value mt-plan-memory places, and the kernel writing that value would
// wait on the link for the copy (the write is ordered after the copy's
// read). So the value keeps its bytes until the compute issued after the
// copy, priced on the device profile (IrCost.h), covers the copy's
// predicted time, or up to the last op before the return. A constant needs
// no hold: mt-plan-memory keeps it forever.
//
//===----------------------------------------------------------------------===//
#include "Liveness.h"

#include "IrCost.h"

#include "megatrain/Cost/OpCost.h"
#include "megatrain/Passes/Passes.h"

#include "mlir/IR/Builders.h"

#include <optional>
#include <vector>

namespace megatrain {
#define GEN_PASS_DEF_LIVENESS
#include "megatrain/Passes/Passes.h.inc"

namespace {

std::optional<int64_t> stepOf(mlir::Operation *op) {
  if (auto step = op->getAttrOfType<mlir::IntegerAttr>(mt::attr::kStep))
    return step.getInt();
  return std::nullopt;
}

/// How long a value copied to the host holds its bytes: the compute issued
/// at each step, summed from step 0 (the hold compares differences of these
/// sums, as mt-tier's model does, so both agree to the bit).
class CopyHold {
public:
  CopyHold(mlir::Block &block, const DeviceProfile &profile) : profile(profile) {
    int64_t steps = 0;
    for (mlir::Operation &op : block.without_terminator())
      if (std::optional<int64_t> step = stepOf(&op))
        steps = std::max(steps, *step + 1);
    std::vector<double> compute(steps, 0);
    for (mlir::Operation &op : block.without_terminator())
      if (std::optional<int64_t> step = stepOf(&op); step && *step >= 0)
        compute[*step] += computeSeconds(&op, profile);
    computeBefore.assign(steps + 1, 0);
    for (int64_t i = 0; i < steps; ++i)
      computeBefore[i + 1] = computeBefore[i] + compute[i];
  }

  static bool copiesToHost(mlir::Operation *user) {
    return mlir::isa<mt::OffloadOp, mt::AdamWOp, mt::LossOp, mt::OutputOp>(user);
  }

  /// The last step `value`, copied to the host at step `at`, keeps its bytes.
  int64_t end(mlir::Value value, int64_t at) const {
    double copy = transferSeconds(valueBytes(value), Link::DeviceToHost, profile);
    int64_t lastStep = static_cast<int64_t>(computeBefore.size()) - 2;
    int64_t q = at;
    while (q >= 0 && q < lastStep && computeBefore[q + 1] - computeBefore[at + 1] < copy)
      ++q;
    return q;
  }

private:
  const DeviceProfile &profile;
  std::vector<double> computeBefore; // [i]: compute seconds of steps [0, i)
};

struct Liveness : impl::LivenessBase<Liveness> {
  using LivenessBase::LivenessBase;

  void runOnOperation() override {
    mlir::func::FuncOp func = getOperation();
    DeviceProfile profile;
    if (mlir::failed(loadProfileOption(func, deviceProfile, "mt-liveness", profile)))
      return signalPassFailure();
    if (mlir::failed(setLiveEnds(func, holdCopies ? &profile : nullptr)))
      signalPassFailure();
  }
};

} // namespace

mlir::LogicalResult setLiveEnds(mlir::func::FuncOp func, const DeviceProfile *copyHold) {
  std::optional<CopyHold> hold;
  if (copyHold)
    hold.emplace(func.getBody().front(), *copyHold);
  mlir::Builder builder(func.getContext());
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
      if (hold && end >= 0 && !mlir::isa<mt::ConstantOp>(op))
        for (mlir::Operation *user : value.getUsers())
          if (CopyHold::copiesToHost(user))
            end = std::max(end, hold->end(value, *stepOf(user)));
      liveEnd.push_back(end);
    }
    op->setAttr(mt::attr::kLiveEnd, builder.getDenseI64ArrayAttr(liveEnd));
    return mlir::WalkResult::advance();
  });
  return mlir::failure(result.wasInterrupted());
}

Slot lifetimeSlot(mlir::Operation *op, int64_t defStep, int64_t liveEnd, uint64_t bytes) {
  Slot slot;
  slot.first = defStep;
  slot.last = std::max(defStep, liveEnd); // an unread value is still written
  slot.size = bytes;
  // The runtime writes inputs before step 0.
  if (mlir::isa<mt::InputOp>(op))
    slot.first = 0;
  // Constants are written once when the runtime starts and must survive
  // every training step.
  if (mlir::isa<mt::ConstantOp>(op)) {
    slot.first = 0;
    slot.last = kLivesForever;
  }
  return slot;
}

} // namespace megatrain
