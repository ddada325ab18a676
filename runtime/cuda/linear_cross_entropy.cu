// linear_cross_entropy.cu - linear_ce and linear_ce_grad on the GPU: the output projection and the next-token loss by vocabulary chunks.
//
// hidden [B, T, H] (rows r = (b, t)), weight [V, H], tokens [B, T]: row r's
// target is tokens[r + 1], none at t = T - 1 or when it is ignore_index. The
// [rows, V] logits never exist: per chunk of `chunk` vocabulary rows
// [j0, j1), in the step's scratch,
//   forward   tile = hidden W[j0:j1]^T (cuBLAS GEMM, f32 results; f64 for
//             f64 operands); a warp per row folds the tile row, in one pass,
//             into the row's running max and sum of exponentials (double) and
//             picks the target's logit when it lies in the chunk. For bf16
//             operands (the tile's width a multiple of 4) each lane reads 4
//             logits at once and takes their exponentials in float, adding
//             each 4's sum to its double sum: the fold then runs at the tile's
//             read bandwidth (the double exp per element held it to a quarter
//             of it); f32 and f64 operands keep the double exp per element.
//             After the last chunk a
//             warp per row writes lse = max + log(sum) (0 for rows without a
//             target) and its loss term, and one block adds the terms in a
//             fixed order: loss = their mean (0 when no row counts).
//   backward  the counted rows once (one block); per chunk the tile again,
//             then g = dloss / count (exp(tile - lse) - onehot(target)) (0 on
//             rows without a target), written in the operands' type (bf16 for
//             bf16 operands, as the unfused path casts dlogits before its
//             backward GEMMs; for them in float, 4 elements a thread, where f32
//             and f64 operands take it in double); dhidden (+)= g W[j0:j1] (beta 0 on the first
//             chunk, 1 after: accumulated in stream order, deterministic) and
//             dweight[j0:j1] = g^T hidden.
// Operands: f32 (precision absent or "fp32": CUBLAS_COMPUTE_32F; "tf32":
// CUBLAS_COMPUTE_32F_FAST_TF32), bf16 (fp32 accumulation, f32 results), f64.
// A target outside [0, V) that is not ignore_index flags bad data and makes
// the loss NaN (its gradient rows NaN).
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <string>
#include <type_traits>

#include "DeviceMath.cuh"

