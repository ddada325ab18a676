// PlanLoader.h - reads a plan file, checks its format version, and validates it.
#pragma once

#include <cstdint>
#include <string>

#include "megatrain/plan/plan.pb.h"

namespace megatrain::runtime {

class Backend;

// Parses a serialized plan and checks magic and version (kPlanMagic,
// kPlanFormatMajor and at most kPlanFormatMinor: megatrain/plan/FormatVersion.h).
// `label` (usually the file name) starts every error message.
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
