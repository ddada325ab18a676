// DeviceSupport.cu - the check that this build's GPU code runs on a device, before anything is allocated.
//
// A kernel image missing for the device would otherwise surface at the first
// launch of the first step as "no kernel image is available for execution on
// the device", far from its cause. A probe kernel of this file is compiled
// with the same -gencode flags as every other kernel, so asking the runtime
// for its attributes answers for all of them.
#include "DeviceSupport.h"

#include <cuda_runtime.h>

#include "CudaKernel.h"
#include "megatrain/plan/Error.h"

#ifndef MEGATRAIN_CUDA_ARCHS
#error "MEGATRAIN_CUDA_ARCHS is set by runtime/cuda/CMakeLists.txt"
#endif

namespace megatrain::runtime::cuda {
namespace {
__global__ void probeKernel() {}
}  // namespace

std::string compiledArchitectures() { return MEGATRAIN_CUDA_ARCHS; }

int loadedBinaryVersion() {
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, probeKernel) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return attributes.binaryVersion;
}

void checkDeviceSupported(int device) {
  cudaDeviceProp prop{};
  MT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  const std::string capability = std::to_string(prop.major) + "." + std::to_string(prop.minor);
  const std::string what = "cuda backend: device " + std::to_string(device) + " ('" + prop.name +
                           "', compute capability " + capability + ")";
  if (prop.major < 8)
    throw Error(what + " is older than the CUDA backend supports: it needs compute capability 8.0 or "
                       "newer (Ampere, Ada, Hopper and later); the CPU backend (--backend cpu) runs anywhere");
  cudaFuncAttributes attributes{};
  const cudaError_t status = cudaFuncGetAttributes(&attributes, probeKernel);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // clear it: the error is ours to report
    throw Error(what + ": this binary holds GPU code for " + compiledArchitectures() +
                " only, none of which runs here (" + cudaGetErrorString(status) +
                "); rebuild with -DCMAKE_CUDA_ARCHITECTURES=" + std::to_string(prop.major) +
                std::to_string(prop.minor));
  }
}

}  // namespace megatrain::runtime::cuda
