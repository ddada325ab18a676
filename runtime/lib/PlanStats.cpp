// PlanStats.cpp - parameter counts, tokens per step and device memory over time for a plan.
#include "megatrain/runtime/PlanStats.h"

#include "megatrain/plan/DType.h"

namespace megatrain::runtime {

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

  // First write (or, failing that, first read) of every tensor.
  std::vector<int64_t> firstWrite(static_cast<size_t>(plan.tensors_size()), -1);
  std::vector<int64_t> firstRead(static_cast<size_t>(plan.tensors_size()), -1);
  auto note = [](std::vector<int64_t>& first, uint32_t id, int64_t step) {
    if (first[id] < 0) first[id] = step;
  };
  for (const plan::Step& step : plan.steps()) {
    const auto s = static_cast<int64_t>(step.index());
    if (step.has_kernel()) {
      for (uint32_t id : step.kernel().outputs()) note(firstWrite, id, s);
      for (uint32_t id : step.kernel().inputs()) note(firstRead, id, s);
    } else if (step.has_copy()) {
      note(firstWrite, step.copy().dst(), s);
      note(firstRead, step.copy().src(), s);
    }
  }

  // A difference array over steps: +size where a tensor becomes live, -size after it dies.
  std::vector<int64_t> delta(static_cast<size_t>(steps) + 1, 0);
  for (const plan::Tensor& tensor : plan.tensors()) {
    if (plan.pools(static_cast<int>(tensor.buffer().pool())).tier() != plan::DEVICE) continue;
    if (tensor.has_alias_of()) continue;  // a view's bytes are its base's, live as long
    int64_t start;
    if (tensor.role() == plan::INPUT || tensor.role() == plan::CONSTANT) start = 0;
    else if (firstWrite[tensor.id()] >= 0) start = firstWrite[tensor.id()];
    else if (firstRead[tensor.id()] >= 0) start = firstRead[tensor.id()];
    else continue;  // never touched
    if (steps == 0) break;
    int64_t end = tensor.last_use_step() >= 0 && tensor.role() != plan::CONSTANT
                      ? tensor.last_use_step()
                      : steps - 1;
    if (end < start) end = start;
    const auto size = static_cast<int64_t>(tensor.buffer().size_bytes());
    delta[static_cast<size_t>(start)] += size;
    delta[static_cast<size_t>(end) + 1] -= size;
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

}  // namespace megatrain::runtime
