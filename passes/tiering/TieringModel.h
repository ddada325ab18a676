//===- TieringModel.h - mt-tier's cost and timeline model of a schedule ---===//
//
// Stage 1 of mt-tier (passes/Tiering.cpp): what the planner knows about the
// block it rewrites. Positions are op indices in the block (terminator
// excluded); each position issues compute, a host-to-device fetch or a
// device-to-host offload; each value lives in the arena from its def to its
// last use. The model is a snapshot: every rewrite is followed by analyze().
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_PASSES_TIERING_TIERINGMODEL_H
#define MEGATRAIN_PASSES_TIERING_TIERINGMODEL_H

#include "megatrain/plan/DeviceProfile.h"
#include "megatrain/Passes/Passes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <string>
#include <utility>
#include <vector>

namespace megatrain {

/// mt.param and mt.prefetch: the ops that load the host-to-device link.
bool isFetch(mlir::Operation *op);

/// What the model knows about one value in the arena.
struct LiveValue {
  mlir::Value value;
  int64_t first;
  int64_t last;
  uint64_t size;
  llvm::SmallVector<int64_t, 4> uses; // sorted positions of the users

  /// The first use at or after `from` (b) and the use or def before it (a):
  /// the gap (a, b) the value sits idle in. False when no use is that late.
  bool gapBefore(int64_t from, int64_t &a, int64_t &b) const;
};

/// How far back from its use (in positions) a transfer's issue point is
/// looked for: placeFetch, the spill's prefetches and the lead walk this far.
inline constexpr int64_t kMaxFetchWalk = 2048;

class TieringModel {
public:
  TieringModel(mlir::func::FuncOp func, const DeviceProfile &profile)
      : func(func), profile(profile) {}

  /// Rebuilds the model from the block as it is now.
  void analyze();

  mlir::func::FuncOp function() const { return func; }
  const DeviceProfile &deviceProfile() const { return profile; }

  // --- positions ----------------------------------------------------------
  int64_t size() const { return static_cast<int64_t>(order.size()); }
  const std::vector<mlir::Operation *> &ops() const { return order; }
  mlir::Operation *opAt(int64_t place) const { return order[place]; }
  /// The position of `op`, or -1 for an op made since the last analyze().
  int64_t positionOf(mlir::Operation *op) const {
    auto it = position.find(op);
    return it == position.end() ? -1 : it->second;
  }

  // --- costs --------------------------------------------------------------
  double computeAt(int64_t place) const { return compute[place]; }
  double h2dAt(int64_t place) const { return h2d[place]; }
  double d2hAt(int64_t place) const { return d2h[place]; }
  double computeIn(int64_t from, int64_t to) const { // [from, to)
    return computePrefix[to] - computePrefix[from];
  }
  double h2dIn(int64_t from, int64_t to) const {
    return h2dPrefix[to] - h2dPrefix[from];
  }
  double transferOf(mlir::Value value) const;

  // --- memory -------------------------------------------------------------
  const std::vector<LiveValue> &liveValues() const { return values; }
  const LiveValue *live(mlir::Value value) const {
    auto it = valueIndex.find(value);
    return it == valueIndex.end() ? nullptr : &values[it->second];
  }
  /// The most bytes live at one position, and (in `where`) that position.
  uint64_t peakBytes(int64_t *where) const;
  /// The arena placeBestFit (mt-plan-memory's placement) makes of the values;
  /// those in `firstAt` live from the position it gives instead of their def.
  uint64_t arenaBytes(const llvm::DenseMap<mlir::Value, int64_t> &firstAt = {}) const;

