// PlanLoader.h - reads a plan file, checks its format version, and validates it.
#pragma once

#include <cstdint>
#include <string>

#include "megatrain/plan/plan.pb.h"

namespace megatrain::runtime {

class Backend;

inline constexpr const char* kPlanMagic = "megatrain.plan";
inline constexpr uint32_t kFormatMajor = 1;
// Minor 1 added the OUTPUT_READOUT role (graph outputs kept by --keep-output);
// minor 2 the tiering fields and the simulator's predictions (docs/tiering.md);
// minor 3 the compute precision: header.precision, the PARAMETER_COMPUTE role
// and ADAMW's fifth tensor (docs/plan.md).
inline constexpr uint32_t kFormatMinor = 3;

// Parses a serialized plan and checks magic and version. `label` (usually the
// file name) starts every error message.
plan::Plan parsePlan(const std::string& bytes, const std::string& label);

// Reads and parses the plan file at `path` (see parsePlan).
plan::Plan loadPlan(const std::string& path);

// Proves the plan self-consistent before anything is allocated (docs/plan.md,
// "Validation on load"); kernels are checked against `backend`'s table and each
// kernel's shape rule (megatrain/kernels/Manifest.h). Throws
// Error with one line naming `label` and the step or tensor.
void validatePlan(const plan::Plan& plan, const Backend& backend,
                  const std::string& label = "plan");

}  // namespace megatrain::runtime
