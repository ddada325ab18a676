//===- Liveness.cpp - mt-liveness: the last step that reads each value ----===//
//
// The step is one straight-line block, so a value's live range is simply
// [its def's mt.step, the largest mt.step among its users]; no dataflow over
// blocks is needed. The result is stored per op as `mt.live_end` (one entry
// per result, -1 for a result nobody reads) for mt-plan-memory and plan
// emission to read.
//
// The copy hold (`hold-copies`; mt-tier's last stage asks for the holds
// that fit its budget): a value copied to the host (mt.offload, the
// gradient of an mt.adamw or an mt.grad_part, mt.loss, a kept mt.output) is
// read by a device-to-host copy that runs beside compute. Dead at the copy's
// step, its bytes could go to the next value mt-plan-memory places, and the
// kernel writing that value would wait on the link for the copy (the write
// is ordered after the copy's read). So the value keeps its bytes until the
// compute issued up to then, priced on the device profile (IrCost.h),
// covers the time the copy finishes, or up to the last op before the
// return. The copies queue on the one link in step order: each starts when
// the compute issued up to its step is done and the copy before it has
// finished, and in mt-tier a gradient's also when the gradient staging ring
// has room for it (CopyHold, Liveness.h). A constant needs no hold:
// mt-plan-memory keeps it forever (its copy still takes the link).
//
//===----------------------------------------------------------------------===//
#include "Liveness.h"

#include "IrCost.h"

#include "megatrain/plan/OpCost.h"
#include "megatrain/Passes/Passes.h"

#include "mlir/IR/Builders.h"

#include <deque>
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

mlir::LogicalResult setLiveEndsWith(mlir::func::FuncOp func, const CopyHold *hold,
                                    llvm::function_ref<bool(mlir::Value)> keep);

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

int64_t stepAttrOf(mlir::Operation *op) { return stepOf(op).value_or(-1); }

CopyHold::CopyHold(mlir::Block &block, const DeviceProfile &profile,
                   llvm::function_ref<int64_t(mlir::Operation *)> stepOf, uint64_t ringBytes) {
  int64_t steps = 0;
  for (mlir::Operation &op : block.without_terminator())
    steps = std::max(steps, stepOf(&op) + 1);
  std::vector<double> compute(steps, 0);
  kernel.assign(steps, false);
  std::vector<std::pair<int64_t, mlir::Operation *>> copies;
  for (mlir::Operation &op : block.without_terminator()) {
    int64_t step = stepOf(&op);
    if (step < 0)
      continue;
    compute[step] += computeSeconds(&op, profile);
    // mt-view-aliases may turn a reshape into a view, which emits no step.
    if (compute[step] > 0 && !mlir::isa<mt::ReshapeOp>(op))
      kernel[step] = true;
    if (copiesToHost(&op) && op.getNumOperands() > 0)
      copies.push_back({step, &op});
  }
  computeBefore.assign(steps + 1, 0);
  for (int64_t i = 0; i < steps; ++i)
    computeBefore[i + 1] = computeBefore[i] + compute[i];
  // The link: copies in step order, each after the compute issued up to its
  // step and after the copy before it.
  std::stable_sort(copies.begin(), copies.end(),
                   [](const auto &x, const auto &y) { return x.first < y.first; });
  double linkFree = 0, hostFree = 0;
  // The ring: the gradients copied in and not yet updated, oldest first
  // (bytes, when their update is done).
  std::deque<std::pair<uint64_t, double>> ring;
  uint64_t inRing = 0;
  for (auto [step, op] : copies) {
    mlir::Value value = op->getOperand(0);
    uint64_t bytes = valueBytes(value);
    double start = std::max(computeBefore[step + 1], linkFree);
    bool staged = ringBytes > 0 && mlir::isa<mt::AdamWOp>(op);
    if (staged)
      while (!ring.empty() && inRing + bytes > ringBytes) {
        start = std::max(start, ring.front().second);
        inRing -= ring.front().first;
        ring.pop_front();
      }
    linkFree = start + transferSeconds(bytes, Link::DeviceToHost, profile);
    if (staged) {
      auto type = mlir::cast<mlir::RankedTensorType>(value.getType());
      auto elements = static_cast<uint64_t>(type.getNumElements());
      hostFree = std::max(hostFree, linkFree) + hostAdamWSeconds(elements, profile);
      ring.push_back({bytes, hostFree});
      inRing += bytes;
    }
    mlir::Operation *def = value.getDefiningOp();
    if (!def || mlir::isa<mt::ConstantOp>(def))
      continue; // on the link, but never held
    auto [it, inserted] = finish.try_emplace(value, linkFree, step);
    if (inserted)
      held.push_back(value);
    else
      it->second = {std::max(it->second.first, linkFree), std::max(it->second.second, step)};
  }
}

bool CopyHold::copiesToHost(mlir::Operation *user) {
  return mlir::isa<mt::OffloadOp, mt::AdamWOp, mt::GradPartOp, mt::LossOp, mt::OutputOp>(user);
}

int64_t CopyHold::end(mlir::Value value) const {
  auto it = finish.find(value);
  if (it == finish.end())
    return -1;
  auto [done, at] = it->second;
  int64_t lastStep = static_cast<int64_t>(computeBefore.size()) - 2;
  // The value dies at step q: the step's stream waits there for the copy's
  // read (the plan's events order the bytes' next writer, or its poison,
  // after it), so the compute issued before step q must cover the copy, and
  // q must be a kernel of its own: a host task's or a copy's stream may be
  // far behind the compute (the host AdamW queue), and a view has no step
  // (the death would fall on the step before it, whatever stream that is).
  int64_t q = at;
  while (q >= 0 && q < lastStep && (computeBefore[q] < done || !kernel[q]))
    ++q;
  return q;
}

double CopyHold::stall(mlir::Value value, int64_t lastUse) const {
  auto it = finish.find(value);
  if (it == finish.end())
    return 0;
  int64_t next = std::min<int64_t>(lastUse + 1, static_cast<int64_t>(computeBefore.size()) - 1);
  return std::max(0.0, it->second.first - computeBefore[std::max<int64_t>(next, 0)]);
}

mlir::LogicalResult setLiveEnds(mlir::func::FuncOp func, const DeviceProfile *copyHold) {
  if (!copyHold)
    return setLiveEndsWith(func, nullptr, [](mlir::Value) { return true; });
  CopyHold hold(func.getBody().front(), *copyHold, stepAttrOf);
  return setLiveEndsWith(func, &hold, [](mlir::Value) { return true; });
}

mlir::LogicalResult setLiveEnds(mlir::func::FuncOp func, const CopyHold &hold,
                                llvm::function_ref<bool(mlir::Value)> keep) {
  return setLiveEndsWith(func, &hold, keep);
}

namespace {
mlir::LogicalResult setLiveEndsWith(mlir::func::FuncOp func, const CopyHold *hold,
                                    llvm::function_ref<bool(mlir::Value)> keep) {
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
      if (hold && end >= 0 && keep(value))
        end = std::max(end, hold->end(value));
      liveEnd.push_back(end);
    }
    op->setAttr(mt::attr::kLiveEnd, builder.getDenseI64ArrayAttr(liveEnd));
    return mlir::WalkResult::advance();
  });
  return mlir::failure(result.wasInterrupted());
}
} // namespace

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
