// OutputReadout.cpp - graph outputs a plan keeps (OUTPUT_READOUT tensors `output:<name>`), read as arrays.
#include "megatrain/runtime/OutputReadout.h"

#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/Executor.h"

namespace megatrain::runtime {

std::vector<std::string> keptOutputs(const plan::Plan& plan) {
  const std::string prefix = kOutputReadoutPrefix;
  std::vector<std::string> names;
  for (const plan::Tensor& tensor : plan.tensors())
    if (tensor.role() == plan::OUTPUT_READOUT && tensor.name().rfind(prefix, 0) == 0)
      names.push_back(tensor.name().substr(prefix.size()));
  return names;
}

void requireKeptOutput(const plan::Plan& plan, const std::string& name) {
  const std::vector<std::string> kept = keptOutputs(plan);
  for (const std::string& have : kept)
    if (have == name) return;
  std::string list;
  for (const std::string& have : kept) list += (list.empty() ? "" : ", ") + have;
  throw Error("the plan keeps no output named '" + name + "' (" +
              (kept.empty() ? std::string("it keeps none") : "it keeps: " + list) +
              "; compile with --keep-output " + name + ")");
}

HostArray readOutput(const Executor& executor, const std::string& name) {
  requireKeptOutput(executor.plan(), name);
  const plan::Tensor& tensor = executor.tensor(kOutputReadoutPrefix + name);
  HostArray array;
  switch (tensor.dtype()) {
    case plan::F32: array.type = ElementType::F32; break;
    case plan::F64: array.type = ElementType::F64; break;
    case plan::I32: array.type = ElementType::I32; break;
    case plan::I64: array.type = ElementType::I64; break;
    default:
      throw Error("output '" + name + "' is " + dtypeName(tensor.dtype()) +
                  "; outputs can be read as f32, f64, i32 or i64 only");
  }
  array.shape.assign(tensor.shape().begin(), tensor.shape().end());
  array.bytes = executor.readBytes(tensor.name());
  return array;
}

}  // namespace megatrain::runtime
