//===- Tiering.cpp - mt-tier: fit the training step into a device budget --===//
//
// Input: a scheduled function (mt.step, mt.live_end). Every op result lives in
// the device arena from its def to its last use; parameters are fetched from
// their host masters by mt.param. Output: the same computation, rewritten so
// that the peak of live device bytes fits the budget, at the least predicted
// cost. Offloading never changes the math: every rewrite either moves bytes
// unchanged (fetch, offload, prefetch) or re-runs the same kernel on the same
// inputs (recompute).
//
// The algorithm (docs/tiering.md):
//
//   1. Model. Positions are op indices in the block. Each compute op costs
//      estimateKernel (OpCost.h) on the device profile; each fetch (mt.param,
//      mt.prefetch) loads the host-to-device link, each mt.offload the
//      device-to-host link, at the position where it is issued. A value lives
//      in the arena over [def, last use] (inputs from 0, constants forever).
//   2. Prefetch distance. Every parameter fetch moves to the latest position
//      k before its first use b such that the compute time of [k, b) covers
//      its transfer plus the transfers already issued in [k, b) on the link.
//      The distance comes from the costs, not from a fixed count.
//   3. Greedy freeing (policy auto). While the peak of live bytes exceeds
//      the target: at the peak position p, every value live at p but not read
//      there sits in a gap (a, b) between two of its uses. Price each way to
//      free it over the gap:
//        - a fetched value (parameter, prefetched activation): fetch it again
//          before b, no earlier than p + 1 (for a parameter, before its
//          optimizer update, which rewrites the master);
//        - a fetch not yet used: issue it later, after p;
//        - a computed value: offload it after its def and prefetch it before
//          b, or recompute it before b: clone its producer, whose operands
//          must be live at b, fetchable, or recomputable in turn (depth
//          bounded by kMaxRecomputeDepth).
//      The price is the predicted exposed time (the part of a transfer that
//      the compute of its window cannot hide) or the recompute time; the
//      cheapest per byte freed wins (ties: the bigger value). Apply, re-model,
//      repeat. No candidate at the peak: the budget is infeasible, and the
//      error gives the smallest budget the planner reached and what is live.
//   4. Fragmentation. Place the arena (placeBestFit, as mt-plan-memory
//      will); if it exceeds the budget, lower the target by the excess and
//      continue 3.
//   5. Portfolio. The greedy also starts from two reference policies'
//      plans (checkpoint at layer boundaries, offload everything backward
//      reads) instead of from keeping everything, and the three reference
//      policies are built as they are; auto keeps whichever fitting plan the
//      three-queue timeline model (compute, h2d, d2h, plus the host
//      optimizer) predicts fastest, so it is never worse than them by the
//      model. The plan header names the winner, e.g. "auto (checkpoint+greedy)".
//   6. Renumber mt.step and recompute mt.live_end.
//
// Not optimal for: the choice is greedy at the current peak, one value at a
// time, so a rewrite that would free several peaks at once can be missed;
// recompute chains are bounded; the link model ignores the duplex rate and
// the stalls memory reuse adds (the plan simulator predicts those).
//
//===----------------------------------------------------------------------===//
#include "megatrain/Passes/Passes.h"

#include "megatrain/Cost/DeviceProfile.h"
#include "megatrain/Cost/OpCost.h"
#include "megatrain/Passes/Placement.h"
#include "megatrain/plan/Format.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Regex.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace megatrain {
#define GEN_PASS_DEF_TIER
#include "megatrain/Passes/Passes.h.inc"

namespace {

constexpr int kMaxRecomputeDepth = 8;
// The checkpoint policy rebuilds a whole layer from its input.
constexpr int kMaxCheckpointDepth = 1024;
constexpr int64_t kMaxLeadWalk = 2048;

bool isFetch(mlir::Operation *op) { return mlir::isa<mt::ParamOp, mt::PrefetchOp>(op); }

uint64_t valueBytes(mlir::Value value) {
  auto type = mlir::cast<mlir::RankedTensorType>(value.getType());
  uint64_t bytes = (type.getElementType().getIntOrFloatBitWidth() + 7) / 8;
  for (int64_t dim : type.getShape())
    bytes *= static_cast<uint64_t>(dim);
  return alignPlacement(std::max<uint64_t>(bytes, 1));
}

TensorShape shapeOf(mlir::Value value) {
  auto type = mlir::cast<mlir::RankedTensorType>(value.getType());
  TensorShape shape;
  shape.dims.assign(type.getShape().begin(), type.getShape().end());
  shape.elementBytes = (type.getElementType().getIntOrFloatBitWidth() + 7) / 8;
  return shape;
}

std::string describe(mlir::Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << op->getName() << " at ";
  op->getLoc().print(os);
  return os.str();
}

/// What the model knows about one value in the arena.
struct LiveValue {
  mlir::Value value;
  int64_t first;
  int64_t last;
  uint64_t size;
  llvm::SmallVector<int64_t, 4> uses; // sorted positions of the users

  /// The first use at or after `from` (b) and the use or def before it (a):
  /// the gap (a, b) the value sits idle in. False when no use is that late.
  bool gapBefore(int64_t from, int64_t &a, int64_t &b) const {
    auto after = std::lower_bound(uses.begin(), uses.end(), from);
    if (after == uses.end())
      return false;
    b = *after;
    a = after == uses.begin() ? first : *(after - 1);
    return true;
  }
};

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

class Planner {
public:
  Planner(mlir::func::FuncOp func, const DeviceProfile &profile)
      : func(func), profile(profile) {}

