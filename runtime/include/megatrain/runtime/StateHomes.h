// StateHomes.h - where a plan keeps each parameter's training state, and its bytes per tier.
//
// The compiler chooses a home per parameter (device, pinned host, disk;
// docs/tiering.md "State homes"); a plan shows it as the pool tier of the
// parameter's master. megatrain-inspect prints these figures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "megatrain/plan/plan.pb.h"

namespace megatrain::runtime {

struct ParameterHome {
  std::string name;       // the PARAMETER's name
  plan::Tier tier;        // its home: the tier of its master's pool, or DISK when its moments are there
  uint64_t elements = 0;
  uint64_t stateBytes = 0;  // master, compute copy, gradient(s), moments: every tier
};

struct StateHomes {
  std::vector<ParameterHome> parameters;  // in tensor order
  uint64_t parameterElements = 0;         // all parameters
  // Bytes of training state (PARAMETER, PARAMETER_COMPUTE, GRADIENT,
  // OPTIMIZER_STATE tensors) per tier, indexed by plan::Tier (DEVICE,
  // HOST_PINNED, DISK).
  uint64_t bytesPerTier[4] = {};
  // Parameters whose state lives in each tier.
  uint64_t parametersPerTier[4] = {};
  // bytesPerTier / parameterElements (0 without parameters).
  double bytesPerParameter(plan::Tier tier) const;
};

// Expects a validated plan.
StateHomes computeStateHomes(const plan::Plan& plan);

}  // namespace megatrain::runtime
