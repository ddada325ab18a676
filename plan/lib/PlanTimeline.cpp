// PlanTimeline.cpp - live intervals and per-pool live bytes over a plan's predicted time.
#include "megatrain/plan/PlanTimeline.h"

#include <algorithm>

#include "megatrain/plan/Aliases.h"
#include <utility>

namespace megatrain {

void stepReadsWrites(const plan::Step& step, std::vector<uint32_t>& reads,
                     std::vector<uint32_t>& writes) {
  reads.clear();
  writes.clear();
  switch (step.op_case()) {
    case plan::Step::kKernel:
      reads.assign(step.kernel().inputs().begin(), step.kernel().inputs().end());
      writes.assign(step.kernel().outputs().begin(), step.kernel().outputs().end());
      break;
    case plan::Step::kCopy:
      reads.push_back(step.copy().src());
      writes.push_back(step.copy().dst());
      break;
    case plan::Step::kHostTask: {
      const plan::HostTask& task = step.host_task();
      reads.assign(task.tensors().begin(), task.tensors().end());
      if (task.kind() == plan::HostTask::ADAMW) {
        // param, grad, m, v [, compute copy]: the update rewrites all but the gradient.
        for (int i = 0; i < task.tensors_size(); ++i)
          if (i != 1) writes.push_back(task.tensors(i));
      } else if (task.kind() == plan::HostTask::ACCUMULATE && task.tensors_size() > 0) {
        writes.push_back(task.tensors(0));
      }
      break;
    }
    default:
      break;
  }
}

bool isPersistentRole(plan::Role role) {
  switch (role) {
    case plan::PARAMETER:
    case plan::PARAMETER_COMPUTE:
    case plan::GRADIENT:
    case plan::OPTIMIZER_STATE:
    case plan::CONSTANT:
    case plan::LOSS_READOUT:
    case plan::OUTPUT_READOUT:
      return true;
    default:
      return false;
  }
}

double predictedEnd(const plan::Plan& plan) {
  double end = 0;
  for (const plan::Step& step : plan.steps()) end = std::max(end, step.predicted_end_s());
  return end;
}

std::vector<LiveInterval> liveIntervals(const plan::Plan& plan) {
  const size_t tensors = static_cast<size_t>(plan.tensors_size());
  const double stepEnd = predictedEnd(plan);
  std::vector<bool> persistent(tensors);
  for (size_t id = 0; id < tensors; ++id)
    persistent[id] = isPersistentRole(plan.tensors(static_cast<int>(id)).role());
  struct Open {
    bool open = false;
    double start = 0, end = 0;
  };
  std::vector<Open> current(tensors);
  std::vector<LiveInterval> intervals;
  std::vector<uint32_t> reads, writes;
  // A view's accesses keep its base's bytes live; the view holds none of its own.
  const std::vector<uint32_t> bases = aliasBases(plan);
  for (const plan::Step& step : plan.steps()) {
    stepReadsWrites(step, reads, writes);
    mapToBases(bases, reads);
    mapToBases(bases, writes);
    const double start = step.predicted_start_s(), end = step.predicted_end_s();
    for (uint32_t id : reads) {
      if (id >= tensors || persistent[id]) continue;
      Open& value = current[id];
      if (!value.open) value = {true, 0, end};  // there before the step began (INPUT)
      value.end = std::max(value.end, end);
    }
    for (uint32_t id : writes) {
      if (id >= tensors || persistent[id]) continue;
      // A step that reads and writes a tensor updates its value in place: extended above.
      if (std::find(reads.begin(), reads.end(), id) != reads.end()) continue;
      Open& value = current[id];
      if (value.open) intervals.push_back({id, value.start, value.end});
      value = {true, start, end};
    }
  }
  for (uint32_t id = 0; id < tensors; ++id) {
    if (persistent[id])
      intervals.push_back({id, 0, stepEnd});
    else if (current[id].open)
      intervals.push_back({id, current[id].start, current[id].end});
  }
  return intervals;
}

std::vector<PoolTimeline> memoryTimelines(const plan::Plan& plan) {
  const std::vector<LiveInterval> intervals = liveIntervals(plan);
  std::vector<PoolTimeline> timelines;
  for (const plan::Pool& pool : plan.pools()) {
    PoolTimeline timeline;
    timeline.pool = pool.id();
    // (time, signed bytes); at equal times frees come first (half-open intervals).
    std::vector<std::pair<double, int64_t>> changes;
    for (const LiveInterval& interval : intervals) {
      const plan::Tensor& tensor = plan.tensors(static_cast<int>(interval.tensor));
      if (tensor.buffer().pool() != pool.id()) continue;
      const int64_t bytes = static_cast<int64_t>(tensor.buffer().size_bytes());
      changes.emplace_back(interval.start, bytes);
      changes.emplace_back(interval.end, -bytes);
    }
    std::sort(changes.begin(), changes.end());
    timeline.points.push_back({0, 0});
    int64_t live = 0;
    for (size_t i = 0; i < changes.size();) {
      const double time = changes[i].first;
      // Frees and allocations at one instant: the peak counts the allocations after the frees.
      while (i < changes.size() && changes[i].first == time) live += changes[i++].second;
      const uint64_t bytes = static_cast<uint64_t>(std::max<int64_t>(live, 0));
      if (timeline.points.back().time == time)
        timeline.points.back().bytes = bytes;
      else
        timeline.points.push_back({time, bytes});
      if (bytes > timeline.peakBytes) {
        timeline.peakBytes = bytes;
        timeline.peakTime = time;
      }
    }
    timelines.push_back(std::move(timeline));
  }
  return timelines;
}

}  // namespace megatrain
