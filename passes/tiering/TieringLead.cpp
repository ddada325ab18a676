//===- TieringLead.cpp - mt-tier's lead: parameter fetches ahead of the queue ===//
//
// Stage 6b (TieringLead.h). Positions are the model's, taken once: a fetch
// moved to position k is issued right before the op at k, so the compute
// before it is computeIn(0, k) whatever moves, and the ops stay where they
// are until the moves that fit are applied at the end.
//
// 1. The queue. Every fetch (mt.param, mt.prefetch) with a transfer, in
//    issue order; one starts when the compute before its position is done
//    and the fetch before it has landed (the link is one queue; the plan's
//    `fetch` and `h2d` streams share it), and lands its transfer later.
// 2. Late fetches, in position order: a parameter fetch that lands after
//    the compute before its first use is done would stall that use. It
//    moves to the latest position from which the queue (without it, as the
//    moves so far left it) lands it in time, or, when none within
//    kMaxFetchWalk does, to the one that lands it soonest. Positions that
//    hold a fetch are not anchors (that fetch may move too). A move delays
//    the fetches it now precedes, so the late ones are looked for again
//    (kRounds at most).
// 3. Budget. Each move lengthens its value's life; ranked by the lateness
//    it takes off per byte-position added, the longest prefix whose
//    lifetimes place (placeBestFit) within the budget is kept.
//
//===----------------------------------------------------------------------===//
#include "tiering/TieringLead.h"

#include "megatrain/Passes/Placement.h"

#include <algorithm>
#include <cmath>

namespace megatrain {

namespace {

/// How many times the late fetches are looked for again (a move delays the
/// fetches issued after its new place, which may then land late).
constexpr int kRounds = 4;
/// Lateness below this is none (the model's times are sums of doubles).
constexpr double kOnTime = 1e-7;

struct Fetch {
  mlir::Operation *op;
  int64_t position; // where it sits now
  int64_t key;      // issue order: 2 x position, a move to k is 2k - 1
  double transfer;
  double due; // when the compute before its first use is done (inf: no use)
};

struct Move {
  size_t fetch; // index into the fetches
  int64_t to;
  double saved; // seconds of lateness it takes off
  double score; // saved per byte-position added
};

/// The link's queue: when each fetch lands, in the fetches' order, with the
/// one at `skip` left out (SIZE_MAX: none).
std::vector<double> landings(const TieringModel &model, const std::vector<Fetch> &fetches,
                             std::vector<size_t> &order, size_t skip) {
  order.clear();
  for (size_t i = 0; i < fetches.size(); ++i)
    if (i != skip)
      order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return fetches[a].key < fetches[b].key; });
  std::vector<double> landed(order.size());
  double free = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const Fetch &fetch = fetches[order[i]];
    // A moved fetch's key 2k - 1 issues before the op at k: the compute before k.
    int64_t at = (fetch.key + 1) / 2;
    free = std::max(free, model.computeIn(0, at)) + fetch.transfer;
    landed[i] = free;
  }
  return landed;
}

} // namespace

LeadResult leadParamFetches(TieringModel &model, uint64_t budget,
                            const llvm::StringMap<double> &hostShares) {
  LeadResult result;
  const int64_t n = model.size();
  std::vector<Fetch> fetches;
  for (int64_t p = 0; p < n; ++p)
    if (isFetch(model.opAt(p)) && model.h2dAt(p) > 0) {
      mlir::Operation *op = model.opAt(p);
      double transfer = model.h2dAt(p);
      if (auto param = mlir::dyn_cast<mt::ParamOp>(op)) {
        auto share = hostShares.find(param.getName());
        if (share != hostShares.end())
          transfer *= share->second;
      }
      if (transfer <= 0)
        continue;
      const LiveValue *value = model.live(op->getResult(0));
      double due = value && !value->uses.empty() ? model.computeIn(0, value->uses.front())
                                                 : INFINITY;
      fetches.push_back({op, p, 2 * p, transfer, due});
    }

  // Where each fetch moves (-1: stays), and the lateness that takes off.
  std::vector<int64_t> target(fetches.size(), -1);
  std::vector<double> savedBy(fetches.size(), 0);
  std::vector<size_t> order;
  for (int round = 0; round < kRounds; ++round) {
    bool changed = false;
    for (size_t f = 0; f < fetches.size(); ++f) {
      Fetch &fetch = fetches[f];
      if (!mlir::isa<mt::ParamOp>(fetch.op) || std::isinf(fetch.due))
        continue;
      // The queue without it: the landing of the last fetch issued before a key.
      std::vector<double> landed = landings(model, fetches, order, f);
      const int64_t at = (fetch.key + 1) / 2;
      auto landsFrom = [&](int64_t k) {
        int64_t key = k == at ? fetch.key : 2 * k - 1;
        auto it = std::lower_bound(order.begin(), order.end(), key,
                                   [&](size_t i, int64_t x) { return fetches[i].key < x; });
        double free = it == order.begin() ? 0 : landed[static_cast<size_t>(it - order.begin()) - 1];
        return std::max(free, model.computeIn(0, k)) + fetch.transfer;
      };
      const double now = landsFrom(at);
      if (now <= fetch.due + kOnTime)
        continue;
      if (round == 0) {
        ++result.late;
        result.lateSeconds += now - fetch.due;
      }
      int64_t best = -1;
      double bestLanding = now;
      int64_t stop = std::max<int64_t>(0, fetch.position - kMaxFetchWalk);
      for (int64_t k = at - 1; k >= stop; --k) {
        if (isFetch(model.opAt(k)))
          continue;
        double landing = landsFrom(k);
        if (landing <= fetch.due + kOnTime) {
          best = k;
          bestLanding = landing;
          break;
        }
        if (landing < bestLanding - kOnTime) {
          best = k;
          bestLanding = landing;
        }
      }
      if (best < 0)
        continue;
      savedBy[f] += now - std::max(bestLanding, fetch.due);
      target[f] = best;
      fetch.key = 2 * best - 1;
      changed = true;
    }
    if (!changed)
      break;
  }
  std::vector<Move> moves;
  for (size_t f = 0; f < fetches.size(); ++f) {
    if (target[f] < 0)
      continue;
    const LiveValue *value = model.live(fetches[f].op->getResult(0));
    double added = static_cast<double>(value->size) *
                   static_cast<double>(fetches[f].position - target[f]);
    moves.push_back({f, target[f], savedBy[f], savedBy[f] / std::max(added, 1.0)});
  }
  std::stable_sort(moves.begin(), moves.end(),
                   [](const Move &a, const Move &b) { return a.score > b.score; });

  // The arena with the first `prefix` moves: their values live from the new position.
  auto arenaWith = [&](size_t prefix) {
    llvm::DenseMap<mlir::Value, int64_t> from;
    for (size_t i = 0; i < prefix; ++i)
      from[fetches[moves[i].fetch].op->getResult(0)] = moves[i].to;
    return model.arenaBytes(from);
  };
  size_t kept = moves.size();
  if (budget != 0 && kept > 0 && arenaWith(kept) > budget)
    kept = arenaWith(0) > budget ? 0
                                 : longestFittingPrefix(kept, [&](size_t prefix) {
                                     return arenaWith(prefix) <= budget;
                                   });
  // Apply: each before its anchor, an op that does not move.
  for (size_t i = 0; i < kept; ++i) {
    fetches[moves[i].fetch].op->moveBefore(model.opAt(moves[i].to));
    ++result.moved;
    result.savedSeconds += moves[i].saved;
  }
  model.analyze();
  return result;
}

} // namespace megatrain