namespace megatrain::runtime::cuda {
namespace {

constexpr size_t kAlign = 256;
constexpr int kTotalThreads = 1024;
constexpr int kWarp = 32;

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

int64_t chunkOf(const LinearCeDims& d) { return std::min(d.chunk, d.v); }

size_t resultBytes(const LinearCeDims& d) { return d.results == DType::F64 ? 8 : 4; }
size_t operandBytes(const LinearCeDims& d) { return dtypeBytes(d.operands); }

// Byte offsets in the scratch.
struct Layout {
  size_t tile = 0, grad = 0, max = 0, sum = 0, picked = 0, loss = 0, weight = 0, counted = 0, bytes = 0;
};

Layout layout(const LinearCeDims& d, bool backward) {
  const size_t rows = static_cast<size_t>(d.rows()), tile = rows * static_cast<size_t>(chunkOf(d));
  Layout l;
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t offset = at;
    at += aligned(bytes);
    return offset;
  };
  l.tile = take(tile * resultBytes(d));
  if (backward) {
    // g in the operands' type; f32 and f64 reuse the tile.
    l.grad = d.operands == DType::BF16 ? take(tile * 2) : l.tile;
    l.counted = take(sizeof(double));
  } else {
    l.max = take(rows * sizeof(double));
    l.sum = take(rows * sizeof(double));
    l.picked = take(rows * sizeof(double));
    l.loss = take(rows * sizeof(double));
    l.weight = take(rows * sizeof(double));
  }
  l.bytes = at;
  return l;
}

struct Rows {
  int64_t count = 0, period = 0, vocab = 0;
  bool hasIgnore = false;
  int64_t ignore = 0;
};

Rows rowsOf(const LinearCeDims& d) {
  Rows rows;
  rows.count = d.rows();
  rows.period = d.t;
  rows.vocab = d.v;
  rows.hasIgnore = d.ignore.has_value();
  if (d.ignore) rows.ignore = *d.ignore;
  return rows;
}

enum class RowKind { Skipped, Counted, Bad };

__device__ __forceinline__ RowKind rowKind(const Rows& rows, const int64_t* tokens, int64_t r, int64_t& target) {
  if (r % rows.period == rows.period - 1) return RowKind::Skipped;
  target = tokens[r + 1];
  if (rows.hasIgnore && target == rows.ignore) return RowKind::Skipped;
  return target >= 0 && target < rows.vocab ? RowKind::Counted : RowKind::Bad;
}

template <typename G>
__device__ __forceinline__ G fromDouble(double v) { return static_cast<G>(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 fromDouble<__nv_bfloat16>(double v) {
  return __float2bfloat16_rn(static_cast<float>(v));
}

// ---- kernels ----

__global__ void startKernel(int64_t count, double* max, double* sum, double* picked) {
  for (int64_t r = globalThread(); r < count; r += gridThreads()) {
    max[r] = -INFINITY;
    sum[r] = 0;
    picked[r] = 0;
  }
}

// (max, sum of exp(x - max)) of a and b together.
__device__ __forceinline__ void combine(double& max, double& sum, double otherMax, double otherSum) {
  const double joint = fmax(max, otherMax);
  if (joint == -INFINITY) return;  // both empty
  sum = (max == -INFINITY ? 0.0 : sum * exp(max - joint)) + (otherMax == -INFINITY ? 0.0 : otherSum * exp(otherMax - joint));
  max = joint;
}

// The end of a row's fold: the warp's lanes' (max, sum) combined in a fixed
// butterfly order, then, on lane 0, into row r's running pair, and the
// target's logit picked when it lies in this chunk (row: the tile's row).
template <typename R>
__device__ __forceinline__ void finishRow(double m, double s, int member, const R* row, int64_t r, int64_t target,
                                          int64_t j0, int64_t width, double* max, double* sum, double* picked) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    combine(m, s, __shfl_xor_sync(kFullMask, m, offset), __shfl_xor_sync(kFullMask, s, offset));
  if (member == 0) {
    double runningMax = max[r], runningSum = sum[r];
    combine(runningMax, runningSum, m, s);
    max[r] = runningMax;
    sum[r] = runningSum;
    if (target >= j0 && target < j0 + width) picked[r] = static_cast<double>(row[target - j0]);
  }
}

// Folds tile rows [count, width] (vocabulary rows j0 ..) into max, sum,
// picked; a warp per row, one pass over the row: each lane keeps a running
// (max, sum), then the warp combines them in a fixed butterfly order.
template <typename R>
__global__ void foldKernel(const R* __restrict__ tile, const int64_t* __restrict__ tokens, Rows rows, int64_t j0,
                           int64_t width, double* __restrict__ max, double* __restrict__ sum,
                           double* __restrict__ picked) {
  const int member = groupMember<kWarp>();
  for (int64_t r = firstGroup<kWarp>(); r < rows.count; r += groupCount<kWarp>()) {
    int64_t target = 0;
    if (rowKind(rows, tokens, r, target) != RowKind::Counted) continue;
    const R* row = tile + r * width;
    double m = -INFINITY, s = 0;
    for (int64_t j = member; j < width; j += kWarp) {
      const double x = static_cast<double>(row[j]);
      if (x > m) {
        s = (m == -INFINITY ? 0.0 : s * exp(m - x)) + 1.0;
        m = x;
      } else {
        s += exp(x - m);
      }
    }
    finishRow(m, s, member, row, r, target, j0, width, max, sum, picked);
  }
}

// foldKernel for f32 tiles of a width that is a multiple of 4 (the bf16
// operands' path): each lane reads 4 logits at once, rescales its running sum
// when their max passes its max, and adds their exponentials' float sum to its
// double sum.
__global__ void foldPackedKernel(const float* __restrict__ tile, const int64_t* __restrict__ tokens, Rows rows,
                                 int64_t j0, int64_t width, double* __restrict__ max, double* __restrict__ sum,
                                 double* __restrict__ picked) {
  const int member = groupMember<kWarp>();
  const int64_t packs = width / 4;
  for (int64_t r = firstGroup<kWarp>(); r < rows.count; r += groupCount<kWarp>()) {
    int64_t target = 0;
    if (rowKind(rows, tokens, r, target) != RowKind::Counted) continue;
    const float4* row = reinterpret_cast<const float4*>(tile + r * width);
    float m = -INFINITY;
    double s = 0;
#pragma unroll 4
    for (int64_t j = member; j < packs; j += kWarp) {
      const float4 x = row[j];
      const float top = fmaxf(fmaxf(x.x, x.y), fmaxf(x.z, x.w));
      if (top > m) {
        s = m == -INFINITY ? 0.0 : s * exp(static_cast<double>(m) - top);
        m = top;
      }
      s += static_cast<double>(expf(x.x - m) + expf(x.y - m) + expf(x.z - m) + expf(x.w - m));
    }
    finishRow(static_cast<double>(m), s, member, tile + r * width, r, target, j0, width, max, sum, picked);
  }
}

// lse [count] and the loss terms; a thread per row.
template <typename R>
__global__ void finishRowsKernel(const int64_t* __restrict__ tokens, Rows rows, const double* __restrict__ max,
                                 const double* __restrict__ sum, const double* __restrict__ picked, R* __restrict__ lse,
                                 double* __restrict__ loss, double* __restrict__ weight, int* badData, int step) {
  for (int64_t r = globalThread(); r < rows.count; r += gridThreads()) {
    int64_t target = 0;
    const RowKind kind = rowKind(rows, tokens, r, target);
    if (kind == RowKind::Counted) {
      const double value = max[r] + log(sum[r]);
      lse[r] = static_cast<R>(value);
      loss[r] = value - picked[r];
      weight[r] = 1;
    } else {
      if (kind == RowKind::Bad) flagBadData(badData, step);
      lse[r] = R(0);
      loss[r] = kind == RowKind::Bad ? NAN : 0.0;
      weight[r] = kind == RowKind::Bad ? 1.0 : 0.0;
    }
  }
}

// out [1] = sum(loss) / sum(weight), 0 when no row counts; one block, fixed order.
template <typename R>
__global__ void __launch_bounds__(kTotalThreads) totalKernel(const double* __restrict__ loss,
                                                             const double* __restrict__ weight, int64_t count, R* out) {
  __shared__ double shared[32];
  double total = 0, counted = 0;
  for (int64_t r = threadIdx.x; r < count; r += blockDim.x) {
    total += loss[r];
    counted += weight[r];
  }
  total = blockSum(total, shared);
  counted = blockSum(counted, shared);
  if (threadIdx.x == 0) out[0] = static_cast<R>(counted > 0 ? total / counted : 0.0);
}

__global__ void __launch_bounds__(kTotalThreads) countKernel(const int64_t* __restrict__ tokens, Rows rows,
                                                             double* counted) {
  __shared__ double shared[32];
  double own = 0;
  for (int64_t r = threadIdx.x; r < rows.count; r += blockDim.x) {
    int64_t target = 0;
    own += rowKind(rows, tokens, r, target) == RowKind::Skipped ? 0.0 : 1.0;
  }
  own = blockSum(own, shared);
  if (threadIdx.x == 0) counted[0] = own;
}

// g [count, width] from the tile (g may be the tile itself: each thread reads
// its element before it writes it). Rows over gridDim.y, a row's elements
// over the x threads. The gradient is rounded to R first (the unfused
// dlogits), then to G.
template <typename R, typename G>
__global__ void gradKernel(const R* tile, const int64_t* __restrict__ tokens, Rows rows, int64_t j0, int64_t width,
                           const R* __restrict__ lse, const R* __restrict__ dloss,
                           const double* __restrict__ counted, G* g, int* badData, int step) {
  const double scale = counted[0] > 0 ? static_cast<double>(dloss[0]) / counted[0] : 0.0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = blockIdx.y; r < rows.count; r += gridDim.y) {
    int64_t target = 0;
    const RowKind kind = rowKind(rows, tokens, r, target);
    if (kind == RowKind::Bad && blockIdx.x == 0 && threadIdx.x == 0) flagBadData(badData, step);
    const double rowLse = kind == RowKind::Counted ? static_cast<double>(lse[r]) : 0.0;
    const R* in = tile + r * width;
    G* out = g + r * width;
    for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < width; j += stride) {
      double value = 0;
      if (kind == RowKind::Counted) {
        const double p = exp(static_cast<double>(in[j]) - rowLse);
        value = static_cast<double>(static_cast<R>(scale * (p - (j0 + j == target ? 1.0 : 0.0))));
      } else if (kind == RowKind::Bad) {
        value = NAN;
      }
      out[j] = fromDouble<G>(value);
    }
  }
}

