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

#include <cstdint>

namespace megatrain {

/// Each recompute clone and the original op it re-runs
/// (TieringRewriter::clones(), carried over to a copy of the plan).
using CloneOrigins = llvm::DenseMap<mlir::Operation *, mlir::Operation *>;

/// What the fill undid.
struct FillResult {
  int recomputes = 0;      // recompute clones given back to their originals
  int prefetches = 0;      // prefetches whose offloaded value is kept instead
  double savedSeconds = 0; // the clones' compute and the copies' exposed time
  int available = 0;       // candidates above the floor, before `limit` cut them
};

/// Undoes recomputation (the clones in `origins`) and offload+prefetch
/// pairs of the model's function while placeBestFit keeps the arena within
/// `budget` bytes, taking the best predicted saving per byte first and none
/// that saves less than `minSecondsPerByte` (what a byte of device state
/// would save instead; 0: no floor), and offering only the first `limit` of
/// that order. The model is analyzed again on return.
FillResult fillToBudget(TieringModel &model, const CloneOrigins &origins, uint64_t budget,
                        double minSecondsPerByte, size_t limit = SIZE_MAX);

/// What the spill did.
struct SpillResult {
  int recomputes = 0; // recompute clones whose values now come back over h2d
  int available = 0;  // spills the sweep took before `limit` cut them
  // With micro-batches: the trades applied in each micro-batch's backward.
  std::vector<int> perMicrobatch;
};

/// Stage 5b, after the fill: the recompute clones left may instead read
/// their original's values offloaded after their def and prefetched before
/// their use, where the links have room. Each is taken, most compute saved
/// per second of h2d first, when the model hides both copies (the offload
/// done before the prefetch starts, the prefetch covered by the compute
/// before the use, beside the copies already on each link) and the
/// lifetimes place within `budget`; the first `limit` of those taken are
/// applied. The model is analyzed again on return. Its link checks are
/// local (a copy's window, not the queue before it): the caller judges the
/// result by the three-queue timeline and chooses the limit.
SpillResult spillToLink(TieringModel &model, const CloneOrigins &origins, uint64_t budget,
                        size_t limit = SIZE_MAX);

} // namespace megatrain

#endif // MEGATRAIN_PASSES_TIERING_TIERINGFILL_H
