// RowNorm.cuh - the row plan that rms_norm.cu and layer_norm.cu share: a block per row, the row in registers, 16-byte accesses.
//
// A normalization reads x [rows, d] once and writes y once; its gradient reads
// x and dy once and writes dx once, plus [d]-sized weight sums. To run at HBM
// bandwidth:
// - each block walks rows (grid-stride) and each of its threads owns the same
//   P packs of V contiguous elements in every row (V = 16 bytes / element when
//   d and every operand allow 16-byte accesses, else 1), so a row is loaded
//   once into registers, reduced across the block, and written from them;
// - the per-column weights are loaded once per block, and the per-column
//   gradient sums (dweight, dscale, dbias) are accumulated in registers over
//   the block's rows and written once per block as partials [blocks, d]; a
//   second small kernel adds the partials per column in block order
//   (deterministic, no atomics);
// - the per-element arithmetic runs in the compute type (float for f32
//   operands, double for f64: conversions to and from f64 issue at a fraction
//   of the float rate, a cost paid once per term of a sum, not per
//   operation); every row sum is added in double, within a
//   thread and across the block; the per-column gradient sums accumulate in
//   the compute type over a block's rows (a few dozen at the Llama shapes)
//   and in double across blocks.
// Rows longer than kRowThreadsMax x kRowPacksMax accesses take the files'
// own warp-per-row path.
#pragma once

#include <algorithm>
#include <cstdint>

#include "DeviceMath.cuh"
#include "ElementMath.cuh"

namespace megatrain::runtime::cuda {

// At most 256 threads a block leaves a thread up to 255 registers: the
// gradients at 8 packs of 4 floats hold x, dy and the column sums (96
// values; layer_norm_grad takes 181 registers there, rms_norm's kernels ask
// for two blocks an SM and fit 128). So the register path takes rows of up
// to 256 x 8 accesses: 8,192 f32 elements (4,096 f64, 2,048 when V = 1).
inline constexpr int kRowThreadsMax = kThreads;  // threads per block of a row kernel
inline constexpr int kRowPacksMax = 8;           // packs per thread
inline constexpr int kRowThreadsPerSm = 1024;    // resident row-kernel threads aimed for per SM

// The per-element type: float for f32 rows, double for f64.
template <typename T>
using RowCompute = std::conditional_t<std::is_same_v<T, double>, double, float>;

// How a launch walks its rows.
struct RowPlan {
  int vec = 1;       // elements per access: 16 / sizeof(T), or 1
  int packs = 1;     // accesses per thread: 1, 2, 4 or 8 (a template argument)
  int threads = 32;  // per block, a multiple of 32, at most kRowThreadsMax
  unsigned blocks = 1;
  bool fits = false;  // false: the row is too long for the register path
};

// The plan for rows of d elements of `elementBytes` each, `vec` elements an access.
inline RowPlan planRows(const Launch& launch, int64_t rows, int64_t d, int elementBytes, bool aligned) {
  RowPlan p;
  const int widest = 16 / elementBytes;
  p.vec = aligned && d % widest == 0 ? widest : 1;
  const int64_t accesses = d / p.vec;
  p.fits = false;
  for (int packs = 1; packs <= kRowPacksMax && !p.fits; packs *= 2) {
    const int64_t threads = (accesses + packs - 1) / packs;
    if (threads <= kRowThreadsMax) {
      p.packs = packs;
      p.threads = static_cast<int>(std::max<int64_t>(32, (threads + 31) / 32 * 32));
      p.fits = true;
    }
  }
  const int64_t perSm = std::max(1, kRowThreadsPerSm / p.threads);
  p.blocks = static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>(rows, static_cast<int64_t>(launch.device->smCount) * perSm)));
  return p;
}

// The plan's blocks, fewer when fewer fit on the device at once (registers):
// a block past the resident ones would start only when one ends, and walk its
// rows alone. Scratch sized for p.blocks covers it.
template <typename Kernel>
unsigned residentBlocks(const Launch& launch, Kernel kernel, const RowPlan& p) {
  int perSm = 0;
  MT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernel, p.threads, 0));
  const int64_t resident = static_cast<int64_t>(std::max(1, perSm)) * launch.device->smCount;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(p.blocks, resident)));
}

