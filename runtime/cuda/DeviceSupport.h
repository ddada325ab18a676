// DeviceSupport.h - whether this build's GPU code runs on a device (docs/cuda.md, "Supported GPUs").
#pragma once

#include <string>

namespace megatrain::runtime::cuda {

// The architectures this binary was compiled for, as CMAKE_CUDA_ARCHITECTURES
// listed them ("80,86,89,90a").
std::string compiledArchitectures();

// The architecture of the code the runtime loaded for this build's kernels on
// the current device, as cudaFuncAttributes::binaryVersion gives it (90 for
// sm_90a machine code on an H200); 0 when none runs there.
int loadedBinaryVersion();

// Throws megatrain::Error naming the device, its compute capability and what
// to do, when the device is older than compute capability 8.0 or when this
// binary holds neither machine code nor PTX that runs on it.
void checkDeviceSupported(int device);

}  // namespace megatrain::runtime::cuda
