// CpuRegistryNames.cpp - the CPU backend's registered kernels, for ManifestTest.
#include "RegistryNames.h"
#include "cpu/CpuKernel.h"

namespace megatrain::kernels {

std::vector<std::string> registryNames() { return runtime::cpu::cpuKernels().names(); }
const char* registryLabel() { return "cpu"; }

}  // namespace megatrain::kernels
