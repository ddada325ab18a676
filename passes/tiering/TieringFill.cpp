//===- TieringFill.cpp - mt-tier's fill: spend unused budget on speed -----===//
//
// Stage 5 of mt-tier; passes/Tiering.cpp describes the stages, docs/tiering.md
// ("The fill") the rule. The freeing stages only ever free memory: a plan
// that fits with room to spare (the checkpoint policy's, or a greedy's that
// started from one) keeps all of its recompute. The fill walks the other way:
//
//   1. Candidates. Each recompute clone (an op marked mt.recompute that
//      TieringRewriter::recompute made; CloneOrigins) can hand its users the results of the
//      original op it re-runs: that saves the clone's compute, and the clones
//      and copies that fed only it (its chain, parameters fetched again for
//      it, prefetched operands), at the price of keeping the original's results from their last use to
//      the clone's last use. Each mt.prefetch can hand its users the value
//      that was offloaded: that saves the prefetch's exposed transfer (the
//      part the compute before its use cannot hide; a thousandth of the
//      transfer besides, so hidden copies go last, freeing the link and host
//      staging) at the price of keeping that value over the gap.
//   2. Order. Seconds saved per byte kept, best first: a matmul's or an
//      attention's output is worth keeping, an elementwise op's or a norm's
//      is cheap to run again. Each op is priced by its own cost, so the
//      checkpoint policy's uniform recompute becomes selective. With a floor
//      (the seconds a byte of device state saves, when the room would
//      otherwise hold state), candidates below it are left as they are.
//   3. Sweep. On a model of the lifetimes (no IR is touched yet), take each
//      candidate in order if the live bytes over the positions it changes
//      stay within the target (at first the budget); a candidate whose
//      clone an earlier one already removed is gone.
//   4. Fragmentation. Place the resulting lifetimes (placeBestFit, as
//      mt-plan-memory will); over the budget: lower the target by the
//      excess and sweep again from the start (at most four rounds, then
//      the longest prefix of the last round's choices that places within
//      the budget, found by bisection).
//   5. Apply: the users of each accepted clone or prefetch read the original
//      value; the ops left without users (the clones, their dead chains, the
//      prefetches, offloads no prefetch reads) are erased.
//
// The lifetimes model is conservative: an original whose later user is
// itself removed keeps its longer life, so the arena placed after the fill
// is at most the one the sweep checked.
//
//===----------------------------------------------------------------------===//
#include "tiering/TieringFill.h"

#include "megatrain/plan/OpCost.h"
#include "megatrain/Passes/Placement.h"
#include "megatrain/plan/Format.h"

#include "llvm/ADT/DenseSet.h"

#include <algorithm>


namespace megatrain {

namespace {

constexpr int kFragmentationRounds = 4;
// The part of a hidden copy's transfer counted as saved when it is undone.
constexpr double kHiddenCopyWeight = 1e-3;

struct Undo {
  mlir::Operation *op; // the clone, or the mt.prefetch
  double saved;        // seconds
  uint64_t bytes;      // what keeping the original holds longer
};

/// A value the sweep adds: bytes live over [first, last] (a prefetched copy).
struct Interval {
  int64_t first;
  int64_t last;
  uint64_t bytes;
};

/// The lifetimes the sweep changes: one entry per model value.
class LifetimeState {
public:
  LifetimeState(const TieringModel &model) : model(model) { reset(); }

  void reset() {
    const std::vector<LiveValue> &values = model.liveValues();
    int64_t n = model.size();
    added.clear();
    computeS.assign(n, 0);
    h2dS.assign(n, 0);
    d2hS.assign(n, 0);
    for (int64_t i = 0; i < n; ++i) {
      computeS[i] = model.computeAt(i);
      h2dS[i] = model.h2dAt(i);
      d2hS[i] = model.d2hAt(i);
    }
    last.clear();
    gone.assign(values.size(), false);
    live.assign(n + 2, 0);
    dead.clear();
    std::vector<int64_t> delta(n + 2, 0);
    for (const LiveValue &value : values) {
      last.push_back(value.last);
      delta[value.first] += static_cast<int64_t>(value.size);
      delta[std::min(value.last, n) + 1] -= static_cast<int64_t>(value.size);
    }
    int64_t running = 0;
    for (int64_t i = 0; i <= n; ++i) {
      running += delta[i];
      live[i] = running;
    }
  }

