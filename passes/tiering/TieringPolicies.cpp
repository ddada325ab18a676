//===- TieringPolicies.cpp - mt-tier's policies and auto's portfolio ------===//
//
// keep (no rewrite), checkpoint, offload, and stage 6 of mt-tier (the
// portfolio, with stage 5's fill of each fitting plan);
// passes/Tiering.cpp describes the stages, docs/tiering.md the policies.
//
//===----------------------------------------------------------------------===//
#include "tiering/TieringPolicies.h"

#include "tiering/TieringFill.h"
#include "tiering/TieringGreedy.h"
#include "megatrain/plan/Format.h"

#include "mlir/IR/IRMapping.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Regex.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace megatrain {

namespace {

// The checkpoint policy rebuilds a whole layer from its input.
constexpr int kMaxCheckpointDepth = 1024;

// The spill (stage 5b) stays out of plans whose host works more than this
// share of the step (by the timeline, with the host's share of the state on
// the host), and the fill's search (stage 5) takes none. Measured
// (bench/RESULTS.md, leases Q to T): the 7B's plan at 32 GiB, at about 0.7,
// ran slower spilled; a 1.36B plan at 0.56 (a limit of 0.6) ran 1% to 3%
// faster than 0.5's in three leases and 5% slower in a fourth, whose host
// fell behind.
constexpr double kHostBusyLimit = 0.5;

/// Offload: every value forward produces and backward reads is offloaded
/// (activations) or fetched again (parameters) before its first backward use.
void applyOffloadPolicy(TieringModel &model, TieringRewriter &rewriter) {
  model.analyze();
  std::vector<mlir::Value> targets;
  for (const LiveValue &value : model.liveValues()) {
    mlir::Operation *def = value.value.getDefiningOp();
    int64_t start = model.boundaryOf(value.first);
    if (start < 0 || mlir::isa<mt::InputOp, mt::ConstantOp>(def) ||
        model.tinyAcrossMicrobatches(value))
      continue;
    if (value.last < start)
      continue;
    if (!isFetch(def) && !rewriter.recomputable(def))
      continue;
    targets.push_back(value.value);
  }
  for (mlir::Value target : targets) {
    model.analyze();
    int64_t a, b;
    int64_t start = model.boundaryOf(model.live(target)->first);
    if (start < 0 || !model.live(target)->gapBefore(start, a, b))
      continue;
    mlir::Operation *def = target.getDefiningOp();
    int64_t deadline = isFetch(def) ? model.fetchDeadline(def) : model.size();
    auto [k, exposed] = model.placeFetch(a + 1, deadline, b, model.transferOf(target));
    (void)exposed;
    if (k < 0)
      continue;
    mlir::Value replacement = isFetch(def) ? rewriter.refetch(target, k)
                                           : rewriter.offloadAndPrefetch(target, k);
    rewriter.replaceUsesFrom(target, replacement, b);
  }
  model.analyze();
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

/// Checkpoint: keep the values that cross a layer boundary, recompute every
/// other activation backward reads, fetch the parameters again for backward.
void applyCheckpointPolicy(TieringModel &model, TieringRewriter &rewriter) {
  rewriter.setMaxRecomputeDepth(kMaxCheckpointDepth);
  model.analyze();
  // Layer of each forward op: the largest layer among the parameters it reads
  // and its operands' producers.
  llvm::DenseMap<mlir::Operation *, int64_t> layer;
  for (int64_t i = 0; i < model.lastBackwardStart() && i < model.size(); ++i) {
    mlir::Operation *op = model.opAt(i);
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
  for (const LiveValue &value : model.liveValues()) {
    mlir::Operation *def = value.value.getDefiningOp();
    int64_t start = model.boundaryOf(value.first);
    if (start < 0 || value.last < start || model.tinyAcrossMicrobatches(value))
      continue;
    if (mlir::isa<mt::ParamOp>(def)) {
      params.push_back(value.value);
      continue;
    }
    if (!rewriter.recomputable(def))
      continue;
    int64_t l = layer.lookup(def);
    if (l < 0)
      continue;
    bool boundary = false;
    for (mlir::Operation *user : value.value.getUsers())
      if (model.positionOf(user) < start && layer.lookup(user) != l)
        boundary = true;
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
    model.analyze();
    int64_t a, b;
    int64_t start = model.boundaryOf(model.live(target)->first);
    if (start < 0 || !model.live(target)->gapBefore(start, a, b))
      continue;
    // An earlier rebuild may already hold it live here.
    bool reused = false;
    for (mlir::Value replacement : rewriter.replacementsOf(target)) {
      const LiveValue *info = model.live(replacement);
      if (info && info->first < b) {
        rewriter.replaceUsesFrom(target, replacement, b);
        reused = true;
        break; // replaceUsesFrom grew the list this loop reads
      }
    }
    if (reused)
      continue;
    llvm::SmallVector<mlir::Operation *> chain;
    llvm::DenseSet<mlir::Operation *> inChain;
    double cost = 0;
    if (!rewriter.planRecompute(target, b, 0, rebuild, chain, inChain, cost))
      continue; // deeper than the bound: keep it
    rewriter.replaceUsesFrom(target, rewriter.recompute(target, b, rebuild), b);
  }
  // Parameters are fetched again for backward.
  for (mlir::Value param : params) {
    model.analyze();
    const LiveValue *value = model.live(param);
    int64_t a, b;
    if (!value)
      continue;
    int64_t start = model.boundaryOf(value->first);
    if (start < 0 || !value->gapBefore(start, a, b))
      continue;
    auto [k, exposed] = model.placeFetch(a + 1, model.fetchDeadline(param.getDefiningOp()), b,
                                         model.transferOf(param));
    (void)exposed;
    if (k >= 0)
      rewriter.replaceUsesFrom(param, rewriter.refetch(param, k), b);
  }
  model.analyze();
}

/// A policy's plan: a detached copy of the function, or null when it does
/// not fit; its modelled step time either way; the recompute clones it made.
struct Attempt {
  mlir::func::FuncOp plan;
  double predicted = 0;
  double busy = 0; // the compute queue's seconds: the tie-break

  CloneOrigins origins;
};

/// Runs policy `which` on a copy of `func` (with `why` when it does not fit).
Attempt attempt(mlir::func::FuncOp func, llvm::StringRef which, const DeviceProfile &profile,
                uint64_t budget, std::string &why) {
  // A detached copy: the pass may not add ops to the module.
  auto copy = mlir::cast<mlir::func::FuncOp>(func->clone());
  TieringModel model(copy, profile);
  TieringRewriter rewriter(model);
  rewriter.placeParamFetches();
  bool ok = true;
  // "<policy>+greedy": a reference policy, then the greedy for what is left.
  auto [base, greedyPart] = which.split('+');
  if (base == "offload")
    applyOffloadPolicy(model, rewriter);
  else if (base == "checkpoint")
    applyCheckpointPolicy(model, rewriter);
  bool greedy = base == "auto" || greedyPart == "greedy";
  if (greedy && budget != 0)
    ok = mlir::succeeded(freePeaksToBudget(model, rewriter, budget, why));
  model.analyze();
  if (ok && budget != 0 && !greedy) {
    uint64_t arena = model.arenaBytes();
    if (arena > budget) {
      ok = false;
      why = "policy '" + which.str() + "' needs " + formatBytes(arena) + " (" +
            std::to_string(arena) + " bytes) of device memory, over the budget of " +
            formatBytes(budget);
    }
  }
  Attempt result;
  result.predicted = model.predictStepSeconds();
  result.busy = model.computeIn(0, model.size());
  if (!ok) {
    copy.erase();
    return result;
  }
  result.plan = copy;
  result.origins = rewriter.clones();
  return result;
}

/// A copy of `base`'s plan, with its recompute clones mapped to the copy.
mlir::func::FuncOp copyPlan(const Attempt &base, CloneOrigins &origins) {
  mlir::IRMapping mapping;
  auto copy = mlir::cast<mlir::func::FuncOp>(base.plan->clone(mapping));
  for (auto [clone, original] : base.origins) {
    mlir::Operation *newClone = mapping.lookupOrNull(clone);
    mlir::Operation *newOriginal = mapping.lookupOrNull(original);
    if (newClone && newOriginal)
      origins[newClone] = newOriginal;
  }
  return copy;
}

/// The clones of `origins` still in `plan` (a fill or spill erases some).
CloneOrigins survivingClones(mlir::func::FuncOp plan, const CloneOrigins &origins) {
  CloneOrigins kept;
  plan.walk([&](mlir::Operation *op) {
    if (mlir::Operation *original = origins.lookup(op))
      kept[op] = original;
  });
  return kept;
}

/// Seconds as milliseconds with three decimals, for --tiering-log.
std::string ms(double seconds) { return llvm::formatv("{0:F3}", seconds * 1e3).str(); }

/// "1 recompute", "2 recomputes", for --tiering-log.
std::string count(int n, llvm::StringRef noun) {
  return std::to_string(n) + " " + noun.str() + (n == 1 ? "" : "s");
}

/// A prefix length for --tiering-log ("all" for no limit).
std::string prefixName(size_t limit) {
  return limit == SIZE_MAX ? std::string("all") : std::to_string(limit);
}

/// " (per micro-batch: 3, 2, ...)": the trades in each micro-batch's
/// backward, where the step runs more than one; else nothing.
std::string perMicrobatchNote(const std::vector<int> &counts) {
  if (counts.size() < 2)
    return "";
  std::string note = " (per micro-batch: ";
  for (size_t k = 0; k < counts.size(); ++k)
    note += (k ? ", " : "") + std::to_string(counts[k]);
  return note + ")";
}

/// The host share for the log: "H", or "H (sums S)" where they differ.
std::string shareNote(TieringModel::HostShare share) {
  std::string note = llvm::formatv("{0:F3}", share.state).str();
  if (share.sums != share.state)
    note += llvm::formatv(" (sums {0:F3})", share.sums).str();
  return note;
}

/// A golden-section search for the prefix length in [0, available] that
/// `evaluate` (the caller keeps the best it saw) finds fastest; the step
/// time falls while a trade saves and rises once what it displaces costs.
void searchPrefix(int64_t available, llvm::function_ref<double(int64_t)> evaluate) {
  const double ratio = 0.6180339887498949;
  int64_t lo = 0, hi = available;
  auto below = [&](int64_t from, int64_t to) {
    return to - static_cast<int64_t>(std::lround(ratio * static_cast<double>(to - from)));
  };
  auto above = [&](int64_t from, int64_t to) {
    return from + static_cast<int64_t>(std::lround(ratio * static_cast<double>(to - from)));
  };
  int64_t x1 = below(lo, hi), x2 = above(lo, hi);
  double f1 = evaluate(x1), f2 = evaluate(x2);
  while (hi - lo > 2 && x1 < x2) {
    if (f1 <= f2) {
      hi = x2;
      x2 = x1;
      f2 = f1;
      x1 = below(lo, hi);
      if (x1 >= x2)
        break;
      f1 = evaluate(x1);
    } else {
      lo = x1;
      x1 = x2;
      f1 = f2;
      x2 = above(lo, hi);
      if (x2 <= x1)
        break;
      f2 = evaluate(x2);
    }
  }
}

/// Stage 5: `base`'s plan filled to `budget` on a copy; a null plan when the
/// fill undoes nothing. With a floor (the state competes for the device,
/// passes/Tiering.cpp) and known capacities, the floor's fill also competes
/// with fills without a floor cut to a prefix of their order, the length
/// chosen by the timeline with the share of the state the device will not
/// hold beside the arena on the host (TieringModel::hostShares; a
/// golden-section search): the floor prices a byte of state by the host
/// AdamW it saves as if exposed, but the host's work hides under the
/// backward until the host is busy. A plan whose host works more than
/// kHostBusyLimit of the step is not taken by the search (the host's
/// memory bandwidth, which its AdamW is bound by, is not in the timeline).
Attempt filled(const Attempt &base, const DeviceProfile &profile, uint64_t budget,
               const FillOptions &fill) {
  Attempt best;
  double bestStep = 0;
  // The floor's fill is always a candidate; a search's only within the
  // host limit.
  auto evaluate = [&](bool searched, size_t limit, int *available) -> double {
    const double floor = searched ? 0 : fill.minSecondsPerByte;
    CloneOrigins origins;
    mlir::func::FuncOp copy = copyPlan(base, origins);
    TieringModel model(copy, profile);
    FillResult undone = fillToBudget(model, origins, budget, floor, limit);
    if (available)
      *available = undone.available;
    const std::string label =
        std::string("  fill ") + (searched ? "search" : "floor") + " prefix " + prefixName(limit);
    if (undone.recomputes == 0 && undone.prefetches == 0) {
      copy.erase();
      if (fill.log)
        *fill.log << label << ": undoes nothing\n";
      return std::numeric_limits<double>::infinity();
    }
    double hostBusy = 0;
    const TieringModel::HostShare share = hostShareBeside(model.arenaBytes(), fill);
    double step = model.predictStepSeconds(share, &hostBusy);
    bool taken = !searched || hostBusy <= kHostBusyLimit * step;
    if (fill.log)
      *fill.log << label << ": undoes " << count(undone.recomputes, "recompute") << " and "
                << count(undone.prefetches, "offload") << ", arena " << model.arenaBytes()
                << " B, host share " << shareNote(share) << ", step " << ms(step)
                << " ms, host " << ms(hostBusy) << " ms, compute "
                << ms(model.computeIn(0, model.size())) << " ms"
                << (taken ? "" : " (over the host guard)") << "\n";
    if (taken && (!best.plan || step < bestStep)) {
      if (best.plan)
        best.plan.erase();
      best.plan = copy;
      best.predicted = model.predictStepSeconds();
      best.busy = model.computeIn(0, model.size());
      best.origins = survivingClones(copy, origins);
      bestStep = step;
    } else {
      copy.erase();
    }
    return taken ? step : std::numeric_limits<double>::infinity();
  };
  evaluate(false, SIZE_MAX, nullptr);
  if (!fill.search || fill.minSecondsPerByte <= 0 || fill.deviceBytes == 0 ||
      fill.stateDeviceBytes == 0)
    return best;
  int available = 0;
  evaluate(true, SIZE_MAX, &available);
  if (available > 1)
    searchPrefix(available, [&](int64_t limit) {
      return evaluate(true, static_cast<size_t>(limit), nullptr);
    });
  return best;
}

/// Stage 5b: `base`'s plan with recompute traded for the links' spare time
/// (spillToLink) on a copy; a null plan when no trade predicts faster. The
/// spill's own link checks are local, so the number of trades it keeps (a
/// prefix of its order) is chosen by the three-queue timeline: a
/// golden-section search over the prefix length (the step time falls while
/// the links have room and rises once they queue).
Attempt spilled(const Attempt &base, const DeviceProfile &profile, uint64_t budget,
                const FillOptions &fill) {
  // The search's measure: the timeline with the share of the state the
  // device will not hold beside this arena on the host, the parameters
  // updated first (mt-homes chooses the homes later; a model that
  // sends every parameter over the links and through the host AdamW is
  // bound by them and sees no compute saved). No spill where the host works
  // more than kHostBusyLimit of the step: its AdamW is bound by the
  // host's memory, which every spilled byte crosses twice, and the timeline
  // does not model that (the 7B at 32 GiB ran 4% slower spilled,
  // bench/RESULTS.md).
  double baseStep = 0, baseHostBusy = 0;
  TieringModel::HostShare share;
  {
    TieringModel model(base.plan, profile); // read only
    model.analyze();
    share = hostShareBeside(model.arenaBytes(), fill);
    baseStep = model.predictStepSeconds(share, &baseHostBusy);
  }
  if (fill.log)
    *fill.log << "  spill base: step " << ms(baseStep) << " ms, host " << ms(baseHostBusy)
              << " ms"
              << (baseHostBusy > kHostBusyLimit * baseStep ? " (over the host guard: no spill)" : "")
              << "\n";
  if (baseHostBusy > kHostBusyLimit * baseStep)
    return Attempt();
  Attempt best;
  double bestStep = baseStep;
  auto evaluate = [&](size_t limit, int *available) -> double {
    CloneOrigins origins;
    mlir::func::FuncOp copy = copyPlan(base, origins);
    TieringModel model(copy, profile);
    SpillResult traded = spillToLink(model, origins, budget, limit);
    if (available)
      *available = traded.available;
    if (traded.recomputes == 0) {
      copy.erase();
      if (fill.log)
        *fill.log << "  spill prefix " << prefixName(limit) << ": trades nothing\n";
      return baseStep;
    }
    double step = model.predictStepSeconds(share);
    if (fill.log)
      *fill.log << "  spill prefix " << prefixName(limit) << ": trades "
                << count(traded.recomputes, "recompute") << perMicrobatchNote(traded.perMicrobatch)
                << ", step " << ms(step) << " ms, compute " << ms(model.computeIn(0, model.size()))
                << " ms\n";
    if (step < bestStep) {
      if (best.plan)
        best.plan.erase();
      best.plan = copy;
      best.predicted = model.predictStepSeconds();
      best.busy = model.computeIn(0, model.size());
      bestStep = step;
    } else {
      copy.erase();
    }
    return step;
  };
  int available = 0;
  evaluate(SIZE_MAX, &available);
  if (available <= 1)
    return best;
  searchPrefix(available, [&](int64_t limit) { return evaluate(limit, nullptr); });
  return best;
}

} // namespace

TieringModel::HostShare hostShareBeside(uint64_t arena, const FillOptions &fill) {
  TieringModel::HostShare share;
  if (fill.deviceBytes == 0 || fill.stateDeviceBytes == 0 || fill.deviceBytes <= arena)
    return share;
  const double room = static_cast<double>(fill.deviceBytes - arena);
  const double state = static_cast<double>(fill.stateDeviceBytes);
  const double sums = static_cast<double>(fill.accumulatorBytes);
  if (sums <= 0 || sums >= state) {
    share.state = std::clamp(1.0 - room / state, 0.0, 1.0);
    share.sums = share.state;
    return share;
  }
  // The accumulators first (mt-homes, "How homes are chosen" step 5), then
  // the homes in what they leave: a home's bytes beyond its accumulator.
  share.sums = std::clamp(1.0 - room / sums, 0.0, 1.0);
  share.state = std::clamp(1.0 - std::max(0.0, room - sums) / (state - sums), 0.0, 1.0);
  return share;
}

mlir::FailureOr<TieringChoice> choosePlan(mlir::func::FuncOp func, llvm::StringRef policy,
                                          const DeviceProfile &profile, uint64_t budget,
                                          const FillOptions &fill, std::string &why) {
  std::vector<std::pair<std::string, Attempt>> fitting;
  std::string firstWhy;
  llvm::SmallVector<llvm::StringRef> tries;
  // "<entry>+fill": one portfolio entry and its fill (tests); "<entry>+spill":
  // one entry and its spill, without the fill (tests).
  bool fillOnly = policy.ends_with("+fill");
  bool spillOnly = policy.ends_with("+spill");
  if (policy == "auto" && budget != 0)
    tries = {"auto", "checkpoint+greedy", "offload+greedy", "keep", "checkpoint", "offload"};
  else
    tries = {fillOnly ? policy.drop_back(5) : spillOnly ? policy.drop_back(6) : policy};
  // The policy that must fit runs first: when it does not, nothing else
  // runs. The others keep their order (ties go to the earlier one).
  std::vector<size_t> order;
  for (size_t i = 0; i < tries.size(); ++i)
    if (tries[i] == fill.mustFit)
      order.insert(order.begin(), i);
    else
      order.push_back(i);
  std::vector<Attempt> results(tries.size());
  std::vector<std::string> whyNot(tries.size());
  for (size_t i : order) {
    results[i] = attempt(func, tries[i], profile, budget, whyNot[i]);
    if (fill.log) {
      if (results[i].plan)
        *fill.log << "plan " << tries[i] << ": predicted " << ms(results[i].predicted)
                  << " ms, compute " << ms(results[i].busy) << " ms\n";
      else
        *fill.log << "plan " << tries[i] << ": does not fit (" << whyNot[i] << ")\n";
    }
    if (!results[i].plan && tries[i] == fill.mustFit) {
      why = whyNot[i];
      return mlir::failure();
    }
  }
  for (size_t i = 0; i < tries.size(); ++i) {
    if (results[i].plan)
      fitting.push_back({tries[i].str(), std::move(results[i])});
    else if (firstWhy.empty())
      firstWhy = whyNot[i];
  }
  // Stage 5: each fitting plan that recomputes or offloads, filled, and
  // (5b) with the recompute left traded for the links' spare time.
  if (((fill.enabled && policy == "auto") || fillOnly) && budget != 0) {
    size_t bases = fitting.size();
    for (size_t i = 0; i < bases; ++i) {
      if (fill.log)
        *fill.log << "fill and spill of " << fitting[i].first << ":\n";
      Attempt result = filled(fitting[i].second, profile, budget, fill);
      std::string name = fitting[i].first + "+fill";
      const Attempt &from = result.plan ? result : fitting[i].second;
      Attempt traded = fill.spill ? spilled(from, profile, budget, fill) : Attempt();
      std::string tradedName = (result.plan ? name : fitting[i].first) + "+spill";
      if (fillOnly) {
        // The entry as asked for: filled, then spilled where that is faster.
        Attempt &best = traded.plan && (!result.plan || traded.predicted < result.predicted)
                            ? traded
                            : result;
        if (best.plan) {
          fitting[i].second.plan.erase();
          fitting[i] = {policy.str(), std::move(best)};
        }
        if (result.plan && &best != &result)
          result.plan.erase();
        if (traded.plan && &best != &traded)
          traded.plan.erase();
        continue;
      }
      if (result.plan)
        fitting.push_back({name, std::move(result)});
      if (traded.plan)
        fitting.push_back({tradedName, std::move(traded)});
    }
  }
  if (spillOnly && budget != 0 && !fitting.empty()) {
    Attempt traded = spilled(fitting[0].second, profile, budget, fill);
    if (traded.plan) {
      fitting[0].second.plan.erase();
      fitting[0] = {policy.str(), std::move(traded)};
    }
  }
  if (fitting.empty()) {
    why = firstWhy;
    return mlir::failure();
  }
  // With the capacities known, the entries compete by the measure the fill's
  // search and the spill chose by: the timeline with the share of the state
  // the device will not hold beside each plan's arena on the host
  // (hostShareBeside). The timeline's default sends every parameter over the
  // links and through the host AdamW, which on a slow host bounds every
  // entry alike and hides the compute a spill saves behind its copies (the
  // 1.36B at 16k within 16 GiB with a 3.37 G/s host AdamW kept 13 ms more
  // recompute for it: docs/tiering.md, "The passes", mt-tier step 6).
  if (fill.deviceBytes != 0 && fill.stateDeviceBytes != 0)
    for (auto &[name, entry] : fitting) {
      TieringModel model(entry.plan, profile);
      model.analyze();
      entry.predicted = model.predictStepSeconds(hostShareBeside(model.arenaBytes(), fill));
    }
  // Fastest first; within a millionth (a step the host optimizer or a link
  // bounds, where the timeline cannot see compute saved), the least compute.
  size_t best = 0;
  for (size_t i = 1; i < fitting.size(); ++i) {
    const Attempt &mine = fitting[i].second, &theirs = fitting[best].second;
    double tolerance = 1e-6 * std::max(mine.predicted, theirs.predicted);
    if (mine.predicted < theirs.predicted - tolerance ||
        (std::abs(mine.predicted - theirs.predicted) <= tolerance && mine.busy < theirs.busy))
      best = i;
  }
  if (fill.log) {
    for (const auto &[name, entry] : fitting)
      *fill.log << "entry " << name << ": predicted " << ms(entry.predicted) << " ms, compute "
                << ms(entry.busy) << " ms\n";
    *fill.log << "chosen " << fitting[best].first << "\n";
  }
  for (size_t i = 0; i < fitting.size(); ++i)
    if (i != best)
      fitting[i].second.plan.erase();
  std::string chosen = policy == "auto" && fitting[best].first != "auto"
                           ? "auto (" + fitting[best].first + ")"
                           : fitting[best].first;
  return TieringChoice{fitting[best].second.plan, chosen};
}

} // namespace megatrain