  // --- model --------------------------------------------------------------
  void analyze();
  double seconds(mlir::Operation *op) const;
  uint64_t peakBytes(int64_t *where) const;
  uint64_t arenaBytes() const;
  double predictStepSeconds() const;

  // --- rewrites -----------------------------------------------------------
  void placeParamFetches();
  mlir::LogicalResult greedy(uint64_t budget);
  void applyOffloadPolicy();
  mlir::LogicalResult applyCheckpointPolicy();
  void renumber(uint64_t budget);

  std::string infeasibleReason;

private:
  mlir::func::FuncOp func;
  const DeviceProfile &profile;
  int maxDepth = kMaxRecomputeDepth;
  // Whether analyze() holds the bytes of values copied out until the copy
  // is covered (set only for the final numbering, when it fits the budget).
  bool holdCopies = false;

  std::vector<mlir::Operation *> order;
  llvm::DenseMap<mlir::Operation *, int64_t> position;
  std::vector<double> compute, h2d, d2h; // seconds issued per position
  std::vector<double> computePrefix, h2dPrefix;
  std::vector<LiveValue> values;
  llvm::DenseMap<mlir::Value, size_t> valueIndex;
  std::vector<int64_t> liveBytes;
  llvm::StringMap<int64_t> updatePosition; // param name -> its mt.adamw
  int64_t backwardStart = 0;               // first position after the loss
  // Where backward starts, per micro-batch, ascending: the first op marked
  // mt.microbatch_backward = k for each k, or {backwardStart} without marks.
  std::vector<int64_t> boundaries;
  /// The backward start of the micro-batch whose forward defines a value
  /// first live at `first`, or -1 when it is defined in the last backward.
  int64_t boundaryOf(int64_t first) const {
    auto it = std::upper_bound(boundaries.begin(), boundaries.end(), first);
    return it == boundaries.end() ? -1 : *it;
  }
  /// With micro-batches, each micro-batch's loss is a scalar forward value
  /// that the mean at the end of the step reads: the policies leave such
  /// tiny values alone (freeing them saves nothing, and a rebuild would keep
  /// its inputs live to the end).
  bool tinyAcrossMicrobatches(const LiveValue &value) const {
    auto type = mlir::dyn_cast<mlir::RankedTensorType>(value.value.getType());
    return boundaries.size() > 1 && type && type.hasStaticShape() &&
           type.getNumElements() <= 4;
  }
  // Values that replaced an original value for its later uses.
  llvm::DenseMap<mlir::Value, llvm::SmallVector<mlir::Value, 2>> replacements;

  double computeIn(int64_t from, int64_t to) const { // [from, to)
    return computePrefix[to] - computePrefix[from];
  }
  double h2dIn(int64_t from, int64_t to) const {
    return h2dPrefix[to] - h2dPrefix[from];
  }
  const LiveValue *live(mlir::Value value) const {
    auto it = valueIndex.find(value);
    return it == valueIndex.end() ? nullptr : &values[it->second];
  }

  /// Latest position in [lo, hi] (hi <= b; b itself means right before the
  /// use, fully exposed) to issue a transfer of `transfer` seconds needed at
  /// b, and the seconds of it compute cannot hide.
  /// `selfPos`/`selfS` remove the transfer's own load when it is already
  /// issued somewhere. Returns {-1, inf} when lo > hi.
  std::pair<int64_t, double> placeFetch(int64_t lo, int64_t hi, int64_t b,
                                        double transfer, int64_t selfPos = -1,
                                        double selfS = 0) const;
  int64_t fetchDeadline(mlir::Operation *fetch) const;
  double transferOf(mlir::Value value) const {
    return transferSeconds(valueBytes(value), Link::HostToDevice, profile);
  }

  /// Plans the recompute of `value` before position b: the ops to clone in
  /// order, their seconds, or failure.
  bool planRecompute(mlir::Value value, int64_t b, int depth,
                     const llvm::DenseSet<mlir::Value> &mustRebuild,
                     llvm::SmallVectorImpl<mlir::Operation *> &chain,
                     llvm::DenseSet<mlir::Operation *> &inChain, double &cost) const;
  bool availableAt(mlir::Value value, int64_t b,
                   const llvm::DenseSet<mlir::Value> &mustRebuild,
                   mlir::Value *found) const;
  bool recomputable(mlir::Operation *op) const;