  int64_t indexOf(mlir::Value value) const {
    const LiveValue *info = model.live(value);
    return info ? info - model.liveValues().data() : -1;
  }
  bool isDead(mlir::Operation *op) const { return dead.contains(op); }

  /// The latest position of a user of `value` that is still there.
  int64_t lastLiveUse(mlir::Value value) const {
    int64_t at = -1;
    for (mlir::Operation *user : value.getUsers())
      if (!dead.contains(user))
        at = std::max(at, model.positionOf(user));
    return at;
  }

  /// The changes undoing `op` makes: values kept longer (index, new last)
  /// and the ops that go with it. False when it cannot be undone now.
  bool plan(const CloneOrigins &origins, mlir::Operation *op,
            llvm::SmallVectorImpl<std::pair<int64_t, int64_t>> &extend,
            llvm::SmallVectorImpl<mlir::Operation *> &dying, double &saved) const {
    if (dead.contains(op))
      return false;
    dying.push_back(op);
    if (auto prefetch = mlir::dyn_cast<mt::PrefetchOp>(op)) {
      auto offload = prefetch.getHost().getDefiningOp<mt::OffloadOp>();
      int64_t kept = offload ? indexOf(offload.getValue()) : -1;
      int64_t until = lastLiveUse(prefetch.getResult());
      if (kept < 0 || until < 0)
        return false;
      extend.push_back({kept, until});
      return true;
    }
    mlir::Operation *original = origins.lookup(op);
    for (auto [copy, kept] : llvm::zip(op->getResults(), original->getResults())) {
      int64_t index = indexOf(kept);
      int64_t until = lastLiveUse(copy);
      if (index < 0)
        return false;
      if (until >= 0)
        extend.push_back({index, until});
    }
    saved += model.computeAt(model.positionOf(op));
    // The clones and copies (fetches, prefetches) that fed only what dies
    // die with it.
    for (size_t i = 0; i < dying.size(); ++i) {
      for (mlir::Value operand : dying[i]->getOperands()) {
        mlir::Operation *producer = operand.getDefiningOp();
        if (!producer || !(origins.lookup(producer) || isFetch(producer)) ||
            dead.contains(producer) || llvm::is_contained(dying, producer))
          continue;
        bool unused = llvm::all_of(producer->getUsers(), [&](mlir::Operation *user) {
          return dead.contains(user) || llvm::is_contained(dying, user);
        });
        if (!unused)
          continue;
        dying.push_back(producer);
        if (!isFetch(producer))
          saved += model.computeAt(model.positionOf(producer));
      }
    }
    return true;
  }

  /// Whether the changes keep every position they touch within `target`.
  bool fits(llvm::ArrayRef<std::pair<int64_t, int64_t>> extend,
            llvm::ArrayRef<mlir::Operation *> dying, uint64_t target,
            llvm::ArrayRef<Interval> add = {}) const {
    std::vector<std::pair<int64_t, int64_t>> changes; // position, bytes from there on
    collect(extend, dying, add, changes);
    if (changes.empty())
      return true;
    llvm::sort(changes);
    int64_t running = 0;
    size_t next = 0;
    int64_t from = changes.front().first, to = changes.back().first;
    for (int64_t i = from; i < to; ++i) {
      while (next < changes.size() && changes[next].first == i)
        running += changes[next++].second;
      if (live[i] + running > static_cast<int64_t>(target))
        return false;
    }
    return true;
  }

  void commit(llvm::ArrayRef<std::pair<int64_t, int64_t>> extend,
              llvm::ArrayRef<mlir::Operation *> dying, llvm::ArrayRef<Interval> add = {}) {
    std::vector<std::pair<int64_t, int64_t>> changes;
    collect(extend, dying, add, changes);
    llvm::sort(changes);
    int64_t running = 0;
    size_t next = 0;
    if (!changes.empty())
      for (int64_t i = changes.front().first; i < changes.back().first; ++i) {
        while (next < changes.size() && changes[next].first == i)
          running += changes[next++].second;
        live[i] += running;
      }
    for (auto [index, until] : extend)
      last[index] = std::max(last[index], until);
    for (mlir::Operation *op : dying) {
      dead.insert(op);
      if (int64_t at = model.positionOf(op); at >= 0)
        computeS[at] = 0;
      for (mlir::Value result : op->getResults())
        if (int64_t index = indexOf(result); index >= 0)
          gone[index] = true;
    }
    added.insert(added.end(), add.begin(), add.end());
  }

