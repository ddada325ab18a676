// SigmoidForm.cu - ElementMath.cuh's sigmoidOf (one exp, one division) against the two-branch form
// of the CPU twin (runtime/cpu/ActivationMath.h) compiled the same way (--fmad=false, IEEE division),
// element by element over f32 and f64 inputs: the device kernels' one-exp form must give the bits
// the two branches gave.
#include "SigmoidForm.h"

#include <cuda_runtime.h>

#include "ElementMath.cuh"

namespace megatrain::runtime::cuda::test {
namespace {

template <typename T>
__device__ __forceinline__ T twoBranchSigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + expOf(-x));
  const T e = expOf(x);
  return e / (T(1) + e);
}

template <typename T>
__global__ void bothForms(const T* x, T* oneExp, T* twoBranch, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    oneExp[i] = sigmoidOf(x[i]);
    twoBranch[i] = twoBranchSigmoid(x[i]);
  }
}

template <typename T>
std::string run(const std::vector<T>& x, std::vector<T>& oneExp, std::vector<T>& twoBranch) {
  const size_t n = x.size(), bytes = n * sizeof(T);
  T *dx = nullptr, *d1 = nullptr, *d2 = nullptr;
  cudaError_t status = cudaMalloc(&dx, bytes);
  if (status == cudaSuccess) status = cudaMalloc(&d1, bytes);
  if (status == cudaSuccess) status = cudaMalloc(&d2, bytes);
  if (status == cudaSuccess) status = cudaMemcpy(dx, x.data(), bytes, cudaMemcpyHostToDevice);
  if (status == cudaSuccess) {
    bothForms<<<1024, 256>>>(dx, d1, d2, n);
    status = cudaDeviceSynchronize();
  }
  oneExp.resize(n);
  twoBranch.resize(n);
  if (status == cudaSuccess) status = cudaMemcpy(oneExp.data(), d1, bytes, cudaMemcpyDeviceToHost);
  if (status == cudaSuccess) status = cudaMemcpy(twoBranch.data(), d2, bytes, cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(d1);
  cudaFree(d2);
  return status == cudaSuccess ? std::string() : cudaGetErrorString(status);
}

}  // namespace

std::string sigmoidForms(const std::vector<float>& x, std::vector<float>& oneExp, std::vector<float>& twoBranch) {
  return run(x, oneExp, twoBranch);
}

std::string sigmoidForms(const std::vector<double>& x, std::vector<double>& oneExp,
                         std::vector<double>& twoBranch) {
  return run(x, oneExp, twoBranch);
}

}  // namespace megatrain::runtime::cuda::test
