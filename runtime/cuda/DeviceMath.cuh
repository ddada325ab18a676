// DeviceMath.cuh - device-side pieces every kernel family shares: grid-stride indices, strided offsets, warp and block sums.
//
// Sums run in double whatever the element type (as the CPU backend's do), and
// in a fixed tree order, so a launch's result does not depend on scheduling.
#pragma once

#include <cmath>
#include <type_traits>

#include "CudaKernel.h"

namespace megatrain::runtime::cuda {

inline constexpr int kThreads = 256;  // threads per block unless a kernel says otherwise
inline constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ int64_t globalThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t gridThreads() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// 16 bytes of T (4 f32, 2 f64), loaded and stored as one 16-byte access.
template <typename T>
struct alignas(16) Pack {
  T v[16 / sizeof(T)];
};

// stridedOffsets in index type I (uint32_t when the space is narrow, else int64_t).
template <typename I, int N>
__device__ __forceinline__ void stridedOffsetsIn(const StridedSpace<N>& space, I rest, int64_t (&offsets)[N]) {
  I sum[N];
#pragma unroll
  for (int t = 0; t < N; ++t) sum[t] = 0;
  // Constant indices only (unrolled, guarded by rank): the tables stay in the
  // kernel's parameter space instead of moving to local memory.
#pragma unroll
  for (int d = kMaxRank - 1; d >= 0; --d) {
    if (d < space.rank) {
      const I dim = static_cast<I>(space.dims[d]);
      const I index = d == 0 ? rest : rest % dim;
      if (d > 0) rest /= dim;
#pragma unroll
      for (int t = 0; t < N; ++t) sum[t] += index * static_cast<I>(space.strides[t][d]);
    }
  }
#pragma unroll
  for (int t = 0; t < N; ++t) offsets[t] = static_cast<int64_t>(sum[t]);
}

// The N element offsets of linear index i of `space` (innermost dim last):
// in 32-bit arithmetic below space.narrowBelow, where every offset fits.
template <int N>
__device__ __forceinline__ void stridedOffsets(const StridedSpace<N>& space, int64_t i,
                                               int64_t (&offsets)[N]) {
  if (i < space.narrowBelow)
    stridedOffsetsIn<uint32_t>(space, static_cast<uint32_t>(i), offsets);
  else
    stridedOffsetsIn<int64_t>(space, i, offsets);
}

__device__ __forceinline__ double warpSum(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

__device__ __forceinline__ double warpMax(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmax(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// The sum of v over a one-dimensional block (blockDim.x a multiple of 32);
// every thread gets it. `shared` holds 32 doubles.
__device__ __forceinline__ double blockSum(double v, double* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warpSum(v);
  __syncthreads();  // an earlier call may still be reading shared[0]
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = warpSum(lane < warps ? shared[lane] : 0.0);
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  return shared[0];
}

__device__ __forceinline__ double blockMax(double v, double* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warpMax(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = warpMax(lane < warps ? shared[lane] : -INFINITY);
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  return shared[0];
}

// Row kernels give each row a group of G threads: a block (G = kThreads)
// for a long contiguous row, so that many loads are in flight; a warp
// (G = 32) for a shorter one, read coalesced; one thread (G = 1) when rows are
// interleaved `inner` apart, so that adjacent threads read adjacent rows.
// Blocks are kThreads wide; these combine a value across the group (every
// member gets it) and say which rows a thread's group takes.
template <int G>
__device__ __forceinline__ double groupSum(double v) {
  static_assert(G == 1 || G == 32 || G == kThreads, "a group is a thread, a warp or a block");
  if constexpr (G == 1) return v;
  else if constexpr (G == 32) return warpSum(v);
  else {
    __shared__ double shared[32];
    return blockSum(v, shared);
  }
}
template <int G>
__device__ __forceinline__ double groupMax(double v) {
  if constexpr (G == 1) return v;
  else if constexpr (G == 32) return warpMax(v);
  else {
    __shared__ double shared[32];
    return blockMax(v, shared);
  }
}
template <int G>
__device__ __forceinline__ int64_t firstGroup() { return globalThread() / G; }
template <int G>
__device__ __forceinline__ int64_t groupCount() { return gridThreads() / G; }
template <int G>
__device__ __forceinline__ int groupMember() { return G == 1 ? 0 : static_cast<int>(threadIdx.x % G); }

// The group for rows of n elements `inner` apart, and a call of f with it as
// a compile-time constant: f(std::integral_constant<int, G>{}).
template <typename F>
void dispatchRowGroup(int64_t n, int64_t inner, F&& f) {
  if (inner != 1) f(std::integral_constant<int, 1>{});
  else if (n >= 2048) f(std::integral_constant<int, kThreads>{});
  else f(std::integral_constant<int, 32>{});
}

// Records the first step that met bad data; the host reports it.
__device__ __forceinline__ void flagBadData(int* flag, int step) { atomicCAS(flag, 0, step + 1); }

template <typename T>
__device__ __forceinline__ T quietNaN() {
  return static_cast<T>(NAN);
}

}  // namespace megatrain::runtime::cuda
