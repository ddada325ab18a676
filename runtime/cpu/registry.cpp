// registry.cpp - the CPU kernel registry: every family's compute functions, against the kernel manifest.
#include "CpuKernel.h"

namespace megatrain::runtime::cpu {

const CpuKernelRegistry& cpuKernels() {
  static const CpuKernelRegistry registry = [] {
    CpuKernelRegistry r;
    addElementwiseKernels(r);
    addMatmulKernels(r);
    addShapeKernels(r);
    addReduceKernels(r);
    addSoftmaxKernels(r);
    addGatherKernels(r);
    addLayerNormKernels(r);
    addCrossEntropyKernels(r);
    addWhereKernels(r);
    addConcatSliceKernels(r);
    addCastKernels(r);
    addRmsNormKernels(r);
    addActivationKernels(r);
    addAttentionKernels(r);
    addRotaryKernels(r);
    return r;
  }();
  return registry;
}

}  // namespace megatrain::runtime::cpu
