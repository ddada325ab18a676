// CudaKernel.cpp - the CUDA kernel registry and the host-side helpers every launcher shares.
#include "CudaKernel.h"

#include <cublas_v2.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace megatrain::runtime::cuda {

bool wideIndicesForced() {
  static const bool forced = [] {
    const char* value = std::getenv("MEGATRAIN_CUDA_WIDE_INDEX");
    const std::string text = value ? value : "";
    if (text.empty() || text == "0") return false;
    if (text == "1") return true;
    throw Error("MEGATRAIN_CUDA_WIDE_INDEX='" + text + "' is not 0 or 1");
  }();
  return forced;
}

// ---- the registry ----

const CudaKernelRegistry& cudaKernels() {
  static const CudaKernelRegistry table = [] {
    CudaKernelRegistry t;
#define MEGATRAIN_ADD_CUDA_FAMILY(Family) add##Family##Kernels(t);
    MEGATRAIN_KERNEL_FAMILIES(MEGATRAIN_ADD_CUDA_FAMILY)
#undef MEGATRAIN_ADD_CUDA_FAMILY
    return t;
  }();
  return table;
}

// ---- errors ----

void checkCuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  throw Error(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " +
              cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

void checkCublas(int status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const auto code = static_cast<cublasStatus_t>(status);
  throw Error(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " +
              cublasGetStatusName(code) + " (" + cublasGetStatusString(code) + ")");
}

void checkLaunch(const Launch& launch, const char* file, int line) {
  const cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) return;
  throw Error(std::string(file) + ":" + std::to_string(line) + ": " + launch.kernel + " (step " +
              std::to_string(launch.step) + "): launch failed: " + cudaGetErrorName(status) +
              " (" + cudaGetErrorString(status) + ")");
}

void copyBytes(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  if (bytes == 0 || d == s) return;
  const size_t gap = d > s ? static_cast<size_t>(d - s) : static_cast<size_t>(s - d);
  if (gap >= bytes) {
    MT_CUDA_CHECK(cudaMemcpyAsync(d, s, bytes, cudaMemcpyDefault, stream));
    return;
  }
  // Moving down: copy front to back in pieces of `gap` bytes; moving up: back to front.
  for (size_t done = 0; done < bytes; done += gap) {
    const size_t piece = std::min(gap, bytes - done);
    const size_t at = d < s ? done : bytes - done - piece;
    MT_CUDA_CHECK(cudaMemcpyAsync(d + at, s + at, piece, cudaMemcpyDefault, stream));
  }
}

unsigned gridFor(const Launch& launch, int64_t n, int threads) {
  const int64_t needed = (n + threads - 1) / threads;
  const int64_t full = static_cast<int64_t>(launch.device->smCount) * 16;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(needed, full)));
}

}  // namespace megatrain::runtime::cuda
