//===- TieringLead.h - mt-tier's lead: parameter fetches ahead of the queue ===//
//
// Stage 6b of mt-tier (passes/Tiering.cpp), on the chosen plan: the
// fetches of parameters were placed (stage 2, the policies' fetches for
// backward) by the compute of their own window, but the stages after them
// add prefetches whose transfers run on into that window, so a fetch can
// queue behind them and land after its use. The lead replays the link as
// one queue in position order and moves each fetch that finishes late to
// the latest position from which it lands in time, as long as the arena
// still places within the budget.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_PASSES_TIERING_TIERINGLEAD_H
#define MEGATRAIN_PASSES_TIERING_TIERINGLEAD_H

#include "tiering/TieringModel.h"

#include <cstdint>

namespace megatrain {

/// What the lead did.
struct LeadResult {
  int late = 0;           // parameter fetches the queue lands after their use
  double lateSeconds = 0; // by how much, together
  int moved = 0;          // fetches moved earlier (within the budget)
  double savedSeconds = 0; // the lateness the moves kept take off, by the queue
};

/// Moves the analyzed model's late parameter fetches (mt.param with uses)
/// earlier, each to the latest position from which the host-to-device queue (every
/// fetch and prefetch in position order, each starting once the compute
/// before its position is done and the link is free) lands it before the
/// compute before its first use is done. The moves are ranked by the
/// lateness each takes off per byte-position it adds to the arena, and the
/// longest prefix whose arena places within `budget` (0: no budget) is
/// kept (bisection). `hostShares` (TieringModel::hostShares) scales each
/// parameter's transfer by its share on the host: a device home's fetch is a
/// cast on the device, no transfer (absent: all on the host). The model is
/// analyzed again on return.
LeadResult leadParamFetches(TieringModel &model, uint64_t budget,
                            const llvm::StringMap<double> &hostShares = {});

} // namespace megatrain

#endif // MEGATRAIN_PASSES_TIERING_TIERINGLEAD_H
