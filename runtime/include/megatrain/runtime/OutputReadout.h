// OutputReadout.h - graph outputs a plan keeps (OUTPUT_READOUT tensors `output:<name>`), read as arrays.
#pragma once

#include <string>
#include <vector>

#include "megatrain/plan/plan.pb.h"
#include "megatrain/runtime/HostArray.h"

namespace megatrain::runtime {

class Executor;

inline constexpr const char* kOutputReadoutPrefix = "output:";

// The graph outputs the plan keeps (megatrain-compile --keep-output), in plan order.
std::vector<std::string> keptOutputs(const plan::Plan& plan);

// Error unless the plan keeps output `name`; the message lists the kept ones.
void requireKeptOutput(const plan::Plan& plan, const std::string& name);

// The value output `name` had in the last step run: its forward pass, so
// computed with the weights from before that step's update. f32, f64, i32 and
// i64 outputs only.
HostArray readOutput(const Executor& executor, const std::string& name);

}  // namespace megatrain::runtime
