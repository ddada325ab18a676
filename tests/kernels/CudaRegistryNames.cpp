// CudaRegistryNames.cpp - the CUDA backend's registered kernels, for ManifestTest (builds the table only: no GPU needed).
#include "CudaKernel.h"
#include "RegistryNames.h"

namespace megatrain::kernels {

std::vector<std::string> registryNames() { return runtime::cuda::cudaKernels().names(); }
const char* registryLabel() { return "cuda"; }

}  // namespace megatrain::kernels
