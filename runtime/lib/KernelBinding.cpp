// KernelBinding.cpp - resolves a plan's Kernel step into a kernels::KernelCall, for both backends and the validator.
#include "megatrain/runtime/KernelBinding.h"

#include <string>

#include "megatrain/plan/Error.h"

namespace megatrain::runtime {
namespace {

static_assert(static_cast<int>(kernels::DType::F32) == plan::F32 && static_cast<int>(kernels::DType::F64) == plan::F64 &&
                  static_cast<int>(kernels::DType::BF16) == plan::BF16 &&
                  static_cast<int>(kernels::DType::F16) == plan::F16 && static_cast<int>(kernels::DType::I64) == plan::I64 &&
                  static_cast<int>(kernels::DType::I32) == plan::I32 && static_cast<int>(kernels::DType::U8) == plan::U8 &&
                  static_cast<int>(kernels::DType::Bool) == plan::BOOL,
              "kernels::DType numbers its types as plan.proto does");

kernels::Operand operandOf(const plan::Tensor& tensor, const std::function<void*(const plan::Tensor&)>& address) {
  if (tensor.shape_size() > kernels::kMaxRank)
    throw Error("tensor '" + tensor.name() + "' has rank " + std::to_string(tensor.shape_size()) +
                ", the kernels support at most " + std::to_string(kernels::kMaxRank));
  kernels::Operand operand;
  operand.data = address ? address(tensor) : nullptr;
  operand.shape.rank = tensor.shape_size();
  for (int i = 0; i < tensor.shape_size(); ++i) operand.shape.dims[i] = tensor.shape(i);
  operand.dtype = kernelDType(tensor.dtype());
  operand.name = tensor.name().c_str();
  return operand;
}

std::vector<kernels::Attribute> attributesOf(const plan::Kernel& kernel) {
  std::vector<kernels::Attribute> result;
  for (const plan::Attribute& source : kernel.attributes()) {
    kernels::Attribute a;
    a.name = source.name();
    switch (source.value_case()) {
      case plan::Attribute::kI: a.kind = kernels::Attribute::Kind::Int; a.i = source.i(); break;
      case plan::Attribute::kF: a.kind = kernels::Attribute::Kind::Float; a.f = source.f(); break;
      case plan::Attribute::kS: a.kind = kernels::Attribute::Kind::String; a.s = source.s(); break;
      case plan::Attribute::kInts:
        a.kind = kernels::Attribute::Kind::Ints;
        a.ints.assign(source.ints().values().begin(), source.ints().values().end());
        break;
      case plan::Attribute::kFloats:
        a.kind = kernels::Attribute::Kind::Floats;
        a.floats.assign(source.floats().values().begin(), source.floats().values().end());
        break;
      default: throw Error(kernel.kernel() + ": attribute '" + source.name() + "' has no value");
    }
    result.push_back(std::move(a));
  }
  return result;
}

}  // namespace

kernels::DType kernelDType(plan::DType dtype) { return static_cast<kernels::DType>(static_cast<int>(dtype)); }

void bindKernelCall(const plan::Plan& plan, int stepIndex,
                    const std::function<void*(const plan::Tensor&)>& address, kernels::KernelCall& call) {
  const plan::Kernel& kernel = plan.steps(stepIndex).kernel();
  if (kernel.inputs_size() > kernels::kMaxOperands || kernel.outputs_size() > kernels::kMaxOperands)
    throw Error(kernel.kernel() + ": " + std::to_string(kernel.inputs_size()) + " inputs and " +
                std::to_string(kernel.outputs_size()) + " outputs, at most " +
                std::to_string(kernels::kMaxOperands) + " each");
  call.kernel = kernel.kernel().c_str();
  call.step = stepIndex;
  call.attrs = kernels::Attributes(attributesOf(kernel), call.kernel);
  call.numIn = kernel.inputs_size();
  call.numOut = kernel.outputs_size();
  for (int k = 0; k < call.numIn; ++k) call.in[k] = operandOf(plan.tensors(static_cast<int>(kernel.inputs(k))), address);
  for (int k = 0; k < call.numOut; ++k)
    call.out[k] = operandOf(plan.tensors(static_cast<int>(kernel.outputs(k))), address);
}

}  // namespace megatrain::runtime
