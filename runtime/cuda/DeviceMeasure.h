// DeviceMeasure.h - times the GPU's ceilings for a device profile (megatrain-profile).
//
// Plain C++ interface, so that the tool's host code needs no CUDA headers.
// Every CUDA and cuBLAS call is checked; a failure throws std::runtime_error
// with one line naming the call, the error and the file and line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace megatrain::runtime::cuda {

struct DeviceMeasureOptions {
  int matmulSize = 8192;            // square n x n x n products
  size_t copyBytes = size_t(1) << 30;  // per transfer (device copy, h2d, d2h, duplex)
  int runs = 5;                     // timed runs per figure; the best one counts
  int launches = 10000;             // empty kernels for the launch cost
};

struct DeviceFigures {
  std::string name;           // cudaDeviceProp::name
  uint64_t memoryBytes = 0;   // cudaMemGetInfo total
  double matmulFp32 = 0;      // FLOP/s, cublasSgemm under CUBLAS_DEFAULT_MATH (no TF32)
  double matmulTf32 = 0;      // FLOP/s, cublasGemmEx fp32 in/out, CUBLAS_COMPUTE_32F_FAST_TF32
  double matmulBf16 = 0;      // FLOP/s, cublasGemmEx bf16 in/out, CUBLAS_COMPUTE_32F
  double hbmBytesPerS = 0;    // device-to-device cudaMemcpyAsync, read + write counted
  double h2dBytesPerS = 0;    // pinned host -> device
  double d2hBytesPerS = 0;    // device -> pinned host
  double duplexBytesPerS = 0; // both at once on two streams, total bytes over the time of both
  double launchS = 0;         // seconds per empty kernel launch, amortized over `launches`
};

// Throws std::runtime_error when there is no device ("no CUDA device: ...").
DeviceFigures measureDevice(const DeviceMeasureOptions& options);

// Runs `work` on the calling thread while both host links copy without a
// break (`bytes` from pinned host memory to the device and as many back, each
// direction on a stream of its own, from a second thread), as a training
// step's copies run beside the host's AdamW; returns the bytes the links
// moved per second over work's time, both directions counted. The copies'
// errors, and work's exceptions, are thrown once the copies have stopped.
double whileLinksCopy(size_t bytes, const std::function<void()>& work);

}  // namespace megatrain::runtime::cuda
