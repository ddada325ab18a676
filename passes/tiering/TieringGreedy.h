//===- TieringGreedy.h - mt-tier's greedy freeing of the peak -------------===//
//
// Stages 3 and 4 of mt-tier (passes/Tiering.cpp): the planner of policy
// auto, also run after the checkpoint and offload policies in auto's
// portfolio.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_PASSES_TIERING_TIERINGGREEDY_H
#define MEGATRAIN_PASSES_TIERING_TIERINGGREEDY_H

#include "tiering/TieringRewrites.h"

#include <string>

namespace megatrain {

/// Rewrites the model's function until placeBestFit fits it into `budget`
/// bytes, freeing the cheapest value per byte at the peak each time. Fails
/// when nothing at the peak can move, with `why` naming the smallest budget
/// reached and what sets it.
mlir::LogicalResult freePeaksToBudget(TieringModel &model, TieringRewriter &rewriter,
                                      uint64_t budget, std::string &why);

} // namespace megatrain

#endif // MEGATRAIN_PASSES_TIERING_TIERINGGREEDY_H