  void priceCandidates(int64_t p, std::vector<Candidate> &out) const;
  void apply(const Candidate &candidate);
  void replaceUsesFrom(mlir::Value value, mlir::Value replacement, int64_t from);
  mlir::Value refetch(mlir::Value value, int64_t place);
  mlir::Value offloadAndPrefetch(mlir::Value value, int64_t place);
  mlir::Value recompute(mlir::Value value, int64_t b,
                        const llvm::DenseSet<mlir::Value> &mustRebuild);
  void moveTo(mlir::Operation *op, int64_t place);
};

void Planner::analyze() {
  order.clear();
  position.clear();
  values.clear();
  valueIndex.clear();
  updatePosition.clear();
  mlir::Block &block = func.getBody().front();
  for (mlir::Operation &op : block.without_terminator()) {
    position[&op] = static_cast<int64_t>(order.size());
    order.push_back(&op);
  }
  int64_t n = static_cast<int64_t>(order.size());
  compute.assign(n, 0);
  h2d.assign(n, 0);
  d2h.assign(n, 0);
  backwardStart = n;
  for (int64_t i = 0; i < n; ++i) {
    mlir::Operation *op = order[i];
    if (isFetch(op))
      h2d[i] = transferOf(op->getResult(0));
    else if (mlir::isa<mt::OffloadOp>(op))
      d2h[i] = transferSeconds(valueBytes(op->getResult(0)), Link::DeviceToHost, profile);
    else if (auto update = mlir::dyn_cast<mt::AdamWOp>(op))
      updatePosition[update.getParam()] = i;
    else
      compute[i] = seconds(op);
    if (mlir::isa<mt::LossOp>(op) && backwardStart == n)
      backwardStart = i + 1;
  }
  // Micro-batches (mt-microbatch): each splits at its own first backward op.
  // Ops cloned here to recompute a value are not backward ops.
  llvm::DenseMap<int64_t, int64_t> firstBackward;
  for (int64_t i = 0; i < n; ++i) {
    mlir::Operation *op = order[i];
    auto mark = op->getAttrOfType<mlir::IntegerAttr>(mt::attr::kMicrobatchBackward);
    if (!mark || op->hasAttr(mt::attr::kRecompute))
      continue;
    firstBackward.try_emplace(mark.getInt(), i);
  }
  boundaries.clear();
  for (const auto &entry : firstBackward)
    boundaries.push_back(entry.second);
  if (boundaries.empty())
    boundaries.push_back(backwardStart);
  llvm::sort(boundaries);
  boundaries.erase(std::unique(boundaries.begin(), boundaries.end()), boundaries.end());
  computePrefix.assign(n + 1, 0);
  h2dPrefix.assign(n + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    computePrefix[i + 1] = computePrefix[i] + compute[i];
    h2dPrefix[i + 1] = h2dPrefix[i] + h2d[i];
  }

  liveBytes.assign(n + 1, 0);
  std::vector<int64_t> delta(n + 2, 0);
  for (int64_t i = 0; i < n; ++i) {
    mlir::Operation *op = order[i];
    if (mlir::isa<mt::OffloadOp>(op))
      continue; // host staging, not the arena
    for (mlir::Value result : op->getResults()) {
      LiveValue value{result, i, i, valueBytes(result), {}};
      for (mlir::Operation *user : result.getUsers())
        value.uses.push_back(position.lookup(user));
      llvm::sort(value.uses);
      if (!value.uses.empty())
        value.last = std::max(value.last, value.uses.back());
      // A value copied out (offload, gradient, loss, kept output) keeps its
      // bytes until the compute after the copy's issue covers the copy, so
      // the next value placed there does not stall compute on the link
      // (only in the final numbering, and only when that still fits).
      for (mlir::Operation *user : result.getUsers()) {
        if (!holdCopies ||
            !mlir::isa<mt::OffloadOp, mt::AdamWOp, mt::LossOp, mt::OutputOp>(user))
          continue;
        double copy = transferSeconds(valueBytes(result), Link::DeviceToHost, profile);
        int64_t q = position.lookup(user);
        while (q + 1 < n && computeIn(position.lookup(user) + 1, q + 1) < copy)
          ++q;
        value.last = std::max(value.last, q);
      }
      if (mlir::isa<mt::InputOp>(op))
        value.first = 0;
      if (mlir::isa<mt::ConstantOp>(op)) {
        value.first = 0;
        value.last = n;
      }
      delta[value.first] += static_cast<int64_t>(value.size);
      delta[value.last + 1] -= static_cast<int64_t>(value.size);
      valueIndex[result] = values.size();
      values.push_back(std::move(value));
    }
  }
  int64_t running = 0;
  for (int64_t i = 0; i <= n; ++i) {
    running += delta[i];
    liveBytes[i] = running;
  }
}

double Planner::seconds(mlir::Operation *op) const {
  if (mlir::isa<mt::InputOp, mt::ConstantOp, mt::LossOp, mt::OutputOp,
                mt::ParamGradOp, mt::AdamWOp, mt::GradPartOp>(op))
    return 0;
  KernelDesc kernel;
  kernel.kernel = op->getName().stripDialect().str();
  for (mlir::Value operand : op->getOperands())
    kernel.inputs.push_back(shapeOf(operand));
  for (mlir::Value result : op->getResults())
    kernel.outputs.push_back(shapeOf(result));
  Precision rate = Precision::FP32;
  for (mlir::NamedAttribute attr : op->getAttrs()) {
    if (auto flag = mlir::dyn_cast<mlir::BoolAttr>(attr.getValue()))
      kernel.intAttrs[attr.getName().str()] = flag.getValue();
    else if (auto number = mlir::dyn_cast<mlir::IntegerAttr>(attr.getValue()))
      kernel.intAttrs[attr.getName().str()] = number.getInt();
    else if (auto text = mlir::dyn_cast<mlir::StringAttr>(attr.getValue());
             text && attr.getName() == "precision")
      rate = precisionNamed(text.str());  // mt-precision's tf32 or bf16
  }
  return estimateKernel(kernel, profile, rate).seconds;
}

uint64_t Planner::peakBytes(int64_t *where) const {
  int64_t best = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(order.size()); ++i)
    if (liveBytes[i] > liveBytes[best])
      best = i;
  if (where)
    *where = best;
  return liveBytes.empty() ? 0 : static_cast<uint64_t>(liveBytes[best]);
}