// gradKernel for f32 tiles of a width that is a multiple of 4 and bf16 g:
// a thread takes 4 elements of a row at a time, in float, and writes their 8
// bytes at once.
__global__ void gradPackedKernel(const float* __restrict__ tile, const int64_t* __restrict__ tokens, Rows rows,
                                 int64_t j0, int64_t width, const float* __restrict__ lse,
                                 const float* __restrict__ dloss, const double* __restrict__ counted,
                                 __nv_bfloat16* __restrict__ g, int* badData, int step) {
  const float scale = counted[0] > 0 ? static_cast<float>(static_cast<double>(dloss[0]) / counted[0]) : 0.0f;
  const int64_t packs = width / 4, total = rows.count * packs;
  for (int64_t i = globalThread(); i < total; i += gridThreads()) {
    const int64_t r = i / packs, j = (i - r * packs) * 4;
    int64_t target = 0;
    const RowKind kind = rowKind(rows, tokens, r, target);
    if (kind == RowKind::Bad && j == 0) flagBadData(badData, step);
    const float4 x = reinterpret_cast<const float4*>(tile)[i];
    const float in[4] = {x.x, x.y, x.z, x.w};
    alignas(8) __nv_bfloat16 out[4];
    const float rowLse = kind == RowKind::Counted ? lse[r] : 0.0f;
    for (int k = 0; k < 4; ++k) {
      float value = 0;
      if (kind == RowKind::Counted) value = scale * (expf(in[k] - rowLse) - (j0 + j + k == target ? 1.0f : 0.0f));
      else if (kind == RowKind::Bad) value = NAN;
      out[k] = __float2bfloat16_rn(value);
    }
    reinterpret_cast<uint2*>(g)[i] = *reinterpret_cast<const uint2*>(out);
  }
}

