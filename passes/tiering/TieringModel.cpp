//===- TieringModel.cpp - mt-tier's cost and timeline model of a schedule -===//
//
// Stage 1 of mt-tier, and the timeline its portfolio (stage 5) compares
// plans by. passes/Tiering.cpp describes the stages.
//
//===----------------------------------------------------------------------===//
#include "tiering/TieringModel.h"

#include "IrCost.h"

#include "megatrain/plan/OpCost.h"
#include "megatrain/Passes/Placement.h"

#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <cmath>

namespace megatrain {

bool isFetch(mlir::Operation *op) { return mlir::isa<mt::ParamOp, mt::PrefetchOp>(op); }

bool LiveValue::gapBefore(int64_t from, int64_t &a, int64_t &b) const {
  auto after = std::lower_bound(uses.begin(), uses.end(), from);
  if (after == uses.end())
    return false;
  b = *after;
  a = after == uses.begin() ? first : *(after - 1);
  return true;
}

void TieringModel::analyze() {
  order.clear();
  position.clear();
  values.clear();
  valueIndex.clear();
  updatePosition.clear();
  visiting.clear();
  mlir::Block &block = func.getBody().front();
  for (mlir::Operation &op : block.without_terminator()) {
    position[&op] = static_cast<int64_t>(order.size());
    order.push_back(&op);
    if (auto param = mlir::dyn_cast<mt::ParamOp>(op))
      if (auto accumulate = param->getAttrOfType<mlir::StringAttr>(mt::attr::kAccumulate);
          accumulate && accumulate.getValue() == "visit")
        visiting.insert(param.getName());
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
      compute[i] = computeSeconds(op, profile);
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

double TieringModel::transferOf(mlir::Value value) const {
  return transferSeconds(valueBytes(value), Link::HostToDevice, profile);
}

uint64_t TieringModel::peakBytes(int64_t *where) const {
  int64_t best = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(order.size()); ++i)
    if (liveBytes[i] > liveBytes[best])
      best = i;
  if (where)
    *where = best;
  return liveBytes.empty() ? 0 : static_cast<uint64_t>(liveBytes[best]);
}

uint64_t TieringModel::arenaBytes(const llvm::DenseMap<mlir::Value, int64_t> &firstAt) const {
  std::vector<Slot> slots;
  slots.reserve(values.size());
  int64_t n = static_cast<int64_t>(order.size());
  for (const LiveValue &value : values) {
    Slot slot;
    auto moved = firstAt.find(value.value);
    slot.first = moved == firstAt.end() ? value.first : moved->second;
    slot.last = value.last >= n ? kLivesForever : value.last;
    slot.size = value.size;
    slots.push_back(slot);
  }
  return placeBestFit(slots);
}

int64_t TieringModel::boundaryOf(int64_t first) const {
  auto it = std::upper_bound(boundaries.begin(), boundaries.end(), first);
  return it == boundaries.end() ? -1 : *it;
}

int64_t TieringModel::microbatchOf(int64_t pos) const {
  auto it = std::upper_bound(boundaries.begin(), boundaries.end(), pos);
  return std::max<int64_t>(0, (it - boundaries.begin()) - 1);
}

bool TieringModel::tinyAcrossMicrobatches(const LiveValue &value) const {
  auto type = mlir::dyn_cast<mlir::RankedTensorType>(value.value.getType());
  return boundaries.size() > 1 && type && type.hasStaticShape() &&
         type.getNumElements() <= 4;
}

int64_t TieringModel::fetchDeadline(mlir::Operation *fetch) const {
  if (auto param = mlir::dyn_cast<mt::ParamOp>(fetch)) {
    auto it = updatePosition.find(param.getName());
    if (it != updatePosition.end())
      return it->second - 1;
  }
  return static_cast<int64_t>(order.size());
}

std::pair<int64_t, double> TieringModel::placeFetch(int64_t lo, int64_t hi, int64_t b,
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
  int64_t stop = std::max(lo, hi - kMaxFetchWalk);
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

llvm::StringMap<double> TieringModel::hostShares(double paramShare) const {
  // mt-homes gives the device homes to the parameters updated last first
  // (passes/Homes.cpp): the host holds those updated first, up to the share
  // of the state's bytes; the one at the boundary counts for its part.
  llvm::StringMap<double> shares;
  std::vector<std::pair<llvm::StringRef, double>> updates; // in update order
  double total = 0;
  for (mlir::Operation *op : order)
    if (auto update = mlir::dyn_cast<mt::AdamWOp>(op)) {
      auto type = mlir::cast<mlir::RankedTensorType>(update.getGrad().getType());
      double elements = static_cast<double>(type.getNumElements());
      updates.emplace_back(update.getParam(), elements);
      total += elements;
    }
  double left = std::clamp(paramShare, 0.0, 1.0) * total;
  for (const auto &[name, elements] : updates) {
    double share = elements > 0 ? std::clamp(left / elements, 0.0, 1.0) : 1.0;
    shares[name] = share;
    left -= share * elements;
  }
  return shares;
}

double TieringModel::predictStepSeconds(HostShare share, double *hostBusy) const {
  // Three queues in issue order plus the host optimizer.
  // Both are prefixes of the update order, so a parameter's share of the
  // sums is at most its share of the state (a device home sums on the device).
  const double sumsShare = std::min(share.sums, share.state);
  const llvm::StringMap<double> shares = hostShares(share.state);
  const llvm::StringMap<double> sums = hostShares(sumsShare);
  auto lookup = [](const llvm::StringMap<double> &map, llvm::StringRef param, double otherwise) {
    auto it = map.find(param);
    return it == map.end() ? otherwise : it->second;
  };
  auto shareOf = [&](llvm::StringRef param) { return lookup(shares, param, share.state); };
  auto sumShareOf = [&](llvm::StringRef param) { return lookup(sums, param, sumsShare); };
  llvm::DenseMap<mlir::Value, double> ready;
  llvm::StringMap<double> firstFetch; // param -> when its first fetch starts
  double clock = 0, h2dFree = 0, d2hFree = 0, hostFree = 0, hostWork = 0;
  double hostStart = -1; // when the host's first task of the step starts
  double hostLag = 0;    // how far an update runs past its next step's fetch
  llvm::StringSet<> parted; // parameters with an earlier mt.grad_part
  // An accumulator's visit to the device for part k >= 1: fetched from the
  // host over h2d, issued ahead of the part (the compute does not wait for
  // it here; the plan simulator holds the emitted plan to it).
  auto visitIn = [&](mlir::Value grad, double share) {
    h2dFree = std::max(h2dFree, clock) +
              share * transferSeconds(valueBytes(grad), Link::HostToDevice, profile);
  };
  for (int64_t i = 0; i < static_cast<int64_t>(order.size()); ++i) {
    mlir::Operation *op = order[i];
    auto readyOf = [&](mlir::Value value) {
      auto it = ready.find(value);
      return it == ready.end() ? 0.0 : it->second;
    };
    auto hostTask = [&](double from, double work) {
      double start = std::max(hostFree, from);
      if (hostStart < 0)
        hostStart = start;
      hostFree = start + work;
      hostWork += work;
    };
    if (isFetch(op)) {
      double start = std::max(clock, h2dFree);
      double scale = 1.0;
      if (auto prefetch = mlir::dyn_cast<mt::PrefetchOp>(op))
        start = std::max(start, readyOf(prefetch.getHost()));
      if (auto param = mlir::dyn_cast<mt::ParamOp>(op)) {
        scale = shareOf(param.getName());
        firstFetch.try_emplace(param.getName(), start);
      }
      h2dFree = start + scale * h2d[i];
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
      const double share = shareOf(update.getParam());
      if (share <= 0)
        continue; // a device home: its update is the device's
      const bool visit = parted.contains(update.getParam()) &&
                         visiting.contains(update.getParam());
      if (visit)
        visitIn(grad, share);
      double start = std::max(d2hFree, readyOf(grad));
      d2hFree = start + share * transferSeconds(valueBytes(grad), Link::DeviceToHost, profile);
      auto type = mlir::cast<mlir::RankedTensorType>(grad.getType());
      double work = share * hostAdamWSeconds(type.getNumElements(), profile);
      if (parted.contains(update.getParam()) && !visit) // the last part is accumulated first
        work += sumShareOf(update.getParam()) *
                hostAccumulateSeconds(type.getNumElements(), profile);
      hostTask(d2hFree, work);
      // The next step may start before this update ends (the runtime's host
      // updates across steps, docs/runtime.md); its fetch of the parameter
      // waits for it.
      auto fetched = firstFetch.find(update.getParam());
      hostLag = std::max(hostLag, hostFree - (fetched == firstFetch.end() ? 0.0 : fetched->second));
      continue;
    }
    if (auto part = mlir::dyn_cast<mt::GradPartOp>(op)) {
      // A micro-batch gradient part: d2h, then (after part 0) ACCUMULATE.
      mlir::Value grad = part.getGrad();
      parted.insert(part.getParam());
      if (visiting.contains(part.getParam())) {
        // A visit: in (after part 0) and back out, no host sum; a device
        // home's sum is the device's.
        const double share = shareOf(part.getParam());
        if (share <= 0)
          continue;
        if (part.getIndex() > 0)
          visitIn(grad, share);
        double start = std::max(d2hFree, readyOf(grad));
        d2hFree = start + share * transferSeconds(valueBytes(grad), Link::DeviceToHost, profile);
        continue;
      }
      const double share = sumShareOf(part.getParam());
      if (share <= 0)
        continue; // summed on the device
      double start = std::max(d2hFree, readyOf(grad));
      d2hFree = start + share * transferSeconds(valueBytes(grad), Link::DeviceToHost, profile);
      if (part.getIndex() > 0) {
        auto type = mlir::cast<mlir::RankedTensorType>(grad.getType());
        hostTask(d2hFree, share * hostAccumulateSeconds(type.getNumElements(), profile));
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
  if (hostBusy)
    *hostBusy = hostWork;
  // The step repeats once its device streams are done and, where the host
  // runs on into the next step, once each update is done before the next
  // step fetches its parameter and the host has finished one step's work
  // before it starts the next one's.
  double hostBound = hostStart < 0 ? 0.0 : std::max(hostLag, hostFree - hostStart);
  return std::max({clock, d2hFree, hostBound});
}

} // namespace megatrain