// True if every pointer is 16-byte aligned.
inline bool aligned16(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// Calls f(std::integral_constant<int, V>{}, std::integral_constant<int, P>{})
// for the plan's vector width (1 or 16 bytes' worth of T) and packs.
template <typename T, typename F>
void dispatchRowPlan(const RowPlan& p, F&& f) {
  constexpr int wide = 16 / sizeof(T);
  auto withPacks = [&](auto v) {
    switch (p.packs) {
      case 1: return f(v, std::integral_constant<int, 1>{});
      case 2: return f(v, std::integral_constant<int, 2>{});
      case 4: return f(v, std::integral_constant<int, 4>{});
      default: return f(v, std::integral_constant<int, 8>{});
    }
  };
  if (p.vec == wide) withPacks(std::integral_constant<int, wide>{});
  else withPacks(std::integral_constant<int, 1>{});
}

// V elements of T, one aligned access.
template <typename T, int V>
struct alignas(sizeof(T) * V) RowPack {
  T v[V];
};

// Loads access k (elements [k V, k V + V)) of a row into c, widened to C.
template <typename T, int V, typename C>
__device__ __forceinline__ void loadPack(const T* row, int64_t k, C (&c)[V]) {
  const RowPack<T, V> pack = reinterpret_cast<const RowPack<T, V>*>(row)[k];
#pragma unroll
  for (int i = 0; i < V; ++i) c[i] = static_cast<C>(pack.v[i]);
}

template <typename T, int V, typename C>
__device__ __forceinline__ void storePack(T* row, int64_t k, const C (&c)[V]) {
  RowPack<T, V> pack;
#pragma unroll
  for (int i = 0; i < V; ++i) pack.v[i] = static_cast<T>(c[i]);
  reinterpret_cast<RowPack<T, V>*>(row)[k] = pack;
}

// Stores access k of a row of Y from c: storePack for Y = T; for Y = uint16_t
// the bf16 bits of each f32 value, rounded as cast rounds (floatToBf16Bits).
template <typename Y, int V, typename C>
__device__ __forceinline__ void storeOut(Y* row, int64_t k, const C (&c)[V]) {
  if constexpr (std::is_same_v<Y, uint16_t>) {
    RowPack<uint16_t, V> pack;
#pragma unroll
    for (int i = 0; i < V; ++i) pack.v[i] = floatToBf16Bits(static_cast<float>(c[i]));
    reinterpret_cast<RowPack<uint16_t, V>*>(row)[k] = pack;
  } else {
    storePack(row, k, c);
  }
}

// The sums of a and b over the block (blockDim.x a multiple of 32); every
// thread gets both. `shared` holds 64 doubles.
__device__ __forceinline__ void blockSum2(double& a, double& b, double* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  a = warpSum(a);
  b = warpSum(b);
  __syncthreads();  // an earlier call may still be reading shared
  if (lane == 0) {
    shared[warp] = a;
    shared[32 + warp] = b;
  }
  __syncthreads();
  if (warp == 0) {
    const double sa = warpSum(lane < warps ? shared[lane] : 0.0);
    const double sb = warpSum(lane < warps ? shared[32 + lane] : 0.0);
    if (lane == 0) {
      shared[0] = sa;
      shared[32] = sb;
    }
  }
  __syncthreads();
  a = shared[0];
  b = shared[32];
}

// Block (kColumnBlock, kColumnBlock), grid ceil(d / kColumnBlock) x sets:
// out[s][j] = sum over b of partial[s][b][j] (partials [sets, blocks, d] in
// PT), added in a fixed tree order per column, rounded to T.
inline constexpr int kColumnBlock = 32;
template <typename PT, typename T>
__global__ void __launch_bounds__(kColumnBlock* kColumnBlock)
    rowPartialsKernel(const PT* __restrict__ partial, T* out0, T* out1, int64_t d, int64_t blocks) {
  __shared__ double sums[kColumnBlock][kColumnBlock + 1];
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kColumnBlock + threadIdx.x;
  const PT* set = partial + static_cast<int64_t>(blockIdx.y) * blocks * d;
  double sum = 0;
  if (j < d)
    for (int64_t b = threadIdx.y; b < blocks; b += kColumnBlock) sum += static_cast<double>(set[b * d + j]);
  sums[threadIdx.y][threadIdx.x] = sum;
  for (int s = kColumnBlock / 2; s > 0; s /= 2) {
    __syncthreads();
    if (threadIdx.y < s) sums[threadIdx.y][threadIdx.x] += sums[threadIdx.y + s][threadIdx.x];
  }
  if (threadIdx.y == 0 && j < d) (blockIdx.y == 0 ? out0 : out1)[j] = static_cast<T>(sums[0][threadIdx.x]);
}

// Launches rowPartialsKernel for `sets` (1 or 2) partial sets.
template <typename PT, typename T>
void reduceRowPartials(const Launch& launch, const PT* partial, T* out0, T* out1, int64_t d, int64_t blocks,
                       unsigned sets) {
  const unsigned columns = static_cast<unsigned>((d + kColumnBlock - 1) / kColumnBlock);
  rowPartialsKernel<PT, T><<<dim3(columns, sets), dim3(kColumnBlock, kColumnBlock), 0, launch.device->stream>>>(
      partial, out0, out1, d, blocks);
  MT_CHECK_LAUNCH(launch);
}

}  // namespace megatrain::runtime::cuda
