//===- Liveness.h - live ranges over mt.step, for mt-liveness and mt-tier -===//
//
// mt-liveness's computation as functions, so that mt-tier's last stage
// derives live ranges by the same rules after it renumbers the steps, and
// mt-plan-memory turns them into lifetimes the way mt-tier predicts.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_PASSES_LIVENESS_H
#define MEGATRAIN_PASSES_LIVENESS_H

#include "megatrain/plan/DeviceProfile.h"
#include "megatrain/Passes/Placement.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/FunctionExtras.h"

#include <vector>

namespace megatrain {

/// The copy hold (Liveness.cpp says why): until when each value copied to
/// the host (by mt.offload, mt.adamw, mt.grad_part, mt.loss or mt.output)
/// keeps its bytes. The copies queue on the device-to-host link in step
/// order: one starts when the compute issued up to its step is done and the
/// link is free (and, for a gradient, the ring has room), and the value
/// dies at the first step that runs a kernel of its own once the compute
/// issued before it covers the copy's finish. `stepOf` gives an op's step
/// (-1: none; steps index [0, n)).
class CopyHold {
public:
  /// With `ringBytes` > 0 (mt-tier: the gradient staging ring, "State
  /// homes" in docs/tiering.md), an mt.adamw's copy goes into that ring and
  /// also waits for room in it: the ring's bytes come back as the host
  /// AdamW, one update after another, consumes the gradients copied before.
  CopyHold(mlir::Block &block, const DeviceProfile &profile,
           llvm::function_ref<int64_t(mlir::Operation *)> stepOf, uint64_t ringBytes = 0);

  static bool copiesToHost(mlir::Operation *user);

  /// The last step `value` keeps its bytes for its copies to the host, or -1
  /// when nothing copies it (a constant is never held: it lives forever).
  int64_t end(mlir::Value value) const;
  /// The seconds compute would wait for the copies of `value` if a kernel
  /// issued right after step `lastUse` wrote into its bytes (0: none).
  double stall(mlir::Value value, int64_t lastUse) const;
  /// Every value a copy may hold, in the order of its first copy.
  const std::vector<mlir::Value> &values() const { return held; }

private:
  std::vector<double> computeBefore;                   // [i]: compute of steps [0, i)
  std::vector<bool> kernel;                            // [i]: step i runs a kernel
  llvm::DenseMap<mlir::Value, std::pair<double, int64_t>> finish; // copy done, its step
  std::vector<mlir::Value> held;
};

/// Sets mt.live_end on every op of `func` with results: per result, the
/// largest mt.step among its users, -1 when none. With `copyHold`, a result
/// copied to the host also lives until its copy is done (CopyHold, on that
/// profile). Fails with a diagnostic when an op has no mt.step or reads a
/// value defined at a later step.
mlir::LogicalResult setLiveEnds(mlir::func::FuncOp func, const DeviceProfile *copyHold);

/// setLiveEnds with the hold of `hold` for the values `keep` accepts only
/// (mt-tier's last stage: the holds that fit its budget).
mlir::LogicalResult setLiveEnds(mlir::func::FuncOp func, const CopyHold &hold,
                                llvm::function_ref<bool(mlir::Value)> keep);

/// mt.step of `op`, or -1 when it has none.
int64_t stepAttrOf(mlir::Operation *op);

/// The inclusive steps a result of `op` holds `bytes` of an arena over, from
/// its def's mt.step and its mt.live_end (both placed by mt-plan-memory and
/// predicted by mt-tier this way).
Slot lifetimeSlot(mlir::Operation *op, int64_t defStep, int64_t liveEnd, uint64_t bytes);

} // namespace megatrain

#endif // MEGATRAIN_PASSES_LIVENESS_H
