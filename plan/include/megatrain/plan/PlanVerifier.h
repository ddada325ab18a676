// PlanVerifier.h - proves a plan's schedule safe: stream order, memory sharing, the device budget.
#pragma once

#include <string>
#include <vector>

#include "megatrain/plan/plan.pb.h"

namespace megatrain {

// Proves, from the steps' streams and events alone, that running each stream
// in plan order gives every step the bytes plan order gives it
// (docs/tiering.md, "Verifier"):
//   - every wait has an earlier record of its event;
//   - every read happens after the step that last wrote the tensor (or the
//     runtime, for INPUT, CONSTANT, PARAMETER, GRADIENT, OPTIMIZER_STATE);
//   - every write happens after every earlier read and write of the bytes
//     it overwrites (the tensor itself and tensors sharing its bytes);
//   - no two tensors live at the same time in plan order share bytes (live:
//     from the writer to the last access or last_use_step; persistent roles
//     for the whole step), and no read comes after a tensor's last_use_step;
//   - the DEVICE pools and the peak of live device bytes fit
//     header.device_budget_bytes when it is not 0.
// Returns every failure found, one line each ("step 41 (compute, kernel
// matmul): reads ..."), grouped in that order; empty when the plan is proven.
// Expects the structural checks of validatePlan to hold (ids in range); an id
// out of range is reported, never followed.
std::vector<std::string> verifySchedule(const plan::Plan& plan);

}  // namespace megatrain
