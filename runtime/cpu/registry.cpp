// registry.cpp - the CPU kernel registry: every family's compute functions, against the kernel manifest.
#include "CpuKernel.h"

namespace megatrain::runtime::cpu {

const CpuKernelRegistry& cpuKernels() {
  static const CpuKernelRegistry registry = [] {
    CpuKernelRegistry r;
#define MEGATRAIN_ADD_CPU_FAMILY(Family) add##Family##Kernels(r);
    MEGATRAIN_KERNEL_FAMILIES(MEGATRAIN_ADD_CPU_FAMILY)
#undef MEGATRAIN_ADD_CPU_FAMILY
    return r;
  }();
  return registry;
}

}  // namespace megatrain::runtime::cpu
