// KernelBinding.h - a plan's Kernel step as the kernel layer sees it (megatrain/kernels/KernelCall.h).
#pragma once

#include <functional>

#include "megatrain/kernels/KernelCall.h"
#include "megatrain/plan/plan.pb.h"

namespace megatrain::runtime {

// The kernel layer's mirror of a plan dtype (numbered alike; static_asserted).
kernels::DType kernelDType(plan::DType dtype);

// Fills `call` from step `stepIndex` of `plan` (a Kernel step whose tensor ids
// are valid): kernel name, step, operand shapes, dtypes and names, and the
// attributes. `address` gives each operand's bytes; null (the plan validator)
// leaves every Operand::data null. An operand of rank above kernels::kMaxRank,
// more than kernels::kMaxOperands operands per side, or an attribute without a
// value is an Error.
void bindKernelCall(const plan::Plan& plan, int stepIndex,
                    const std::function<void*(const plan::Tensor&)>& address, kernels::KernelCall& call);

}  // namespace megatrain::runtime
