//===- HostOrder.cpp - the order of the host updates that run on into the next step ===//
//
// HostOrder.h says what it does; docs/tiering.md ("The host update order")
// why. The plan has no events yet: the simulator orders it by plan order and
// the tensors' bytes, as insertEvents will.
//
//===----------------------------------------------------------------------===//
#include "megatrain/Plan/HostOrder.h"

#include "megatrain/Plan/StepAccess.h"
#include "megatrain/plan/Aliases.h"
#include "megatrain/plan/Simulate.h"
#include "megatrain/plan/Streams.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace megatrain {

namespace pb = megatrain::plan;

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

/// One host task after the READ_LOSS.
struct Unit {
  int index = 0;                 // its position in plan order
  StepAccess access;             // what it reads and writes (bases)
  double release = 0;            // its inputs' last writer on another stream ends
  double duration = 0;           // predicted
  double deadline = kNever;      // the first other step that touches its bytes starts
  int limit = 0;                 // the first later step it may not move past
  std::vector<size_t> after;     // the units it must follow
};

bool isHostTask(const pb::Step &step) {
  return step.stream() == pb::kHostStream && step.op_case() == pb::Step::kHostTask;
}

} // namespace

HostOrderResult orderHostUpdates(pb::Plan &plan, const DeviceProfile &profile) {
  HostOrderResult result;
  const int steps = plan.steps_size();
  int readLoss = -1;
  for (int i = 0; i < steps; ++i) {
    const pb::Step &step = plan.steps(i);
    if (step.op_case() == pb::Step::kRecord || step.op_case() == pb::Step::kWait) {
      result.why = "the plan already has events";
      return result;
    }
    if (isHostTask(step) && step.host_task().kind() == pb::HostTask::READ_LOSS)
      readLoss = i;
  }
  for (const pb::Pool &pool : plan.pools())
    if (pool.tier() == pb::DISK) {
      result.why = "a disk pool: the host updates end in their step";
      return result;
    }
  if (readLoss < 0) {
    result.why = "no READ_LOSS on the host stream";
    return result;
  }

  const std::vector<uint32_t> bases = aliasBases(plan);
  const std::vector<std::vector<uint32_t>> overlapping = overlappingTensors(plan);
  const uint32_t tensorCount = static_cast<uint32_t>(plan.tensors_size());
  auto accessAt = [&](int i) {
    StepAccess access = accessOf(plan.steps(i));
    mapToBases(bases, access.reads);
    mapToBases(bases, access.writes);
    return access;
  };

  std::vector<Unit> units;
  std::vector<int> unitAt(steps, -1);
  for (int i = readLoss + 1; i < steps; ++i)
    if (isHostTask(plan.steps(i))) {
      const pb::HostTask::Kind kind = plan.steps(i).host_task().kind();
      if (kind != pb::HostTask::ADAMW && kind != pb::HostTask::ACCUMULATE) {
        result.why = "a host task after the READ_LOSS that is not an update or a sum";
        return result;
      }
      unitAt[i] = static_cast<int>(units.size());
      Unit unit;
      unit.index = i;
      unit.access = accessAt(i);
      unit.limit = steps;
      units.push_back(std::move(unit));
    }
  result.tasks = units.size();
  if (units.size() < 2) {
    result.why = "fewer than two host tasks after the READ_LOSS";
    return result;
  }

  // The plan as it is, timed.
  pb::Plan timed = plan;
  simulatePlan(timed, profile, Precision::FP32);
  result.before = timed.header().predicted_step_s();
  const double period = result.before;
  for (Unit &unit : units)
    unit.duration = timed.steps(unit.index).predicted_end_s() - timed.steps(unit.index).predicted_start_s();

  // Per tensor, the units whose reads (writes) overlap its bytes.
  std::vector<std::vector<uint32_t>> readBy(tensorCount), writtenBy(tensorCount);
  for (size_t u = 0; u < units.size(); ++u) {
    for (uint32_t t : units[u].access.reads)
      for (uint32_t o : overlapping[t])
        readBy[o].push_back(static_cast<uint32_t>(u));
    for (uint32_t t : units[u].access.writes)
      for (uint32_t o : overlapping[t])
        writtenBy[o].push_back(static_cast<uint32_t>(u));
  }
  auto dedupe = [](std::vector<uint32_t> &v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  };
  for (uint32_t t = 0; t < tensorCount; ++t) {
    dedupe(readBy[t]);
    dedupe(writtenBy[t]);
  }

  // One pass over the steps: releases, deadlines, move limits and the order
  // between the units.
  for (int i = 0; i < steps; ++i) {
    const pb::Step &step = plan.steps(i);
    const StepAccess access = accessAt(i);
    const int self = unitAt[i];
    // The units this step conflicts with: it writes what they read or
    // touch, or reads what they write.
    std::vector<uint32_t> writesTheirInputs, touchesTheirOutputs;
    for (uint32_t t : access.writes) {
      writesTheirInputs.insert(writesTheirInputs.end(), readBy[t].begin(), readBy[t].end());
      touchesTheirOutputs.insert(touchesTheirOutputs.end(), writtenBy[t].begin(), writtenBy[t].end());
    }
    for (uint32_t t : access.reads)
      touchesTheirOutputs.insert(touchesTheirOutputs.end(), writtenBy[t].begin(), writtenBy[t].end());
    dedupe(writesTheirInputs);
    dedupe(touchesTheirOutputs);
    std::vector<uint32_t> conflicts = writesTheirInputs;
    conflicts.insert(conflicts.end(), touchesTheirOutputs.begin(), touchesTheirOutputs.end());
    dedupe(conflicts);
    const double start = timed.steps(i).predicted_start_s();
    const double end = timed.steps(i).predicted_end_s();
    const bool otherStream = step.stream() != pb::kHostStream;
    for (uint32_t u : conflicts) {
      Unit &unit = units[u];
      if (static_cast<int>(u) == self)
        continue;
      if (i < unit.index) {
        if (self >= 0) {
          // An earlier unit it depends on, or that depends on its bytes.
          unit.after.push_back(static_cast<size_t>(self));
          continue;
        }
        if (otherStream && std::binary_search(writesTheirInputs.begin(), writesTheirInputs.end(), u))
          unit.release = std::max(unit.release, end);
        // Before the unit in plan order: in the next step, this step waits
        // for it.
        if (otherStream)
          unit.deadline = std::min(unit.deadline, period + start);
      } else {
        if (self >= 0)
          continue; // a later unit: it records the order itself
        // After the unit in this step: it waits for the unit, and the unit
        // may not move past it.
        unit.limit = std::min(unit.limit, i);
        if (otherStream)
          unit.deadline = std::min(unit.deadline, start);
      }
    }
  }
  // A task's deadline is also that of the tasks that wait for it.
  for (size_t u = units.size(); u-- > 0;)
    for (size_t before : units[u].after)
      units[before].deadline = std::min(units[before].deadline, units[u].deadline);

  // The host's list schedule: when free, the released task with the earliest
  // deadline (then plan order) among those whose host predecessors are done.
  const size_t n = units.size();
  std::vector<bool> done(n, false);
  std::vector<size_t> order;
  order.reserve(n);
  double now = timed.steps(readLoss).predicted_end_s();
  while (order.size() < n) {
    size_t best = n;
    double nextRelease = kNever;
    for (size_t u = 0; u < n; ++u) {
      if (done[u])
        continue;
      bool ready = std::all_of(units[u].after.begin(), units[u].after.end(),
                               [&](size_t b) { return done[b]; });
      if (!ready)
        continue;
      if (units[u].release > now) {
        nextRelease = std::min(nextRelease, units[u].release);
        continue;
      }
      if (best == n || units[u].deadline < units[best].deadline)
        best = u;
    }
    if (best == n) {
      now = nextRelease; // every ready task waits for its input
      continue;
    }
    done[best] = true;
    order.push_back(best);
    now += units[best].duration;
  }
  for (size_t k = 0; k < n; ++k)
    result.moved += order[k] != k;
  if (result.moved == 0) {
    result.why = "the order found is plan order";
    result.after = result.before;
    return result;
  }

  // Each task goes right after the later of its own step and the step the
  // task before it went after; none may pass a step that touches its bytes.
  std::vector<int> anchor(n);
  int previous = -1;
  for (size_t u : order) {
    anchor[u] = std::max(units[u].index, previous);
    if (anchor[u] >= units[u].limit) {
      result.why = "a task would move past a step that touches its bytes";
      result.after = result.before;
      return result;
    }
    previous = anchor[u];
  }
  std::vector<std::vector<size_t>> placedAfter(steps);
  for (size_t u : order)
    placedAfter[anchor[u]].push_back(u);
  pb::Plan reordered = plan;
  reordered.clear_steps();
  std::vector<int> newIndex(steps, -1);
  auto place = [&](int old) {
    newIndex[old] = reordered.steps_size();
    pb::Step *step = reordered.add_steps();
    *step = plan.steps(old);
    step->set_index(static_cast<uint32_t>(newIndex[old]));
  };
  for (int i = 0; i < steps; ++i) {
    if (unitAt[i] < 0)
      place(i);
    for (size_t u : placedAfter[i])
      place(units[u].index);
  }
  // The tensors die where their last reader now is: the same step, or, for
  // what a moved task touches, no earlier than that task.
  for (pb::Tensor &tensor : *reordered.mutable_tensors())
    if (tensor.last_use_step() >= 0 && tensor.last_use_step() < steps)
      tensor.set_last_use_step(newIndex[tensor.last_use_step()]);
  for (const Unit &unit : units) {
    const StepAccess raw = accessOf(plan.steps(unit.index));
    for (const std::vector<uint32_t> *ids : {&raw.reads, &raw.writes, &unit.access.reads, &unit.access.writes})
      for (uint32_t id : *ids) {
        pb::Tensor *tensor = reordered.mutable_tensors(static_cast<int>(id));
        if (tensor->last_use_step() >= 0)
          tensor->set_last_use_step(std::max<int64_t>(tensor->last_use_step(), newIndex[unit.index]));
      }
  }

  simulatePlan(reordered, profile, Precision::FP32);
  result.after = reordered.header().predicted_step_s();
  // A tie takes the new order: the same step on this profile, and a host
  // slower than the profile's (bench/RESULTS.md: 0.7 to 1.0 of its rate in
  // the step) then waits less.
  if (result.after > result.before) {
    result.why = "longer by the plan simulator";
    return result;
  }
  plan = std::move(reordered);
  result.applied = true;
  return result;
}

} // namespace megatrain
