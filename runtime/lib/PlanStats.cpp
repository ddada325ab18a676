// PlanStats.cpp - parameter counts, tokens per step and device memory over time for a plan.
#include "megatrain/runtime/PlanStats.h"

#include <algorithm>
#include <map>

#include "megatrain/plan/DType.h"
#include "megatrain/plan/Streams.h"

namespace megatrain::runtime {
namespace {

// Each tensor's live steps [start, end] as the device's memory counts them
// (start -1: not a DEVICE-pool base tensor, or never touched), and the step
// that first writes it (-1: none).
struct Lifetimes {
  std::vector<int64_t> start, end, firstWrite;
};

Lifetimes deviceLifetimes(const plan::Plan& plan) {
  const int64_t steps = plan.steps_size();
  const auto count = static_cast<size_t>(plan.tensors_size());
  Lifetimes life{std::vector<int64_t>(count, -1), std::vector<int64_t>(count, -1),
                 std::vector<int64_t>(count, -1)};
  // First write (or, failing that, first read) of every tensor.
  std::vector<int64_t> firstRead(count, -1), lastAccess(count, -1);
  auto note = [&](std::vector<int64_t>& first, uint32_t id, int64_t step) {
    if (first[id] < 0) first[id] = step;
    lastAccess[id] = step;
  };
  for (const plan::Step& step : plan.steps()) {
    const auto s = static_cast<int64_t>(step.index());
    if (step.has_kernel()) {
      for (uint32_t id : step.kernel().outputs()) note(life.firstWrite, id, s);
      for (uint32_t id : step.kernel().inputs()) note(firstRead, id, s);
    } else if (step.has_copy()) {
      note(life.firstWrite, step.copy().dst(), s);
      note(firstRead, step.copy().src(), s);
    } else if (step.has_host_task()) {
      // A device AdamW or ACCUMULATE (state in DEVICE pools) touches them.
      for (uint32_t id : step.host_task().tensors()) note(firstRead, id, s);
    }
  }
  if (steps == 0) return life;
  for (const plan::Tensor& tensor : plan.tensors()) {
    if (plan.pools(static_cast<int>(tensor.buffer().pool())).tier() != plan::DEVICE) continue;
    if (tensor.has_alias_of()) continue;  // a view's bytes are its base's, live as long
    // Inputs and constants are there before the step; a tensor that never
    // dies (training state in a DEVICE pool) holds its bytes all along.
    int64_t start;
    if (tensor.role() == plan::STATE_STAGE) {
      // Staging in a DEVICE pool (an accumulator's visit): its bytes hold it
      // from its first access to its last; the ring's later tensors reuse them.
      const int64_t write = life.firstWrite[tensor.id()], read = firstRead[tensor.id()];
      const int64_t first = write < 0 ? read : read < 0 ? write : std::min(write, read);
      if (first < 0) continue;  // never touched
      life.start[tensor.id()] = first;
      life.end[tensor.id()] = lastAccess[tensor.id()];
      continue;
    }
    if (tensor.role() == plan::INPUT || tensor.role() == plan::CONSTANT || tensor.last_use_step() < 0) start = 0;
    else if (life.firstWrite[tensor.id()] >= 0) start = life.firstWrite[tensor.id()];
    else if (firstRead[tensor.id()] >= 0) start = firstRead[tensor.id()];
    else continue;  // never touched
    int64_t end = tensor.last_use_step() >= 0 && tensor.role() != plan::CONSTANT
                      ? tensor.last_use_step()
                      : steps - 1;
    life.start[tensor.id()] = start;
    life.end[tensor.id()] = std::max(end, start);
  }
  return life;
}

}  // namespace

PlanStats computePlanStats(const plan::Plan& plan) {
  PlanStats stats;
  const int64_t steps = plan.steps_size();
  for (const plan::Tensor& tensor : plan.tensors()) {
    if (tensor.role() != plan::PARAMETER) continue;
    const auto elements = static_cast<uint64_t>(elementCount(tensor.shape()));
    ++stats.parameterTensors;
    stats.parameterElements += elements;
    if (tensor.trainable()) {
      ++stats.trainableTensors;
      stats.trainableElements += elements;
    }
  }

  stats.tokensPerStep = plan.header().tokens_per_step();
  if (stats.tokensPerStep == 0 && !plan.header().token_input().empty())
    for (const plan::Tensor& tensor : plan.tensors())
      if (tensor.role() == plan::INPUT && (tensor.source() == plan.header().token_input() ||
                                           tensor.name() == plan.header().token_input()))
        stats.tokensPerStep = static_cast<uint64_t>(elementCount(tensor.shape()));

  // A difference array over steps: +size where a tensor becomes live, -size after it dies.
  const Lifetimes life = deviceLifetimes(plan);
  std::vector<int64_t> delta(static_cast<size_t>(steps) + 1, 0);
  for (const plan::Tensor& tensor : plan.tensors()) {
    if (life.start[tensor.id()] < 0) continue;
    const auto size = static_cast<int64_t>(tensor.buffer().size_bytes());
    delta[static_cast<size_t>(life.start[tensor.id()])] += size;
    delta[static_cast<size_t>(life.end[tensor.id()]) + 1] -= size;
  }
  stats.deviceLiveBytes.resize(static_cast<size_t>(steps));
  int64_t live = 0;
  for (int64_t s = 0; s < steps; ++s) {
    live += delta[static_cast<size_t>(s)];
    stats.deviceLiveBytes[static_cast<size_t>(s)] = static_cast<uint64_t>(live);
    if (static_cast<uint64_t>(live) > stats.devicePeakBytes || stats.devicePeakStep < 0) {
      stats.devicePeakBytes = static_cast<uint64_t>(live);
      stats.devicePeakStep = s;
    }
  }
  return stats;
}

std::vector<DeviceMemoryGroup> deviceMemoryAt(const plan::Plan& plan, int64_t step) {
  const Lifetimes life = deviceLifetimes(plan);
  std::map<std::string, DeviceMemoryGroup> groups;
  for (const plan::Tensor& tensor : plan.tensors()) {
    const int64_t start = life.start[tensor.id()];
    if (start < 0 || step < start || step > life.end[tensor.id()]) continue;
    std::string what = plan.pools(static_cast<int>(tensor.buffer().pool())).name() + ": ";
    const int64_t writer = life.firstWrite[tensor.id()];
    if (tensor.role() != plan::ACTIVATION || writer < 0) {
      what += roleName(tensor.role());
    } else {
      const plan::Step& written = plan.steps(static_cast<int>(writer));
      if (written.has_kernel())
        what += written.kernel().kernel() + " output" + (written.recompute() ? ", recomputed" : "");
      else
        what += "prefetched from the host";
    }
    DeviceMemoryGroup& group = groups[what];
    group.what = what;
    ++group.tensors;
    group.bytes += tensor.buffer().size_bytes();
  }
  std::vector<DeviceMemoryGroup> sorted;
  for (auto& [what, group] : groups) sorted.push_back(group);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const DeviceMemoryGroup& a, const DeviceMemoryGroup& b) { return a.bytes > b.bytes; });
  return sorted;
}

bool updatesVisitTheDevice(const plan::Plan& plan) {
  for (const plan::Step& step : plan.steps()) {
    if (step.stream() != plan::kOptimizerStream || !step.has_host_task() ||
        step.host_task().kind() != plan::HostTask::ADAMW)
      continue;
    for (uint32_t tensor : step.host_task().tensors())
      if (static_cast<int>(tensor) < plan.tensors_size() &&
          plan.tensors(static_cast<int>(tensor)).role() == plan::STATE_STAGE)
        return true;
  }
  return false;
}

}  // namespace megatrain::runtime