uint64_t Planner::arenaBytes() const {
  std::vector<Slot> slots;
  slots.reserve(values.size());
  int64_t n = static_cast<int64_t>(order.size());
  for (const LiveValue &value : values) {
    Slot slot;
    slot.first = value.first;
    slot.last = value.last >= n ? kLivesForever : value.last;
    slot.size = value.size;
    slots.push_back(slot);
  }
  return placeBestFit(slots);
}

std::pair<int64_t, double> Planner::placeFetch(int64_t lo, int64_t hi, int64_t b,
                                               double transfer, int64_t selfPos,
                                               double selfS) const {
  hi = std::min(hi, b);
  if (lo > hi)
    return {-1, INFINITY};
  // Slack of the window [k, b): its compute minus the transfers already
  // issued on the link there (not counting this one where it sits now).
  double slack = computeIn(hi, b) - h2dIn(hi, b);
  if (selfPos >= hi && selfPos < b)
    slack += selfS;
  if (slack >= transfer)
    return {hi, 0.0};
  int64_t best = hi;
  double bestSlack = slack;
  int64_t stop = std::max(lo, hi - kMaxLeadWalk);
  for (int64_t k = hi - 1; k >= stop; --k) {
    slack += compute[k] - h2d[k];
    if (k == selfPos)
      slack += selfS;
    if (slack >= transfer)
      return {k, 0.0};
    if (slack > bestSlack) {
      bestSlack = slack;
      best = k;
    }
  }
  return {best, std::max(0.0, transfer - bestSlack)};
}

int64_t Planner::fetchDeadline(mlir::Operation *fetch) const {
  // A parameter's master is rewritten by its update: fetch before it.
  if (auto param = mlir::dyn_cast<mt::ParamOp>(fetch)) {
    auto it = updatePosition.find(param.getName());
    if (it != updatePosition.end())
      return it->second - 1;
  }
  return static_cast<int64_t>(order.size());
}

void Planner::moveTo(mlir::Operation *op, int64_t place) {
  mlir::Operation *anchor = order[place];
  if (anchor != op)
    op->moveBefore(anchor);
}

void Planner::placeParamFetches() {
  analyze();
  // In order of first use, so earlier fetches claim the link first.
  std::vector<mlir::Operation *> fetches;
  for (mlir::Operation *op : order)
    if (mlir::isa<mt::ParamOp>(op) && !op->getResult(0).use_empty())
      fetches.push_back(op);
  for (mlir::Operation *fetch : fetches) {
    const LiveValue *value = live(fetch->getResult(0));
    int64_t b = value->uses.front();
    int64_t here = position.lookup(fetch);
    auto [k, exposed] = placeFetch(0, fetchDeadline(fetch), b, h2d[here], here, h2d[here]);
    (void)exposed;
    if (k >= 0 && k != here) {
      moveTo(fetch, k);
      analyze();
    }
  }
}

bool Planner::recomputable(mlir::Operation *op) const {
  if (op->getNumResults() == 0 || op->getNumRegions() != 0)
    return false;
  if (mlir::isa<mt::ParamOp, mt::InputOp, mt::ConstantOp, mt::OffloadOp,
                mt::PrefetchOp>(op))
    return false;
  return mlir::isMemoryEffectFree(op);
}

bool Planner::availableAt(mlir::Value value, int64_t b,
                          const llvm::DenseSet<mlir::Value> &mustRebuild,
                          mlir::Value *found) const {
  auto liveAt = [&](mlir::Value candidate) {
    const LiveValue *info = live(candidate);
    return info && info->first < b && info->last >= b;
  };
  if (!mustRebuild.contains(value) && liveAt(value)) {
    *found = value;
    return true;
  }
  // A copy made earlier (fetched again, prefetched, rebuilt) serves if it is
  // live at b; under the checkpoint policy (mustRebuild set) any copy made
  // before b does, its life extended to b, so a layer is rebuilt once.
  auto it = replacements.find(value);
  if (it != replacements.end())
    for (mlir::Value replacement : it->second) {
      const LiveValue *info = live(replacement);
      bool earlier = info && info->first < b;
      if (liveAt(replacement) || (earlier && !mustRebuild.empty())) {
        *found = replacement;
        return true;
      }
    }
  return false;
}

bool Planner::planRecompute(mlir::Value value, int64_t b, int depth,
                            const llvm::DenseSet<mlir::Value> &mustRebuild,
                            llvm::SmallVectorImpl<mlir::Operation *> &chain,
                            llvm::DenseSet<mlir::Operation *> &inChain,
                            double &cost) const {
  mlir::Operation *def = value.getDefiningOp();
  if (!def || !recomputable(def) || depth > maxDepth)
    return false;
  if (inChain.contains(def))
    return true;
  for (mlir::Value operand : def->getOperands()) {
    mlir::Value found;
    if (availableAt(operand, b, mustRebuild, &found))
      continue;
    mlir::Operation *producer = operand.getDefiningOp();
    if (producer && mlir::isa<mt::ConstantOp>(producer))
      continue;
    if (producer && mlir::isa<mt::ParamOp>(producer)) {
      if (inChain.contains(producer))
        continue;
      if (fetchDeadline(producer) < b - 1)
        return false; // the master is already updated at b
      cost += transferOf(operand);
      inChain.insert(producer);
      chain.push_back(producer);
      continue;
    }
    if (!planRecompute(operand, b, depth + 1, mustRebuild, chain, inChain, cost))
      return false;
  }
  inChain.insert(def);
  chain.push_back(def);
  cost += compute[position.lookup(def)];
  return true;
}

