// MatmulTune.cu - random operands and a bitwise comparison for the matmul algorithm choice (MatmulTune.h).
#include "MatmulTune.h"

#include <cuda_bf16.h>

#include "CudaKernel.h"

namespace megatrain::runtime::cuda {
namespace {

constexpr int kThreads = 256;

// A 64-bit mix (splitmix64's finalizer) of seed and index.
__device__ uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1) from the top 24 bits of the mix.
__device__ float uniformAt(uint64_t seed, int64_t i) {
  const uint64_t bits = mix(seed ^ mix(static_cast<uint64_t>(i)));
  return static_cast<float>(bits >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void fillF32(float* data, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    data[i] = uniformAt(seed, i);
}

__global__ void fillBf16(__nv_bfloat16* data, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    data[i] = __float2bfloat16_rn(uniformAt(seed, i));
}

// hi = w rounded to bf16, stored negated; residual = (w - hi) rounded to bf16
// (the difference is exact in f32: hi lies within an ulp of bf16 of w).
__global__ void splitBf16(const float* wide, __nv_bfloat16* negHi, __nv_bfloat16* residual, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float w = wide[i];
    const __nv_bfloat16 hi = __float2bfloat16_rn(w);
    negHi[i] = __hneg(hi);
    residual[i] = __float2bfloat16_rn(w - __bfloat162float(hi));
  }
}

__global__ void plantSpecial(uint16_t* data, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (i < 3)
      data[i] = i == 0 ? 0x7F80 : i == 1 ? 0xFF80 : 0x7FC0;  // +inf, -inf, NaN
    else if (i % 61 == 5)
      data[i] = 0x7F00;  // 2^127
    else if (i % 71 == 11)
      data[i] = 0x7F7F;  // the largest finite bf16
  }
}

__global__ void countDifferent(const uint32_t* a, const uint32_t* b, int64_t n, unsigned long long* counter) {
  unsigned long long local = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    local += a[i] != b[i];
  if (local) atomicAdd(counter, local);
}

unsigned gridOf(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096);
}

}  // namespace

void fillTuningOperand(void* data, int64_t elements, bool bf16, uint64_t seed, cudaStream_t stream) {
  if (elements <= 0) return;
  if (bf16)
    fillBf16<<<gridOf(elements), kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(data), elements, seed);
  else
    fillF32<<<gridOf(elements), kThreads, 0, stream>>>(static_cast<float*>(data), elements, seed);
  MT_CUDA_CHECK(cudaGetLastError());
}

void splitF32ToBf16(const float* wide, void* negHi, void* residual, int64_t elements, cudaStream_t stream) {
  if (elements <= 0) return;
  splitBf16<<<gridOf(elements), kThreads, 0, stream>>>(wide, static_cast<__nv_bfloat16*>(negHi),
                                                       static_cast<__nv_bfloat16*>(residual), elements);
  MT_CUDA_CHECK(cudaGetLastError());
}

void plantSpecialBf16(void* data, int64_t elements, cudaStream_t stream) {
  if (elements <= 0) return;
  plantSpecial<<<gridOf(elements), kThreads, 0, stream>>>(static_cast<uint16_t*>(data), elements);
  MT_CUDA_CHECK(cudaGetLastError());
}

int64_t countDifferentWords(const uint32_t* a, const uint32_t* b, int64_t words, unsigned long long* counter,
                            cudaStream_t stream) {
  MT_CUDA_CHECK(cudaMemsetAsync(counter, 0, sizeof(unsigned long long), stream));
  if (words > 0) {
    countDifferent<<<gridOf(words), kThreads, 0, stream>>>(a, b, words, counter);
    MT_CUDA_CHECK(cudaGetLastError());
  }
  unsigned long long host = 0;
  MT_CUDA_CHECK(cudaMemcpyAsync(&host, counter, sizeof host, cudaMemcpyDeviceToHost, stream));
  MT_CUDA_CHECK(cudaStreamSynchronize(stream));
  return static_cast<int64_t>(host);
}

}  // namespace megatrain::runtime::cuda
