//===- Liveness.h - live ranges over mt.step, for mt-liveness and mt-tier -===//
//
// mt-liveness's computation as functions, so that mt-tier's last stage
// derives live ranges by the same rules after it renumbers the steps, and
// mt-plan-memory turns them into lifetimes the way mt-tier predicts.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_PASSES_LIVENESS_H
#define MEGATRAIN_PASSES_LIVENESS_H

#include "megatrain/Cost/DeviceProfile.h"
#include "megatrain/Passes/Placement.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace megatrain {

/// Sets mt.live_end on every op of `func` with results: per result, the
/// largest mt.step among its users, -1 when none. With `copyHold`, a result
/// copied to the host (by mt.offload, mt.adamw, mt.loss or mt.output) also
/// lives until the compute issued after the copy covers the copy's time on
/// that profile (Liveness.cpp says why). Fails with a diagnostic when an op
/// has no mt.step or reads a value defined at a later step.
mlir::LogicalResult setLiveEnds(mlir::func::FuncOp func, const DeviceProfile *copyHold);

/// The inclusive steps a result of `op` holds `bytes` of an arena over, from
/// its def's mt.step and its mt.live_end (both placed by mt-plan-memory and
/// predicted by mt-tier this way).
Slot lifetimeSlot(mlir::Operation *op, int64_t defStep, int64_t liveEnd, uint64_t bytes);

} // namespace megatrain

#endif // MEGATRAIN_PASSES_LIVENESS_H
