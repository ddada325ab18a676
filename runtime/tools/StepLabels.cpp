// StepLabels.cpp - how megatrain-inspect and megatrain-run's --trace name a plan's steps.
#include "StepLabels.h"

#include <cstdio>

#include "megatrain/plan/Format.h"

namespace megatrain::runtime::tools {

// "a_very_long_na...r_name": keeps both ends, where names differ most.
std::string shorten(const std::string& text, size_t limit) {
  if (text.size() <= limit) return text;
  const size_t head = (limit - 3) / 2, tail = limit - 3 - head;
  return text.substr(0, head) + "..." + text.substr(text.size() - tail);
}

std::string joinNames(const plan::Plan& plan, const google::protobuf::RepeatedField<uint32_t>& ids) {
  std::string text;
  for (uint32_t id : ids)
    text += (text.empty() ? "" : ", ") + shorten(plan.tensors(static_cast<int>(id)).name(), kMaxName);
  return text;
}

std::string formatDouble(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

// Attributes as short `name=value` pairs; zero transpose flags are left out.
std::string shortAttributes(const plan::Kernel& kernel) {
  std::string text;
  for (const plan::Attribute& attribute : kernel.attributes()) {
    std::string name = attribute.name();
    if (name == "transpose_a") name = "ta";
    else if (name == "transpose_b") name = "tb";
    else if (name == "keepdims") name = "keep";
    else if (name == "ignore_index") name = "ignore";
    else if (name == "epsilon") name = "eps";
    if ((name == "ta" || name == "tb") && attribute.i() == 0) continue;
    std::string value;
    switch (attribute.value_case()) {
      case plan::Attribute::kI: value = std::to_string(attribute.i()); break;
      case plan::Attribute::kF: value = formatDouble(attribute.f()); break;
      case plan::Attribute::kS: value = attribute.s(); break;
      case plan::Attribute::kInts:
        value = "[";
        for (int i = 0; i < attribute.ints().values_size(); ++i)
          value += (i ? "," : "") + std::to_string(attribute.ints().values(i));
        value += "]";
        break;
      case plan::Attribute::kFloats:
        value = "[";
        for (int i = 0; i < attribute.floats().values_size(); ++i)
          value += (i ? "," : "") + formatDouble(attribute.floats().values(i));
        value += "]";
        break;
      default: break;
    }
    text += " " + name + "=" + value;
  }
  return text;
}

// What a step does and the tensors it touches.
void describe(const plan::Plan& plan, const plan::Step& step, std::string& what,
              std::string& tensors) {
  auto name = [&](uint32_t id) { return shorten(plan.tensors(static_cast<int>(id)).name(), kMaxName); };
  switch (step.op_case()) {
    case plan::Step::kKernel:
      what = step.kernel().kernel() + shortAttributes(step.kernel()) + (step.recompute() ? " (recompute)" : "");
      tensors = joinNames(plan, step.kernel().inputs());
      tensors += (tensors.empty() ? "-> " : " -> ") + joinNames(plan, step.kernel().outputs());
      break;
    case plan::Step::kCopy: {
      const plan::Tensor& src = plan.tensors(static_cast<int>(step.copy().src()));
      const plan::Tensor& dst = plan.tensors(static_cast<int>(step.copy().dst()));
      what = "copy " + name(src.id()) + " -> " + name(dst.id());
      tensors = formatBytes(src.buffer().size_bytes()) + ", " +
                plan.pools(static_cast<int>(src.buffer().pool())).name() + " -> " +
                plan.pools(static_cast<int>(dst.buffer().pool())).name();
      break;
    }
    case plan::Step::kRecord: what = "record " + step.record().event(); break;
    case plan::Step::kWait: what = "wait " + step.wait().event(); break;
    case plan::Step::kHostTask: {
      const plan::HostTask& task = step.host_task();
      if (task.kind() == plan::HostTask::ADAMW)
        what = "adamw " + name(task.tensors(0));
      else if (task.kind() == plan::HostTask::ACCUMULATE)
        what = "accumulate " + name(task.tensors(0));
      else
        what = "read loss";
      tensors = joinNames(plan, task.tensors());
      break;
    }
    default: what = "(empty)"; break;
  }
  tensors = shorten(tensors, kMaxTensors);
}

std::vector<std::string> traceStepNames(const plan::Plan& plan) {
  std::vector<std::string> names(static_cast<size_t>(plan.steps_size()));
  for (int s = 0; s < plan.steps_size(); ++s) {
    std::string tensors;
    describe(plan, plan.steps(s), names[static_cast<size_t>(s)], tensors);
    if (plan.steps(s).has_kernel()) names[static_cast<size_t>(s)] += " -> " + joinNames(plan, plan.steps(s).kernel().outputs());
  }
  return names;
}

}  // namespace megatrain::runtime::tools
