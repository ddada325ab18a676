// PlanStats.h - what a plan costs: parameter counts, tokens per step, device memory over time.
#pragma once

#include <cstdint>
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
  // from the first step that writes it (from the start for INPUT and
  // CONSTANT) through its last_use_step (the last step if it never dies).
  std::vector<uint64_t> deviceLiveBytes;
  uint64_t devicePeakBytes = 0;
  int64_t devicePeakStep = -1;
};

// Expects a validated plan.
PlanStats computePlanStats(const plan::Plan& plan);

}  // namespace megatrain::runtime
