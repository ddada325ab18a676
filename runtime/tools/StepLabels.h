// StepLabels.h - how megatrain-inspect and megatrain-run's --trace name a plan's steps.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "megatrain/plan/plan.pb.h"

namespace megatrain::runtime::tools {

constexpr size_t kMaxName = 28;     // longest tensor name shown whole
constexpr size_t kMaxTensors = 64;  // widest tensors cell

// "a_very_long_na...r_name": keeps both ends, where names differ most.
std::string shorten(const std::string& text, size_t limit);

// Tensor names, each shortened to kMaxName, joined by ", ".
std::string joinNames(const plan::Plan& plan, const google::protobuf::RepeatedField<uint32_t>& ids);

// "%g".
std::string formatDouble(double value);

// Attributes as short `name=value` pairs; zero transpose flags are left out.
std::string shortAttributes(const plan::Kernel& kernel);

// What a step does and the tensors it touches.
void describe(const plan::Plan& plan, const plan::Step& step, std::string& what, std::string& tensors);

// The label of every step in a trace: what it does, and for a kernel the
// tensors it writes ("matmul -> h").
std::vector<std::string> traceStepNames(const plan::Plan& plan);

}  // namespace megatrain::runtime::tools