  // --- the links, as the commits so far load them ---------------------------
  void loadH2d(int64_t at, double seconds) { h2dS[at] += seconds; }
  void loadD2h(int64_t at, double seconds) { d2hS[at] += seconds; }
  /// The latest position k in [lo, b] whose window [k, b) has the compute to
  /// hide `transfer` beside the h2d copies issued there, and the part left
  /// exposed (the best window within kMaxFetchWalk positions when none does).
  std::pair<int64_t, double> placePrefetch(int64_t lo, int64_t b, double transfer) const {
    double slack = 0, bestSlack = -1;
    int64_t best = -1;
    int64_t stop = std::max<int64_t>(lo, b - kMaxFetchWalk);
    for (int64_t k = b - 1; k >= stop; --k) {
      slack += computeS[k] - h2dS[k];
      if (slack >= transfer)
        return {k, 0.0};
      if (slack > bestSlack) {
        bestSlack = slack;
        best = k;
      }
    }
    return {best, best < 0 ? transfer : std::max(0.0, transfer - bestSlack)};
  }
  /// The first position after `from` by which the compute issued since
  /// `from` covers the d2h copies queued there and a new one of `transfer`
  /// seconds: where an offload issued at `from` is done. -1 past `to`.
  int64_t offloadDone(int64_t from, int64_t to, double transfer) const {
    double compute = 0, queued = transfer;
    for (int64_t i = from; i < to; ++i) {
      queued += d2hS[i];
      if (compute >= queued)
        return i;
      compute += computeS[i];
    }
    return compute >= queued ? to : -1;
  }

  /// The arena placeBestFit makes of the lifetimes now.
  uint64_t arenaBytes() const {
    const std::vector<LiveValue> &values = model.liveValues();
    int64_t n = model.size();
    std::vector<Slot> slots;
    slots.reserve(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      if (gone[i])
        continue;
      Slot slot;
      slot.first = values[i].first;
      slot.last = last[i] >= n ? kLivesForever : last[i];
      slot.size = values[i].size;
      slots.push_back(slot);
    }
    for (const Interval &interval : added) {
      Slot slot;
      slot.first = interval.first;
      slot.last = interval.last;
      slot.size = interval.bytes;
      slots.push_back(slot);
    }
    return placeBestFit(slots);
  }

private:
  /// Interval changes as (position, +/- bytes) pairs, each [first, last]
  /// as +bytes at first and -bytes at last + 1.
  void collect(llvm::ArrayRef<std::pair<int64_t, int64_t>> extend,
               llvm::ArrayRef<mlir::Operation *> dying, llvm::ArrayRef<Interval> add,
               std::vector<std::pair<int64_t, int64_t>> &changes) const {
    for (const Interval &interval : add) {
      changes.push_back({interval.first, static_cast<int64_t>(interval.bytes)});
      changes.push_back({interval.last + 1, -static_cast<int64_t>(interval.bytes)});
    }
    const std::vector<LiveValue> &values = model.liveValues();
    int64_t n = model.size();
    // A value extended more than once in one undo (two results of one clone
    // kept by the same original) counts once, to its latest use.
    llvm::DenseMap<int64_t, int64_t> until;
    for (auto [index, to] : extend)
      until[index] = std::max(until.lookup(index), to);
    for (auto [index, to] : until) {
      if (to <= last[index] || last[index] >= n)
        continue;
      auto bytes = static_cast<int64_t>(values[index].size);
      changes.push_back({last[index] + 1, bytes});
      changes.push_back({to + 1, -bytes});
    }
    for (mlir::Operation *op : dying)
      for (mlir::Value result : op->getResults()) {
        int64_t index = indexOf(result);
        if (index < 0 || gone[index])
          continue;
        auto bytes = static_cast<int64_t>(values[index].size);
        changes.push_back({values[index].first, -bytes});
        changes.push_back({std::min(last[index], n) + 1, bytes});
      }
  }

