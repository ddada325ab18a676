// PlanStats.h - what a plan costs: parameter counts, tokens per step, device memory over time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "megatrain/plan/plan.pb.h"

namespace megatrain::runtime {

struct PlanStats {
  uint64_t parameterTensors = 0;
  uint64_t parameterElements = 0;
  uint64_t trainableTensors = 0;
  uint64_t trainableElements = 0;
  // header.tokens_per_step, or batch x sequence of the token input when that is 0.
  uint64_t tokensPerStep = 0;
  // Bytes of DEVICE-pool tensors live at each step [steps]. A tensor is live
  // from the first step that touches it (from the start for INPUT, CONSTANT
  // and a tensor that never dies: training state) through its last_use_step
  // (the last step if it never dies).
  std::vector<uint64_t> deviceLiveBytes;
  uint64_t devicePeakBytes = 0;
  int64_t devicePeakStep = -1;
};

// Expects a validated plan.
PlanStats computePlanStats(const plan::Plan& plan);

// One kind of what the device holds at a step (deviceMemoryAt).
struct DeviceMemoryGroup {
  // "<pool>: <role>", and for an ACTIVATION what wrote it: "<pool>: <kernel>
  // output", "<pool>: <kernel> output, recomputed" (a recompute step wrote
  // it), "<pool>: prefetched from the host" (a copy wrote it).
  std::string what;
  uint64_t tensors = 0;
  uint64_t bytes = 0;
};

// The DEVICE-pool tensors live at `step` (as computePlanStats counts them; a
// view is its base's bytes), grouped by what they are, the most bytes first.
// Expects a validated plan.
std::vector<DeviceMemoryGroup> deviceMemoryAt(const plan::Plan& plan, int64_t step);

// Whether an update visits the device (docs/tiering.md "Update visits"): an ADAMW on the
// `optimizer` stream with a STATE_STAGE operand. Its ring slot, and the fetches behind it,
// wait for that update, so the CUDA backend runs the stream at the compute stream's priority
// (docs/cuda.md "Stream priorities").
bool updatesVisitTheDevice(const plan::Plan& plan);

}  // namespace megatrain::runtime
