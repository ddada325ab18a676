//===- TieringFill.h - mt-tier's fill: spend unused budget on speed -------===//
//
// Stage 5 of mt-tier (passes/Tiering.cpp): a fitting plan (checkpoint, or a
// greedy's) may leave part of the budget unused; the fill gives the kept
// originals back to the users of recomputed and prefetched copies, the most
// seconds saved per byte first, while the arena still fits the budget.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_PASSES_TIERING_TIERINGFILL_H
#define MEGATRAIN_PASSES_TIERING_TIERINGFILL_H

#include "tiering/TieringRewrites.h"

namespace megatrain {

/// Each recompute clone and the original op it re-runs
/// (TieringRewriter::clones(), carried over to a copy of the plan).
using CloneOrigins = llvm::DenseMap<mlir::Operation *, mlir::Operation *>;

/// What the fill undid.
struct FillResult {
  int recomputes = 0;      // recompute clones given back to their originals
  int prefetches = 0;      // prefetches whose offloaded value is kept instead
  double savedSeconds = 0; // the clones' compute and the copies' exposed time
};

/// Undoes recomputation (the clones in `origins`) and offload+prefetch
/// pairs of the model's function while placeBestFit keeps the arena within
/// `budget` bytes, taking the best predicted saving per byte first and none
/// that saves less than `minSecondsPerByte` (what a byte of device state
/// would save instead; 0: no floor). The model is analyzed again on return.
FillResult fillToBudget(TieringModel &model, const CloneOrigins &origins, uint64_t budget,
                        double minSecondsPerByte);

} // namespace megatrain

#endif // MEGATRAIN_PASSES_TIERING_TIERINGFILL_H