void Planner::priceCandidates(int64_t p, std::vector<Candidate> &out) const {
  const llvm::DenseSet<mlir::Value> none;
  for (const LiveValue &value : values) {
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
    double transfer = transferOf(value.value);

    if (isFetch(def)) {
      int64_t deadline = fetchDeadline(def);
      if (a == value.first) {
        // Not read yet: issue it after the peak instead.
        int64_t here = value.first;
        auto [k, exposed] = placeFetch(p + 1, deadline, b, transfer, here, h2d[here]);
        if (k < 0)
          continue;
        double before = std::max(0.0, transfer - (computeIn(here, b) - h2dIn(here, b) + h2d[here]));
        out.push_back({Candidate::Delay, value.value, a, b, k,
                       std::max(0.0, exposed - before), value.size});
      } else {
        auto [k, exposed] = placeFetch(p + 1, deadline, b, transfer);
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
    if (position.lookup(def) < p) {
      auto [k, exposed] = placeFetch(p + 1, static_cast<int64_t>(order.size()), b, transfer);
      if (k >= 0) {
        bool hasHostCopy = llvm::any_of(value.value.getUsers(), [](mlir::Operation *user) {
          return mlir::isa<mt::OffloadOp>(user);
        });
        double out2 = 0;
        if (!hasHostCopy) {
          double send = transferSeconds(value.size, Link::DeviceToHost, profile);
          double window = computeIn(value.first, p + 1);
          double busy = 0;
          for (int64_t i = value.first; i <= p; ++i)
            busy += d2h[i];
          out2 = std::max(0.0, send + busy - window);
        }
        out.push_back({Candidate::Offload, value.value, a, b, k, exposed + out2, value.size});
      }
    }
    if (!recomputable(def))
      continue;
    llvm::SmallVector<mlir::Operation *> chain;
    llvm::DenseSet<mlir::Operation *> inChain;
    double cost = 0;
    if (planRecompute(value.value, b, 0, none, chain, inChain, cost))
      out.push_back({Candidate::Recompute, value.value, a, b, b, cost, value.size});
  }
}

void Planner::replaceUsesFrom(mlir::Value value, mlir::Value replacement, int64_t from) {
  value.replaceUsesWithIf(replacement, [&](mlir::OpOperand &use) {
    mlir::Operation *owner = use.getOwner();
    auto it = position.find(owner);
    // Ops created by this rewrite are not positioned and use what they were built with.
    return it != position.end() && it->second >= from && owner != replacement.getDefiningOp();
  });
  replacements[value].push_back(replacement);
  // Chains of replacement: an original whose replacement is replaced again.
  for (auto &entry : replacements)
    if (llvm::is_contained(entry.second, value) && entry.first != value)
      entry.second.push_back(replacement);
}

mlir::Value Planner::refetch(mlir::Value value, int64_t place) {
  mlir::Operation *def = value.getDefiningOp();
  mlir::OpBuilder builder(order[place]);
  mlir::Operation *clone = builder.clone(*def);
  return clone->getResult(0);
}

mlir::Value Planner::offloadAndPrefetch(mlir::Value value, int64_t place) {
  mlir::Value host;
  for (mlir::Operation *user : value.getUsers())
    if (auto offload = mlir::dyn_cast<mt::OffloadOp>(user))
      host = offload.getResult();
  if (!host) {
    mlir::Operation *def = value.getDefiningOp();
    mlir::OpBuilder builder(def->getContext());
    builder.setInsertionPointAfter(def);
    host = builder.create<mt::OffloadOp>(def->getLoc(), value.getType(), value);
  }
  mlir::OpBuilder builder(order[place]);
  return builder.create<mt::PrefetchOp>(value.getLoc(), value.getType(), host);
}

mlir::Value Planner::recompute(mlir::Value value, int64_t b,
                               const llvm::DenseSet<mlir::Value> &mustRebuild) {
  llvm::SmallVector<mlir::Operation *> chain;
  llvm::DenseSet<mlir::Operation *> inChain;
  double cost = 0;
  bool ok = planRecompute(value, b, 0, mustRebuild, chain, inChain, cost);
  assert(ok && "recompute was priced as possible");
  (void)ok;
  mlir::IRMapping mapping;
  mlir::OpBuilder builder(order[b]);
  mlir::UnitAttr unit = builder.getUnitAttr();
  for (mlir::Operation *op : chain) {
    for (mlir::Value operand : op->getOperands()) {
      if (mapping.contains(operand))
        continue;
      mlir::Value found;
      if (availableAt(operand, b, mustRebuild, &found))
        mapping.map(operand, found);
    }
    mlir::Operation *clone = builder.clone(*op, mapping);
    if (!mlir::isa<mt::ParamOp>(clone))
      clone->setAttr(mt::attr::kRecompute, unit);
    for (auto [original, copy] : llvm::zip(op->getResults(), clone->getResults()))
      if (original != value)
        replacements[original].push_back(copy);
  }
  return mapping.lookup(value);
}

void Planner::apply(const Candidate &candidate) {
  mlir::Value value = candidate.value;
  switch (candidate.kind) {
  case Candidate::Delay:
    moveTo(value.getDefiningOp(), candidate.place);
    return;
  case Candidate::Refetch:
    replaceUsesFrom(value, refetch(value, candidate.place), candidate.gapEnd);
    return;
  case Candidate::Offload:
    replaceUsesFrom(value, offloadAndPrefetch(value, candidate.place), candidate.gapEnd);
    return;
  case Candidate::Recompute: {
    const llvm::DenseSet<mlir::Value> none;
    replaceUsesFrom(value, recompute(value, candidate.gapEnd, none), candidate.gapEnd);
    return;
  }
  }
}

mlir::LogicalResult Planner::greedy(uint64_t budget) {
  uint64_t target = budget;
  std::vector<Candidate> candidates;
  for (;;) {
    analyze();
    int64_t p = 0;
    uint64_t peak = peakBytes(&p);
    if (peak <= target) {
      uint64_t arena = arenaBytes();
      if (arena <= budget)
        return mlir::success();
      uint64_t excess = arena - budget;
      target = peak > excess + kPlacementAlignment ? peak - excess - kPlacementAlignment : 0;
      continue;
    }
    candidates.clear();
    priceCandidates(p, candidates);
    if (candidates.empty()) {
      // Smallest budget this planner reaches: the arena of the state it is in.
      // (The target may sit below the budget after a fragmentation step; the
      // state can still fit the budget itself.)
      uint64_t reached = arenaBytes();
      if (reached <= budget)
        return mlir::success();
      std::ostringstream os;
      os << "device budget " << formatBytes(budget) << " (" << budget
         << " bytes) cannot be met: the smallest budget that fits is "
         << formatBytes(reached) << " (" << reached << " bytes); it is set by step " << p
         << ", " << describe(order[p]) << ", whose operands and results";
      uint64_t working = 0;
      mlir::Operation *op = order[p];
      llvm::DenseSet<mlir::Value> seen;
      for (mlir::Value v : op->getOperands())
        if (seen.insert(v).second && live(v))
          working += live(v)->size;
      for (mlir::Value v : op->getResults())
        if (live(v))
          working += live(v)->size;
      os << " take " << formatBytes(working) << " of the " << formatBytes(peak)
         << " live there; the largest values that cannot move at that step:";
      std::vector<const LiveValue *> pinned;
      for (const LiveValue &value : values)
        if (value.first <= p && value.last >= p)
          pinned.push_back(&value);
      llvm::sort(pinned, [](const LiveValue *x, const LiveValue *y) { return x->size > y->size; });
      for (size_t i = 0; i < pinned.size() && i < 3; ++i) {
        mlir::Operation *def = pinned[i]->value.getDefiningOp();
        os << (i ? "; " : " ") << formatBytes(pinned[i]->size) << " from " << describe(def);
      }
      infeasibleReason = os.str();
      return mlir::failure();
    }
    const Candidate *best = &candidates.front();
    for (const Candidate &candidate : candidates) {
      double mine = candidate.cost / static_cast<double>(candidate.bytes);
      double theirs = best->cost / static_cast<double>(best->bytes);
      if (mine < theirs || (mine == theirs && candidate.bytes > best->bytes))
        best = &candidate;
    }
    apply(*best);
  }
}

void Planner::applyOffloadPolicy() {
  analyze();
  // Every value forward produces and backward reads: offload (activations)
  // or fetch again (parameters), before its first backward use.
  std::vector<mlir::Value> targets;
  for (const LiveValue &value : values) {
    mlir::Operation *def = value.value.getDefiningOp();
    int64_t start = boundaryOf(value.first);
    if (start < 0 || mlir::isa<mt::InputOp, mt::ConstantOp>(def) ||
        tinyAcrossMicrobatches(value))
      continue;
    if (value.last < start)
      continue;
    if (!isFetch(def) && !recomputable(def))
      continue;
    targets.push_back(value.value);
  }
  for (mlir::Value target : targets) {
    analyze();
    int64_t a, b;
    int64_t start = boundaryOf(live(target)->first);
    if (start < 0 || !live(target)->gapBefore(start, a, b))
      continue;
    mlir::Operation *def = target.getDefiningOp();
    int64_t deadline = isFetch(def) ? fetchDeadline(def) : static_cast<int64_t>(order.size());
    auto [k, exposed] = placeFetch(a + 1, deadline, b, transferOf(target));
    (void)exposed;
    if (k < 0)
      continue;
    mlir::Value replacement = isFetch(def) ? refetch(target, k) : offloadAndPrefetch(target, k);
    replaceUsesFrom(target, replacement, b);
  }
  analyze();
}

/// The layer number of a parameter name (`...layers.3....`, `...h.3....`), or -1.
int64_t layerOfName(llvm::StringRef name) {
  static const llvm::Regex pattern("(^|[._/])(layers|layer|h|blocks|block)[._/]([0-9]+)([._/]|$)");
  llvm::SmallVector<llvm::StringRef, 5> groups;
  if (!pattern.match(name, &groups))
    return -1;
  int64_t layer = -1;
  groups[3].getAsInteger(10, layer);
  return layer;
}

mlir::LogicalResult Planner::applyCheckpointPolicy() {
  maxDepth = kMaxCheckpointDepth;
  analyze();
  // Layer of each forward op: the largest layer among the parameters it reads
  // and its operands' producers.
  llvm::DenseMap<mlir::Operation *, int64_t> layer;
  for (int64_t i = 0; i < boundaries.back() && i < static_cast<int64_t>(order.size()); ++i) {
    mlir::Operation *op = order[i];
    int64_t l = -1;
    if (auto param = mlir::dyn_cast<mt::ParamOp>(op))
      l = layerOfName(param.getName());
    for (mlir::Value operand : op->getOperands())
      if (mlir::Operation *def = operand.getDefiningOp())
        l = std::max(l, layer.lookup(def));
    layer[op] = l;
  }
  // Recompute every activation backward reads that does not cross a layer
  // boundary; keep the boundary values.
  llvm::DenseSet<mlir::Value> rebuild;
  std::vector<std::pair<int64_t, mlir::Value>> targets;
  std::vector<mlir::Value> params;
  for (const LiveValue &value : values) {
    mlir::Operation *def = value.value.getDefiningOp();
    int64_t start = boundaryOf(value.first);
    if (start < 0 || value.last < start || tinyAcrossMicrobatches(value))
      continue;
    if (mlir::isa<mt::ParamOp>(def)) {
      params.push_back(value.value);
      continue;
    }
    if (!recomputable(def))
      continue;
    int64_t l = layer.lookup(def);
    if (l < 0)
      continue;
    bool boundary = false;
    for (mlir::Operation *user : value.value.getUsers()) {
      auto it = position.find(user);
      if (it->second < start && layer.lookup(user) != l)
        boundary = true;
    }
    if (boundary)
      continue;
    int64_t a, b;
    if (!value.gapBefore(start, a, b))
      continue;
    rebuild.insert(value.value);
    targets.push_back({b, value.value});
  }
  llvm::sort(targets, [](const auto &x, const auto &y) { return x.first < y.first; });
  for (const auto &[unused, target] : targets) {
    analyze();
    int64_t a, b;
    int64_t start = boundaryOf(live(target)->first);
    if (start < 0 || !live(target)->gapBefore(start, a, b))
      continue;
    // An earlier rebuild may already hold it live here.
    auto it = replacements.find(target);
    bool reused = false;
    if (it != replacements.end())
      for (mlir::Value replacement : it->second) {
        const LiveValue *info = live(replacement);
        if (info && info->first < b) {
          replaceUsesFrom(target, replacement, b);
          reused = true;
          break;
        }
      }
    if (reused)
      continue;
    llvm::SmallVector<mlir::Operation *> chain;
    llvm::DenseSet<mlir::Operation *> inChain;
    double cost = 0;
    if (!planRecompute(target, b, 0, rebuild, chain, inChain, cost))
      continue; // deeper than the bound: keep it
    replaceUsesFrom(target, recompute(target, b, rebuild), b);
  }
  // Parameters are fetched again for backward.
  for (mlir::Value param : params) {
    analyze();
    const LiveValue *value = live(param);
    int64_t a, b;
    if (!value)
      continue;
    int64_t start = boundaryOf(value->first);
    if (start < 0 || !value->gapBefore(start, a, b))
      continue;
    auto [k, exposed] = placeFetch(a + 1, fetchDeadline(param.getDefiningOp()), b, transferOf(param));
    (void)exposed;
    if (k >= 0)
      replaceUsesFrom(param, refetch(param, k), b);
  }
  analyze();
  return mlir::success();
}

double Planner::predictStepSeconds() const {
  // Three queues in issue order plus the host optimizer.
  llvm::DenseMap<mlir::Value, double> ready;
  double clock = 0, h2dFree = 0, d2hFree = 0, hostFree = 0;
  llvm::StringSet<> parted; // parameters with an earlier mt.grad_part
  for (int64_t i = 0; i < static_cast<int64_t>(order.size()); ++i) {
    mlir::Operation *op = order[i];
    auto readyOf = [&](mlir::Value value) {
      auto it = ready.find(value);
      return it == ready.end() ? 0.0 : it->second;
    };
    if (isFetch(op)) {
      double start = std::max(clock, h2dFree);
      if (auto prefetch = mlir::dyn_cast<mt::PrefetchOp>(op))
        start = std::max(start, readyOf(prefetch.getHost()));
      h2dFree = start + h2d[i];
      ready[op->getResult(0)] = h2dFree;
      continue;
    }
    if (auto offload = mlir::dyn_cast<mt::OffloadOp>(op)) {
      double start = std::max(d2hFree, readyOf(offload.getValue()));
      d2hFree = start + d2h[i];
      ready[offload.getResult()] = d2hFree;
      continue;
    }
    if (auto update = mlir::dyn_cast<mt::AdamWOp>(op)) {
      mlir::Value grad = update.getGrad();
      double start = std::max(d2hFree, readyOf(grad));
      d2hFree = start + transferSeconds(valueBytes(grad), Link::DeviceToHost, profile);
      auto type = mlir::cast<mlir::RankedTensorType>(grad.getType());
      double hostStart = std::max(hostFree, d2hFree);
      if (parted.contains(update.getParam())) // the last part is accumulated first
        hostStart += hostAccumulateSeconds(type.getNumElements(), profile);
      hostFree = hostStart + hostAdamWSeconds(type.getNumElements(), profile);
      continue;
    }
    if (auto part = mlir::dyn_cast<mt::GradPartOp>(op)) {
      // A micro-batch gradient part: d2h, then (after part 0) ACCUMULATE.
      mlir::Value grad = part.getGrad();
      parted.insert(part.getParam());
      double start = std::max(d2hFree, readyOf(grad));
      d2hFree = start + transferSeconds(valueBytes(grad), Link::DeviceToHost, profile);
      if (part.getIndex() > 0) {
        auto type = mlir::cast<mlir::RankedTensorType>(grad.getType());
        double hostStart = std::max(hostFree, d2hFree);
        hostFree = hostStart + hostAccumulateSeconds(type.getNumElements(), profile);
      }
      continue;
    }
    double start = clock;
    for (mlir::Value operand : op->getOperands())
      start = std::max(start, readyOf(operand));
    clock = start + compute[i];
    for (mlir::Value result : op->getResults())
      ready[result] = clock;
  }
  return std::max({clock, d2hFree, hostFree});
}

void Planner::renumber(uint64_t budget) {
  // Hold copied-out values' bytes when the budget allows it.
  holdCopies = true;
  analyze();
  if (budget != 0 && arenaBytes() > budget) {
    holdCopies = false;
    analyze();
  }
  mlir::Builder builder(func.getContext());
  mlir::Block &block = func.getBody().front();
  int64_t step = 0;
  llvm::DenseMap<mlir::Operation *, int64_t> steps;
  for (mlir::Operation &op : block) {
    op.setAttr(mt::attr::kStep, builder.getI64IntegerAttr(step));
    steps[&op] = step++;
  }
  for (mlir::Operation &op : block) {
    if (op.getNumResults() == 0)
      continue;
    llvm::SmallVector<int64_t> ends;
    for (mlir::Value result : op.getResults()) {
      int64_t end = -1;
      for (mlir::Operation *user : result.getUsers())
        end = std::max(end, steps.lookup(user));
      // The hold of a value copied out (analyze) reaches past its last user.
      const LiveValue *info = live(result);
      if (end >= 0 && info && !mlir::isa<mt::ConstantOp>(op))
        end = std::max(end, info->last);
      ends.push_back(end);
    }
    op.setAttr(mt::attr::kLiveEnd, builder.getDenseI64ArrayAttr(ends));
  }
}

struct Tier : impl::TierBase<Tier> {
  using TierBase::TierBase;

  /// Runs `policy` on a copy of `func`; the copy, or null when it does not
  /// fit (with `why`).
  mlir::func::FuncOp attempt(mlir::func::FuncOp func, llvm::StringRef which,
                             const DeviceProfile &profile, uint64_t budget,
                             std::string &why, double &predicted) {
    // A detached copy: the pass may not add ops to the module.
    auto copy = mlir::cast<mlir::func::FuncOp>(func->clone());
    Planner planner(copy, profile);
    planner.placeParamFetches();
    bool ok = true;
    // "<policy>+greedy": a reference policy, then the greedy for what is left.
    auto [base, greedyPart] = which.split('+');
    if (base == "offload") {
      planner.applyOffloadPolicy();
    } else if (base == "checkpoint") {
      (void)planner.applyCheckpointPolicy();
    }
    bool greedy = base == "auto" || greedyPart == "greedy";
    if (greedy) {
      ok = budget == 0 || mlir::succeeded(planner.greedy(budget));
      why = planner.infeasibleReason;
    }
    planner.analyze();
    if (ok && budget != 0 && !greedy) {
      uint64_t arena = planner.arenaBytes();
      if (arena > budget) {
        ok = false;
        why = "policy '" + which.str() + "' needs " + formatBytes(arena) + " (" +
              std::to_string(arena) + " bytes) of device memory, over the budget of " +
              formatBytes(budget);
      }
    }
    predicted = planner.predictStepSeconds();
    if (!ok) {
      copy.erase();
      return nullptr;
    }
    planner.renumber(budget);
    return copy;
  }

  void runOnOperation() override {
    mlir::func::FuncOp func = getOperation();
    DeviceProfile profile;
    if (!deviceProfile.empty()) {
      std::string error;
      if (!loadDeviceProfile(deviceProfile, profile, error)) {
        func.emitError("mt-tier: ") << error;
        return signalPassFailure();
      }
    }
    if (policy != "auto" && policy != "keep" && policy != "checkpoint" &&
        policy != "offload") {
      func.emitError("mt-tier: unknown policy '")
          << policy << "' (auto, keep, checkpoint or offload)";
      return signalPassFailure();
    }
    mlir::Builder builder(&getContext());
    uint64_t budget = deviceMemory;

    std::vector<std::pair<std::string, mlir::func::FuncOp>> fitting;
    std::vector<double> times;
    std::string firstWhy;
    llvm::SmallVector<llvm::StringRef> tries;
    if (policy == "auto" && budget != 0)
      tries = {"auto", "checkpoint+greedy", "offload+greedy", "keep", "checkpoint", "offload"};
    else
      tries = {policy};
    for (llvm::StringRef which : tries) {
      std::string why;
      double predicted = 0;
      mlir::func::FuncOp result = attempt(func, which, profile, budget, why, predicted);
      if (!result) {
        if (firstWhy.empty())
          firstWhy = why;
        continue;
      }
      fitting.push_back({which.str(), result});
      times.push_back(predicted);
    }
    if (fitting.empty()) {
      func.emitError("mt-tier: ") << firstWhy;
      return signalPassFailure();
    }
    size_t best = 0;
    for (size_t i = 1; i < fitting.size(); ++i)
      if (times[i] < times[best])
        best = i;
    // The winner's body replaces the function's; the copies go.
    mlir::func::FuncOp winner = fitting[best].second;
    func.getBody().takeBody(winner.getBody());
    for (auto &entry : fitting)
      entry.second.erase();
    func->setAttr(mt::attr::kDeviceBudget,
                  builder.getI64IntegerAttr(static_cast<int64_t>(budget)));
    std::string chosen = policy == "auto" && fitting[best].first != "auto"
                             ? "auto (" + fitting[best].first + ")"
                             : fitting[best].first;
    func->setAttr(mt::attr::kTieringPolicy, builder.getStringAttr(chosen));
  }
};

} // namespace
} // namespace megatrain