  const TieringModel &model;
  std::vector<int64_t> last;
  std::vector<bool> gone;
  std::vector<int64_t> live;
  llvm::DenseSet<mlir::Operation *> dead;
  std::vector<Interval> added;
  std::vector<double> computeS, h2dS, d2hS; // seconds issued per position
};

/// Whether undoing `op` is one the fill knows how to price and apply.
bool undoable(const TieringModel &model, const CloneOrigins &origins,
              mlir::Operation *op) {
  if (auto prefetch = mlir::dyn_cast<mt::PrefetchOp>(op)) {
    auto offload = prefetch.getHost().getDefiningOp<mt::OffloadOp>();
    if (!offload || prefetch.getResult().use_empty())
      return false;
    // A rebuilt value that was offloaded: left as it is.
    mlir::Operation *def = offload.getValue().getDefiningOp();
    return def && !origins.lookup(def) && model.live(offload.getValue());
  }
  mlir::Operation *original = origins.lookup(op);
  if (!original || !op->hasAttr(mt::attr::kRecompute) ||
      original->getNumResults() != op->getNumResults())
    return false;
  // A rebuilt value that is offloaded: left as it is.
  for (mlir::Value result : op->getResults())
    for (mlir::Operation *user : result.getUsers())
      if (mlir::isa<mt::OffloadOp>(user))
        return false;
  return true;
}

double exposedPrefetch(const TieringModel &model, mt::PrefetchOp prefetch) {
  int64_t k = model.positionOf(prefetch);
  const LiveValue *value = model.live(prefetch.getResult());
  if (!value || value->uses.empty())
    return 0;
  int64_t b = value->uses.front();
  double transfer = model.h2dAt(k);
  double slack = model.computeIn(k, b) - model.h2dIn(k, b) + transfer;
  return std::max(0.0, transfer - slack) + kHiddenCopyWeight * transfer;
}


/// Whether the plan, analyzed afresh, places within a budget a sweep can
/// spend (0: none).
bool placesWithin(TieringModel &model, uint64_t budget) {
  model.analyze();
  return budget != 0 && model.arenaBytes() <= budget;
}

/// Steps 3 and 4 of a sweep: offers candidates 0..count-1 in order to
/// `take(i, target)`, which plans, checks the target (0: unchecked) and
/// commits on `state`; places the result, and over the budget lowers the
/// target by the excess and sweeps again (kFragmentationRounds), then keeps
/// the longest prefix of the last round's choices that places (bisection).
/// Returns the candidates taken; `state` holds them.
std::vector<size_t> sweepWithinBudget(LifetimeState &state, size_t count, uint64_t budget,
                                      llvm::function_ref<bool(size_t, uint64_t)> take) {
  uint64_t target = budget;
  std::vector<size_t> taken;
  for (int round = 0; round < kFragmentationRounds; ++round) {
    state.reset();
    taken.clear();
    for (size_t i = 0; i < count; ++i)
      if (take(i, target))
        taken.push_back(i);
    uint64_t arena = state.arenaBytes();
    if (arena <= budget)
      return taken;
    uint64_t excess = arena - budget + kPlacementAlignment;
    if (target <= excess)
      break;
    target -= excess;
  }
  if (taken.empty())
    return taken;
  auto replay = [&](size_t prefix) {
    state.reset();
    for (size_t i = 0; i < prefix; ++i)
      take(taken[i], 0);
    return state.arenaBytes() <= budget;
  };
  size_t kept = longestFittingPrefix(taken.size(), replay);
  taken.resize(kept);
  replay(kept);
  return taken;
}

/// Step 5's end: erases `erase` and every op the sweep left dead (with the
/// offloads of dead prefetches), users before their producers; an op still
/// read stays. The model is analyzed again.
void eraseDead(TieringModel &model, const LifetimeState &state,
               llvm::SmallVectorImpl<mlir::Operation *> &erase) {
  for (mlir::Operation *op : model.ops()) {
    if (!state.isDead(op) || llvm::is_contained(erase, op))
      continue;
    erase.push_back(op);
    if (auto prefetch = mlir::dyn_cast<mt::PrefetchOp>(op))
      if (mlir::Operation *offload = prefetch.getHost().getDefiningOp())
        erase.push_back(offload);
  }
  // Users before their producers; an offload another prefetch still reads stays.
  llvm::sort(erase, [&](mlir::Operation *x, mlir::Operation *y) {
    return model.positionOf(x) > model.positionOf(y);
  });
  erase.erase(std::unique(erase.begin(), erase.end()), erase.end());
  for (mlir::Operation *op : erase)
    if (op->use_empty())
      op->erase();
  model.analyze();
}

} // namespace

FillResult fillToBudget(TieringModel &model, const CloneOrigins &origins, uint64_t budget,
                        double minSecondsPerByte, size_t limit) {
  FillResult result;
  if (!placesWithin(model, budget))
    return result;
  LifetimeState state(model);
  // 1 and 2: the candidates, best saving per byte first.
  std::vector<Undo> undos;
  for (mlir::Operation *op : model.ops()) {
    if (!undoable(model, origins, op))
      continue;
    llvm::SmallVector<std::pair<int64_t, int64_t>> extend;
    llvm::SmallVector<mlir::Operation *> dying;
    double saved = 0;
    if (!state.plan(origins, op, extend, dying, saved))
      continue;
    if (auto prefetch = mlir::dyn_cast<mt::PrefetchOp>(op))
      saved = exposedPrefetch(model, prefetch);
    uint64_t bytes = 0;
    for (auto [index, until] : extend)
      bytes += model.liveValues()[index].size;
    bytes = std::max<uint64_t>(bytes, 1);
    if (saved < minSecondsPerByte * static_cast<double>(bytes))
      continue;
    undos.push_back({op, saved, bytes});
  }
  if (undos.empty())
    return result;
  std::stable_sort(undos.begin(), undos.end(), [](const Undo &x, const Undo &y) {
    return x.saved * static_cast<double>(y.bytes) > y.saved * static_cast<double>(x.bytes);
  });
  result.available = static_cast<int>(undos.size());
  // 3 and 4: sweep, place, lower the target by the excess.
  std::vector<size_t> taken = sweepWithinBudget(
      state, std::min(undos.size(), limit), budget,
      [&](size_t i, uint64_t target) {
        llvm::SmallVector<std::pair<int64_t, int64_t>> extend;
        llvm::SmallVector<mlir::Operation *> dying;
        double saved = 0;
        if (!state.plan(origins, undos[i].op, extend, dying, saved))
          return false;
        if (target != 0 && !state.fits(extend, dying, target))
          return false;
        state.commit(extend, dying);
        return true;
      });
  if (taken.empty()) {
    model.analyze();
    return result;
  }
  // 5: the users read the originals; what no one reads goes.
  llvm::SmallVector<mlir::Operation *> erase;
  for (size_t index : taken) {
    const Undo *undo = &undos[index];
    mlir::Operation *op = undo->op;
    if (auto prefetch = mlir::dyn_cast<mt::PrefetchOp>(op)) {
      auto offload = prefetch.getHost().getDefiningOp<mt::OffloadOp>();
      prefetch.getResult().replaceAllUsesWith(offload.getValue());
      erase.push_back(op);
      erase.push_back(offload);
      ++result.prefetches;
    } else {
      op->replaceAllUsesWith(origins.lookup(op)->getResults());
      erase.push_back(op);
      ++result.recomputes;
    }
    result.savedSeconds += undo->saved;
  }
  eraseDead(model, state, erase);
  return result;
}

SpillResult spillToLink(TieringModel &model, const CloneOrigins &origins, uint64_t budget,
                        size_t limit) {
  SpillResult result;
  if (!placesWithin(model, budget))
    return result;
  const DeviceProfile &profile = model.deviceProfile();
  LifetimeState state(model);
  // 1 and 2: the clones left, most compute saved per second of h2d first.
  struct Spill {
    mlir::Operation *clone;
    double saved;
    double transfer;
  };
  std::vector<Spill> spills;
  for (mlir::Operation *op : model.ops()) {
    if (mlir::isa<mt::PrefetchOp>(op) || !undoable(model, origins, op))
      continue;
    llvm::SmallVector<std::pair<int64_t, int64_t>> extend;
    llvm::SmallVector<mlir::Operation *> dying;
    double saved = 0;
    if (!state.plan(origins, op, extend, dying, saved) || extend.empty())
      continue;
    double transfer = 0;
    for (auto [index, until] : extend)
      transfer += model.transferOf(model.liveValues()[index].value);
    if (saved <= 0 || transfer <= 0)
      continue;
    spills.push_back({op, saved, transfer});
  }
  std::stable_sort(spills.begin(), spills.end(), [](const Spill &x, const Spill &y) {
    return x.saved * y.transfer > y.saved * x.transfer;
  });
  // Where each spill's copies go, as the last sweep placed them: per kept
  // original, the prefetch position.
  struct Placed {
    int64_t index; // the original's model value
    int64_t at;    // the prefetch's position
  };
  std::vector<llvm::SmallVector<Placed, 2>> placements(spills.size());
  // 3 and 4: a spill is taken when every copy it adds is hidden (the
  // offload done before its prefetch starts, the prefetch's window with the
  // compute to cover it) and the bytes fit: the original until its offload
  // is done, the prefetched copy from its prefetch to the last use.
  auto take = [&](size_t i, uint64_t target) {
    llvm::SmallVector<std::pair<int64_t, int64_t>> extend;
    llvm::SmallVector<mlir::Operation *> dying;
    double saved = 0;
    if (!state.plan(origins, spills[i].clone, extend, dying, saved))
      return false;
    llvm::SmallVector<std::pair<int64_t, int64_t>> hold;
    llvm::SmallVector<Interval> add;
    llvm::SmallVector<Placed, 2> placed;
    llvm::SmallVector<std::pair<int64_t, double>> h2dLoads, d2hLoads;
    int64_t b = model.positionOf(spills[i].clone);
    for (auto [index, until] : extend) {
      const LiveValue &original = model.liveValues()[index];
      double up = model.transferOf(original.value);
      double down = transferSeconds(original.size, Link::DeviceToHost, profile);
      int64_t from = original.first + 1;
      bool offloaded = static_cast<bool>(hostCopyOf(original.value));
      int64_t done = offloaded ? from : state.offloadDone(from, b, down);
      if (done < 0)
        return false;
      auto [k, exposed] = state.placePrefetch(done, b, up);
      if (k < 0 || exposed > 0)
        return false;
      if (!offloaded) {
        hold.push_back({index, done});
        d2hLoads.push_back({from, down});
      }
      h2dLoads.push_back({k, up});
      add.push_back({k, until, original.size});
      placed.push_back({index, k});
    }
    if (target != 0 && !state.fits(hold, dying, target, add))
      return false;
    state.commit(hold, dying, add);
    for (auto [at, seconds] : h2dLoads)
      state.loadH2d(at, seconds);
    for (auto [at, seconds] : d2hLoads)
      state.loadD2h(at, seconds);
    placements[i] = std::move(placed);
    return true;
  };
  std::vector<size_t> taken = sweepWithinBudget(state, spills.size(), budget, take);
  result.available = static_cast<int>(taken.size());
  if (taken.size() > limit) {
    // The first `limit` of them, as the sweep took them.
    taken.resize(limit);
    state.reset();
    for (size_t i : taken)
      take(i, 0);
  }
  if (taken.empty()) {
    model.analyze();
    return result;
  }
  // 5: each original offloaded after its def (once), prefetched at its
  // position; the clone's users read the prefetched copies; what no one
  // reads goes. Anchors are taken before any op is added.
  struct Rewrite {
    mlir::Operation *clone;
    mlir::Value original;
    mlir::Value copy;
    mlir::Operation *anchor;
  };
  std::vector<Rewrite> rewrites;
  result.perMicrobatch.assign(static_cast<size_t>(model.microbatches()), 0);
  for (size_t i : taken) {
    int64_t k = model.microbatchOf(model.positionOf(spills[i].clone));
    ++result.perMicrobatch[static_cast<size_t>(k)];
  }
  for (size_t i : taken) {
    mlir::Operation *clone = spills[i].clone;
    mlir::Operation *original = origins.lookup(clone);
    for (const Placed &placed : placements[i]) {
      mlir::Value kept = model.liveValues()[placed.index].value;
      for (auto [copy, value] : llvm::zip(clone->getResults(), original->getResults()))
        if (value == kept)
          rewrites.push_back({clone, kept, copy, model.opAt(placed.at)});
    }
    ++result.recomputes;
  }
  llvm::SmallVector<mlir::Operation *> erase;
  for (Rewrite &rewrite : rewrites) {
    mlir::Value host = offloadOnce(rewrite.original);
    mlir::OpBuilder builder(rewrite.anchor);
    auto prefetch = builder.create<mt::PrefetchOp>(rewrite.original.getLoc(),
                                                   rewrite.original.getType(), host);
    rewrite.copy.replaceAllUsesWith(prefetch.getResult());
    erase.push_back(rewrite.clone);
  }
  eraseDead(model, state, erase);
  return result;
}

} // namespace megatrain
