// Manifest.h - the one list of kernels a plan may name: operand counts and the shape rule of each.
//
// The compiler emits these names (docs/ops.md defines them), every backend
// registers a compute function against each (KernelRegistry.h), and the plan
// validator checks every Kernel step against its entry before anything is
// allocated: operand counts first, then the attribute names, then the shape
// rule on the step's operand shapes and attributes. tests/runtime/KernelManifestTest checks that the CPU
// and CUDA backends implement exactly this list.
#pragma once

#include <string_view>
#include <vector>

#include "megatrain/kernels/KernelCall.h"

namespace megatrain::kernels {

// Throws an Error naming the kernel when the call's operand shapes or
// attributes do not fit the kernel. Dtypes are the backends' to check: what a
// backend computes in differs (the CPU reference is f32/f64 only).
using ShapeRule = void (*)(const KernelCall& call);

struct KernelSpec {
  static constexpr int kAnyInputs = -1;   // a variadic kernel (concat): one or more inputs
  static constexpr int kAnyOutputs = -1;  // one or more outputs (pointwise; rms_norm_grad_add's rule takes 2 or 3)
  const char* name = "";
  int inputs = 0;
  int outputs = 0;
  ShapeRule rule = nullptr;
  // The attributes the kernel reads (docs/ops.md); any other is an error, so a
  // misspelt or stale attribute cannot be ignored silently.
  std::vector<const char*> attributes;
};

// Every kernel, in the order of docs/ops.md's families.
const std::vector<KernelSpec>& kernelManifest();

// The kernel families: each backend has one file per family that registers the
// family's kernels in an add<Family>Kernels(registry) function. X(Family) once each.
#define MEGATRAIN_KERNEL_FAMILIES(X) \
  X(Elementwise) X(Activation) X(Matmul) X(Shape) X(Reduce) X(Softmax) X(Gather) X(LayerNorm) \
  X(RmsNorm) X(CrossEntropy) X(LinearCrossEntropy) X(Where) X(ConcatSlice) X(Cast) X(Attention) X(Rotary) \
  X(Pointwise)

// The entry for `name`, or nullptr.
const KernelSpec* findKernelSpec(std::string_view name);

// Every attribute of `call` is one of spec's, and none is given twice.
void checkKernelAttributes(const KernelSpec& spec, const KernelCall& call);

// Checks call's operand counts and attribute names against spec, then runs its shape rule.
void checkKernelCall(const KernelSpec& spec, const KernelCall& call);

}  // namespace megatrain::kernels