// The grid of gradKernel: enough x blocks for a row (at most 64), rows over y.
dim3 gradGrid(int64_t rows, int64_t width) {
  const int64_t x = std::min<int64_t>((width + kThreads - 1) / kThreads, 64);
  const int64_t y = std::min<int64_t>(rows, 65535);
  return dim3(static_cast<unsigned>(std::max<int64_t>(x, 1)), static_cast<unsigned>(std::max<int64_t>(y, 1)));
}

// ---- launchers ----

int toInt(const Launch& launch, int64_t value, const char* what) {
  if (value > INT_MAX) fail(launch, std::string(what) + " " + std::to_string(value) + " exceeds cuBLAS's int range");
  return static_cast<int>(value);
}

struct GemmTypes {
  cudaDataType operands, results;
  cublasComputeType_t compute;
};

GemmTypes gemmTypes(const Launch& launch, const LinearCeDims& d) {
  if (d.operands == DType::F64) return {CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F};
  if (d.operands == DType::BF16) return {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F};
  const bool tf32 = launch.attrs.getString("precision", "fp32") == "tf32";
  return {CUDA_R_32F, CUDA_R_32F, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
}

// Column-major cuBLAS on row-major tensors: C[m, n] = op(A) op(B) is
// C^T[n, m] = op(B)^T op(A)^T. The scalars are the compute type's.
void gemm(const Launch& launch, const LinearCeDims& d, cublasOperation_t opB, cublasOperation_t opA, int64_t n,
          int64_t m, int64_t k, const void* b, cudaDataType bType, int64_t ldb, const void* a, cudaDataType aType,
          int64_t lda, bool accumulate, void* c, int64_t ldc) {
  const GemmTypes types = gemmTypes(launch, d);
  const double one64 = 1, beta64 = accumulate ? 1 : 0;
  const float one32 = 1, beta32 = accumulate ? 1.0f : 0.0f;
  const bool f64 = d.operands == DType::F64;
  MT_CUBLAS_CHECK(cublasGemmEx(launch.device->cublas, opB, opA, toInt(launch, n, "n"), toInt(launch, m, "m"),
                               toInt(launch, k, "k"), f64 ? static_cast<const void*>(&one64) : &one32, b, bType,
                               toInt(launch, ldb, "ldb"), a, aType, toInt(launch, lda, "lda"),
                               f64 ? static_cast<const void*>(&beta64) : &beta32, c, types.results,
                               toInt(launch, ldc, "ldc"), types.compute, CUBLAS_GEMM_DEFAULT));
}

// tile[rows, width] = hidden W[j0 : j0 + width]^T.
void tileGemm(const Launch& launch, const LinearCeDims& d, int64_t j0, int64_t width, void* tile) {
  const GemmTypes types = gemmTypes(launch, d);
  const char* weight = static_cast<const char*>(launch.in[1].data) + j0 * d.h * operandBytes(d);
  gemm(launch, d, CUBLAS_OP_T, CUBLAS_OP_N, width, d.rows(), d.h, weight, types.operands, d.h, launch.in[0].data,
       types.operands, d.h, false, tile, width);
}

// Whether a chunk of `width` takes the packed fold and gradient: bf16
// operands (f32 tile, bf16 g) and 16-byte rows.
bool packed(const LinearCeDims& d, int64_t width) { return d.operands == DType::BF16 && width % 4 == 0; }

void checkScratch(const Launch& launch, const Layout& l) {
  if (l.bytes > launch.device->scratchBytes) fail(launch, "scratch too small (prepare sized it for another shape)");
}

// One chunk's fold into the rows' running max, sum and picked logit: four
// logits a thread where the chunk is packable (f32 tile of bf16 operands),
// else one.
template <typename R>
void fold(const Launch& launch, const LinearCeDims& d, const R* tile, const int64_t* tokens, const Rows& rows,
          int64_t j0, int64_t width, double* max, double* sum, double* picked) {
  const cudaStream_t stream = launch.device->stream;
  if constexpr (std::is_same_v<R, float>) {
    if (packed(d, width)) {
      foldPackedKernel<<<gridFor(launch, rows.count * kWarp, kThreads), kThreads, 0, stream>>>(
          tile, tokens, rows, j0, width, max, sum, picked);
      return;
    }
  }
  foldKernel<R><<<gridFor(launch, rows.count * kWarp, kThreads), kThreads, 0, stream>>>(tile, tokens, rows, j0,
                                                                                          width, max, sum, picked);
}

// One chunk's logit gradients g = (softmax - onehot) dloss / counted: four a
// thread where the chunk is packable (bf16 g), else one.
template <typename R, typename G>
void chunkGrad(const Launch& launch, const LinearCeDims& d, const R* tile, const int64_t* tokens, const Rows& rows,
               int64_t j0, int64_t width, const R* lse, const R* dloss, const double* counted, G* g) {
  const DeviceContext& device = *launch.device;
  if constexpr (std::is_same_v<G, __nv_bfloat16>) {
    if (packed(d, width)) {
      gradPackedKernel<<<gridFor(launch, d.rows() * width / 4, kThreads), kThreads, 0, device.stream>>>(
          tile, tokens, rows, j0, width, lse, dloss, counted, g, device.badData, launch.step);
      return;
    }
  }
  gradKernel<R, G><<<gradGrid(d.rows(), width), kThreads, 0, device.stream>>>(tile, tokens, rows, j0, width, lse,
                                                                              dloss, counted, g, device.badData,
                                                                              launch.step);
}

template <typename R>
void forward(const Launch& launch, const LinearCeDims& d) {
  const DeviceContext& device = *launch.device;
  const Layout l = layout(d, false);
  checkScratch(launch, l);
  char* scratch = static_cast<char*>(device.scratch);
  R* tile = reinterpret_cast<R*>(scratch + l.tile);
  double* max = reinterpret_cast<double*>(scratch + l.max);
  double* sum = reinterpret_cast<double*>(scratch + l.sum);
  double* picked = reinterpret_cast<double*>(scratch + l.picked);
  double* loss = reinterpret_cast<double*>(scratch + l.loss);
  double* weight = reinterpret_cast<double*>(scratch + l.weight);
  const int64_t* tokens = launch.in[2].as<const int64_t>();
  const Rows rows = rowsOf(d);
  const int64_t chunk = chunkOf(d);
  if (rows.count > 0) {
    startKernel<<<gridFor(launch, rows.count, kThreads), kThreads, 0, device.stream>>>(rows.count, max, sum, picked);
    MT_CHECK_LAUNCH(launch);
    for (int64_t j0 = 0; j0 < d.v && d.h > 0; j0 += chunk) {
      const int64_t width = std::min(chunk, d.v - j0);
      tileGemm(launch, d, j0, width, tile);
      fold(launch, d, tile, tokens, rows, j0, width, max, sum, picked);
      MT_CHECK_LAUNCH(launch);
    }
    finishRowsKernel<R><<<gridFor(launch, rows.count, kThreads), kThreads, 0, device.stream>>>(
        tokens, rows, max, sum, picked, launch.out[1].as<R>(), loss, weight, device.badData, launch.step);
    MT_CHECK_LAUNCH(launch);
  }
  totalKernel<R><<<1, kTotalThreads, 0, device.stream>>>(loss, weight, rows.count, launch.out[0].as<R>());
  MT_CHECK_LAUNCH(launch);
}

template <typename R, typename G>
void backward(const Launch& launch, const LinearCeDims& d) {
  const DeviceContext& device = *launch.device;
  const Layout l = layout(d, true);
  checkScratch(launch, l);
  char* scratch = static_cast<char*>(device.scratch);
  R* tile = reinterpret_cast<R*>(scratch + l.tile);
  G* g = reinterpret_cast<G*>(scratch + l.grad);
  double* counted = reinterpret_cast<double*>(scratch + l.counted);
  const int64_t* tokens = launch.in[2].as<const int64_t>();
  const R* lse = launch.in[3].as<const R>();
  const R* dloss = launch.in[4].as<const R>();
  const GemmTypes types = gemmTypes(launch, d);
  const Rows rows = rowsOf(d);
  const int64_t chunk = chunkOf(d), rowCount = d.rows();
  const size_t hiddenBytes = static_cast<size_t>(rowCount * d.h) * resultBytes(d);
  if (rowCount == 0 || d.h == 0 || d.v == 0) {
    // Nothing to sum: the gradients are zero.
    if (hiddenBytes) MT_CUDA_CHECK(cudaMemsetAsync(launch.out[0].data, 0, hiddenBytes, device.stream));
    const size_t weightBytes = static_cast<size_t>(d.v * d.h) * resultBytes(d);
    if (weightBytes) MT_CUDA_CHECK(cudaMemsetAsync(launch.out[1].data, 0, weightBytes, device.stream));
    return;
  }
  countKernel<<<1, kTotalThreads, 0, device.stream>>>(tokens, rows, counted);
  MT_CHECK_LAUNCH(launch);
  const cudaDataType gType = types.operands;
  char* dweight = static_cast<char*>(launch.out[1].data);
  for (int64_t j0 = 0; j0 < d.v; j0 += chunk) {
    const int64_t width = std::min(chunk, d.v - j0);
    tileGemm(launch, d, j0, width, tile);
    chunkGrad(launch, d, tile, tokens, rows, j0, width, lse, dloss, counted, g);
    MT_CHECK_LAUNCH(launch);
    // dhidden[rows, H] (+)= g[rows, width] W[j0 : j0 + width, H].
    const char* weight = static_cast<const char*>(launch.in[1].data) + j0 * d.h * operandBytes(d);
    gemm(launch, d, CUBLAS_OP_N, CUBLAS_OP_N, d.h, rowCount, width, weight, types.operands, d.h, g, gType, width,
         j0 > 0, launch.out[0].data, d.h);
    // dweight[j0 : j0 + width, H] = g^T hidden.
    gemm(launch, d, CUBLAS_OP_N, CUBLAS_OP_T, d.h, width, rowCount, launch.in[0].data, types.operands, d.h, g, gType,
         width, false, dweight + j0 * d.h * resultBytes(d), d.h);
  }
}

void linearCe(const Launch& launch) {
  const LinearCeDims d = linearCeDims(launch);
  if (d.results == DType::F64) forward<double>(launch, d);
  else forward<float>(launch, d);
}

void linearCeGrad(const Launch& launch) {
  const LinearCeDims d = linearCeDims(launch);
  if (d.operands == DType::F64) backward<double, double>(launch, d);
  else if (d.operands == DType::BF16) backward<float, __nv_bfloat16>(launch, d);
  else backward<float, float>(launch, d);
}

size_t forwardScratch(const Launch& launch) { return layout(linearCeDims(launch), false).bytes; }
size_t backwardScratch(const Launch& launch) { return layout(linearCeDims(launch), true).bytes; }

constexpr const char* kBadTarget = "a target token lies outside [0, V) and is not ignore_index";

}  // namespace

void addLinearCrossEntropyKernels(CudaKernelRegistry& registry) {
  registry.add("linear_ce", {linearCe, forwardScratch, kBadTarget});
  registry.add("linear_ce_grad", {linearCeGrad, backwardScratch, kBadTarget});
}

}  // namespace megatrain::runtime::cuda