  // --- the training step ----------------------------------------------------
  /// The backward start of the micro-batch whose forward defines a value
  /// first live at `first`, or -1 when it is defined in the last backward.
  int64_t boundaryOf(int64_t first) const;
  /// The micro-batch whose backward holds position `pos` (0 before the
  /// first backward; the backward of micro-batch k runs from its boundary to
  /// the next micro-batch's forward).
  int64_t microbatchOf(int64_t pos) const;
  /// How many micro-batches the step runs (1 without mt-microbatch).
  int64_t microbatches() const { return static_cast<int64_t>(boundaries.size()); }
  /// Where the last micro-batch's backward starts.
  int64_t lastBackwardStart() const { return boundaries.back(); }
  /// With micro-batches, each micro-batch's loss is a scalar forward value
  /// that the mean after the last micro-batch's forward reads: the policies leave such
  /// tiny values alone (freeing them saves nothing, and a rebuild would keep
  /// its inputs live to the end).
  bool tinyAcrossMicrobatches(const LiveValue &value) const;
  /// The last position a fetch may sit at: a parameter's master is
  /// rewritten by its update.
  int64_t fetchDeadline(mlir::Operation *fetch) const;

  // --- timing -------------------------------------------------------------
  /// Latest position in [lo, hi] (hi <= b; b itself means right before the
  /// use, fully exposed) to issue a transfer of `transfer` seconds needed at
  /// b, and the seconds of it compute cannot hide.
  /// `selfPos`/`selfS` remove the transfer's own load when it is already
  /// issued somewhere. Returns {-1, inf} when lo > hi.
  std::pair<int64_t, double> placeFetch(int64_t lo, int64_t hi, int64_t b,
                                        double transfer, int64_t selfPos = -1,
                                        double selfS = 0) const;
  /// Which share of the parameters (by elements: mt-homes' order, those
  /// updated first) the timeline takes to live on the host.
  struct HostShare {
    /// Their state: the fetches of the compute copy, the gradient's copy
    /// out and the host AdamW.
    double state = 1.0;
    /// With micro-batches, their sums: each part copied out and
    /// ACCUMULATEd on the host (the rest are summed in device accumulators,
    /// which mt-homes gives to those updated last first). At most `state`
    /// per parameter: a device home's sum is the device's.
    double sums = 1.0;
  };
  /// The step time the three-queue timeline (compute, h2d, d2h in issue
  /// order, plus the host optimizer) predicts, as a period of steps that
  /// repeat: the host's updates may run on into the next step, each until
  /// that step's fetch of its parameter (the runtime's host updates across
  /// steps). With shares below 1 (mt-homes chooses the homes after
  /// mt-tier), the parameters updated first are taken to be on the host up
  /// to that share of the elements (hostShares), the rest on the device: a
  /// host parameter's fetch, gradient copy and host update count in full
  /// (and its parts' copies and sums where `share.sums` covers it), a device
  /// one's not at all. `hostBusy`, when given, receives the host's seconds
  /// of work.
  double predictStepSeconds(HostShare share, double *hostBusy = nullptr) const;
  double predictStepSeconds() const { return predictStepSeconds(HostShare()); }
  /// Per trained parameter, the share of it taken to be on the host when
  /// `paramShare` of the state is: 1 for those updated first, 0 for those
  /// updated last (mt-homes' order for the device homes), a part for the
  /// one in between.
  llvm::StringMap<double> hostShares(double paramShare) const;

private:
  mlir::func::FuncOp func;
  const DeviceProfile &profile;

  std::vector<mlir::Operation *> order;
  llvm::DenseMap<mlir::Operation *, int64_t> position;
  std::vector<double> compute, h2d, d2h; // seconds issued per position
  std::vector<double> computePrefix, h2dPrefix;
  std::vector<LiveValue> values;
  llvm::DenseMap<mlir::Value, size_t> valueIndex;
  std::vector<int64_t> liveBytes;
  llvm::StringMap<int64_t> updatePosition; // param name -> its mt.adamw
  /// Parameters whose accumulator visits the device for each part
  /// (mt.accumulate = "visit", mt-tier's accumulator visits).
  llvm::StringSet<> visiting;
  int64_t backwardStart = 0;               // first position after the loss
  // Where backward starts, per micro-batch, ascending: the first op marked
  // mt.microbatch_backward = k for each k, or {backwardStart} without marks.
  std::vector<int64_t> boundaries;
};

} // namespace megatrain

#endif // MEGATRAIN_PASSES_TIERING_TIERINGMODEL_H
