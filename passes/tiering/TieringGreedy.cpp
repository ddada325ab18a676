//===- TieringGreedy.cpp - mt-tier's greedy freeing of the peak -----------===//
//
// Stages 3 and 4 of mt-tier; passes/Tiering.cpp describes them.
//
//===----------------------------------------------------------------------===//
#include "tiering/TieringGreedy.h"

#include "megatrain/plan/OpCost.h"
#include "megatrain/Passes/Placement.h"
#include "megatrain/plan/Format.h"

#include <algorithm>
#include <sstream>

namespace megatrain {

namespace {

/// A priced way to free a value at the peak.
struct Candidate {
  enum Kind { Refetch, Delay, Offload, Recompute } kind;
  mlir::Value value;
  int64_t gapStart; // a
  int64_t gapEnd;   // b: the first use after the peak
  int64_t place;    // where the new fetch goes (Refetch, Delay, Offload)
  double cost;
  uint64_t bytes;
};

std::string describe(mlir::Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << op->getName() << " at ";
  op->getLoc().print(os);
  return os.str();
}

void priceCandidates(const TieringModel &model, const TieringRewriter &rewriter, int64_t p,
                     std::vector<Candidate> &out) {
  const llvm::DenseSet<mlir::Value> none;
  const DeviceProfile &profile = model.deviceProfile();
  for (const LiveValue &value : model.liveValues()) {
    if (value.first > p || value.last <= p || value.first == p)
      continue;
    mlir::Operation *def = value.value.getDefiningOp();
    if (mlir::isa<mt::ConstantOp>(def))
      continue;
    if (std::binary_search(value.uses.begin(), value.uses.end(), p))
      continue;
    int64_t a, b;
    if (!value.gapBefore(p + 1, a, b))
      continue;
    double transfer = model.transferOf(value.value);

    if (isFetch(def)) {
      int64_t deadline = model.fetchDeadline(def);
      if (a == value.first) {
        // Not read yet: issue it after the peak instead.
        int64_t here = value.first;
        auto [k, exposed] =
            model.placeFetch(p + 1, deadline, b, transfer, here, model.h2dAt(here));
        if (k < 0)
          continue;
        double before = std::max(0.0, transfer - (model.computeIn(here, b) -
                                                  model.h2dIn(here, b) + model.h2dAt(here)));
        out.push_back({Candidate::Delay, value.value, a, b, k,
                       std::max(0.0, exposed - before), value.size});
      } else {
        auto [k, exposed] = model.placeFetch(p + 1, deadline, b, transfer);
        if (k < 0)
          continue;
        out.push_back({Candidate::Refetch, value.value, a, b, k, exposed, value.size});
      }
      continue;
    }
    // Offload after the def (once; a later gap reuses the host copy) and
    // prefetch before b. An input is live from position 0 (the runtime
    // writes it before the step) but its mt.input may sit later (a
    // micro-batch's input_ids@k): an offload after it frees nothing at a
    // peak before it, and a prefetch there would precede the offload.
    if (model.positionOf(def) < p) {
      auto [k, exposed] = model.placeFetch(p + 1, model.size(), b, transfer);
      if (k >= 0) {
        double out2 = 0;
        if (!hostCopyOf(value.value)) {
          double send = transferSeconds(value.size, Link::DeviceToHost, profile);
          double window = model.computeIn(value.first, p + 1);
          double busy = 0;
          for (int64_t i = value.first; i <= p; ++i)
            busy += model.d2hAt(i);
          out2 = std::max(0.0, send + busy - window);
        }
        out.push_back({Candidate::Offload, value.value, a, b, k, exposed + out2, value.size});
      }
    }
    if (!rewriter.recomputable(def))
      continue;
    llvm::SmallVector<mlir::Operation *> chain;
    llvm::DenseSet<mlir::Operation *> inChain;
    double cost = 0;
    if (rewriter.planRecompute(value.value, b, 0, none, chain, inChain, cost))
      out.push_back({Candidate::Recompute, value.value, a, b, b, cost, value.size});
  }
}

void apply(TieringRewriter &rewriter, const Candidate &candidate) {
  mlir::Value value = candidate.value;
  switch (candidate.kind) {
  case Candidate::Delay:
    rewriter.moveTo(value.getDefiningOp(), candidate.place);
    return;
  case Candidate::Refetch:
    rewriter.replaceUsesFrom(value, rewriter.refetch(value, candidate.place), candidate.gapEnd);
    return;
  case Candidate::Offload:
    rewriter.replaceUsesFrom(value, rewriter.offloadAndPrefetch(value, candidate.place),
                             candidate.gapEnd);
    return;
  case Candidate::Recompute: {
    const llvm::DenseSet<mlir::Value> none;
    rewriter.replaceUsesFrom(value, rewriter.recompute(value, candidate.gapEnd, none),
                             candidate.gapEnd);
    return;
  }
  }
}

/// Why no rewrite fits the budget: the arena reached, the op at the peak p
/// and the largest values pinned there.
std::string infeasible(const TieringModel &model, uint64_t budget, uint64_t reached,
                       int64_t p, uint64_t peak) {
  std::ostringstream os;
  os << "device budget " << formatBytes(budget) << " (" << budget
     << " bytes) cannot be met: the smallest budget that fits is "
     << formatBytes(reached) << " (" << reached << " bytes); it is set by step " << p
     << ", " << describe(model.opAt(p)) << ", whose operands and results";
  uint64_t working = 0;
  mlir::Operation *op = model.opAt(p);
  llvm::DenseSet<mlir::Value> seen;
  for (mlir::Value v : op->getOperands())
    if (seen.insert(v).second && model.live(v))
      working += model.live(v)->size;
  for (mlir::Value v : op->getResults())
    if (model.live(v))
      working += model.live(v)->size;
  os << " take " << formatBytes(working) << " of the " << formatBytes(peak)
     << " live there; the largest values that cannot move at that step:";
  std::vector<const LiveValue *> pinned;
  for (const LiveValue &value : model.liveValues())
    if (value.first <= p && value.last >= p)
      pinned.push_back(&value);
  llvm::sort(pinned, [](const LiveValue *x, const LiveValue *y) { return x->size > y->size; });
  for (size_t i = 0; i < pinned.size() && i < 3; ++i) {
    mlir::Operation *def = pinned[i]->value.getDefiningOp();
    os << (i ? "; " : " ") << formatBytes(pinned[i]->size) << " from " << describe(def);
  }
  return os.str();
}

} // namespace

mlir::LogicalResult freePeaksToBudget(TieringModel &model, TieringRewriter &rewriter,
                                      uint64_t budget, std::string &why) {
  uint64_t target = budget;
  std::vector<Candidate> candidates;
  // A rewrite frees bytes at the peak but may add ops (a recompute's
  // clones) that peak elsewhere: where the lowest peak has not fallen for
  // as many rewrites as the step first had ops, the rewrites go round in a
  // cycle, and the plan stands where it is.
  uint64_t lowest = UINT64_MAX;
  int64_t sinceLowest = 0;
  int64_t stallLimit = -1; // set once the step is first analyzed
  for (;;) {
    model.analyze();
    if (stallLimit < 0)
      stallLimit = std::max<int64_t>(64, model.size());
    int64_t p = 0;
    uint64_t peak = model.peakBytes(&p);
    if (peak < lowest) {
      lowest = peak;
      sinceLowest = 0;
    } else {
      ++sinceLowest;
    }
    if (peak <= target) {
      // Stage 4: the placement may need more than the peak.
      uint64_t arena = model.arenaBytes();
      if (arena <= budget)
        return mlir::success();
      uint64_t excess = arena - budget;
      target = peak > excess + kPlacementAlignment ? peak - excess - kPlacementAlignment : 0;
      continue;
    }
    candidates.clear();
    if (sinceLowest <= stallLimit)
      priceCandidates(model, rewriter, p, candidates);
    if (candidates.empty()) {
      // Smallest budget this planner reaches: the arena of the state it is in.
      // (The target may sit below the budget after a fragmentation step; the
      // state can still fit the budget itself.)
      uint64_t reached = model.arenaBytes();
      if (reached <= budget)
        return mlir::success();
      why = infeasible(model, budget, reached, p, peak);
      return mlir::failure();
    }
    const Candidate *best = &candidates.front();
    for (const Candidate &candidate : candidates) {
      double mine = candidate.cost / static_cast<double>(candidate.bytes);
      double theirs = best->cost / static_cast<double>(best->bytes);
      if (mine < theirs || (mine == theirs && candidate.bytes > best->bytes))
        best = &candidate;
    }
    apply(rewriter, *best);
  }
}

} // namespace megatrain
