// attention_gemm.cu - attention and attention_grad on f32 tensors as cuBLAS GEMMs plus row kernels, chunked into a fixed workspace.
//
// The query rows of one kv head's group (Hq / Hkv query heads, adjacent in q)
// all read the same k and v, so a chunk is `heads` kv heads (every query head
// of their groups) by `rows` query rows, and every product is one
// strided-batched GEMM over the chunk's kv heads; k and v are never copied
// per query head. Per chunk, in the scratch workspace:
//   forward   S = scale Q K^T (f32); a warp per row takes the max and the
//             sum of exp over the visible keys, writes lse and
//             P = exp(S - lse) (0 where masked); Y = P V.
//   backward  S = scale Q K^T and dP = dY V^T; a warp per row computes
//             delta = dy . y, P = exp(S - lse) from the saved lse and
//             dS = P (dP - delta); then dV += P^T dY, dQ = scale dS K,
//             dK += scale dS^T Q. A GEMM's inner dimension over the group's
//             query rows sums dK and dV over its query heads; dk and dv are
//             zeroed first and accumulated with beta = 1 in stream order, so
//             the result is deterministic and needs no atomics.
// Causal: the query rows are cut into blocks of kAttentionCausalRowBlock and
// a block's products stop at min(block end, Skv) keys (the last key its last
// row sees); the row kernels zero the masked probabilities inside a block.
// A row sees at least key 0 (Skv > 0 on this path), so no row is fully masked.
// Precision (the step's `precision` attribute): fp32 GEMMs in
// CUBLAS_COMPUTE_32F, tf32 in CUBLAS_COMPUTE_32F_FAST_TF32, bf16 with the
// chunk's q, k, v (and dy) rounded to bf16 in the workspace, P and dS written
// as bf16 by the row kernels, fp32 accumulation and f32 results. Softmax
// statistics are f32 per lane with the warp's sums in double.
// Traffic: the row kernels read each score once (a row of up to
// kCachedKeys keys is held in registers between its statistics and its P;
// masked keys are never read) as 16-byte loads, and write P (and dS) as 8-
// or 16-byte stores; the bf16 copies of q, k, v, dy move 8 elements a thread.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "AttentionGemm.h"
#include "DeviceMath.cuh"

namespace megatrain::runtime::cuda {
namespace {

constexpr size_t kAlign = 256;
constexpr int kBuffers = 8;

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Byte offsets of one chunk's buffers in the workspace (0-sized ones unused).
struct Workspace {
  size_t scores = 0, dp = 0, pb = 0, dsb = 0, qb = 0, dyb = 0, kb = 0, vb = 0, bytes = 0;
};

// `chunkRows` query rows (over all heads of the chunk) and `heads` kv heads.
Workspace layout(int64_t chunkRows, int64_t heads, const AttentionShape& s, AttentionPrecision precision,
                 bool backward) {
  const bool bf16 = precision == AttentionPrecision::Bf16;
  const size_t rowsByKeys = static_cast<size_t>(chunkRows) * static_cast<size_t>(s.skv);
  const size_t rowsByDim = static_cast<size_t>(chunkRows) * static_cast<size_t>(s.d);
  const size_t headsByKeys = static_cast<size_t>(heads) * static_cast<size_t>(s.skv) * static_cast<size_t>(s.d);
  Workspace w;
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t offset = at;
    at += aligned(bytes);
    return offset;
  };
  w.scores = take(rowsByKeys * 4);
  if (backward) w.dp = take(rowsByKeys * 4);
  if (bf16) {
    w.pb = take(rowsByKeys * 2);
    if (backward) w.dsb = take(rowsByKeys * 2);
    w.qb = take(rowsByDim * 2);
    if (backward) w.dyb = take(rowsByDim * 2);
    w.kb = take(headsByKeys * 2);
    w.vb = take(headsByKeys * 2);
  }
  w.bytes = at;
  return w;
}

// Which keys row x of a chunk sees and how many its GEMMs computed.
struct RowMap {
  int64_t h0, group, rows, i0, sq, skv, block;
  bool causal;

  // The row's index in q, y, lse: chunk rows run [kv head][query head of its group][query i0 + r].
  __device__ __forceinline__ int64_t global(int64_t x) const {
    const int64_t perHead = group * rows;
    const int64_t head = x / perHead, rest = x % perHead;
    return ((h0 + head) * group + rest / rows) * sq + i0 + rest % rows;
  }

  __device__ __forceinline__ void extent(int64_t x, int64_t& visible, int64_t& computed) const {
    if (!causal) {
      visible = computed = skv;
      return;
    }
    const int64_t i = i0 + x % rows;
    const int64_t start = i0 + (i - i0) / block * block;
    const int64_t end = min(start + block, i0 + rows);
    visible = min(i + 1, skv);
    computed = min(end, skv);
  }
};

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

__device__ __forceinline__ uint32_t packBf16(float lo, float hi) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);  // lo in the low half
  return *reinterpret_cast<const uint32_t*>(&pair);
}

// 8 f32 at src (16-byte aligned) as 8 bf16 at dst (16-byte aligned): two 16-byte loads, one store.
__device__ __forceinline__ void eightToBf16(const float* __restrict__ src, __nv_bfloat16* __restrict__ dst) {
  const float4 a = reinterpret_cast<const float4*>(src)[0], b = reinterpret_cast<const float4*>(src)[1];
  *reinterpret_cast<uint4*>(dst) =
      make_uint4(packBf16(a.x, a.y), packBf16(a.z, a.w), packBf16(b.x, b.y), packBf16(b.z, b.w));
}

// dst[e] = bf16(src[e]), e < n; kVector: 8 a thread (src, dst 16-byte aligned, n % 8 == 0).
template <bool kVector>
__global__ void toBf16Kernel(const float* __restrict__ src, __nv_bfloat16* __restrict__ dst, int64_t n) {
  if constexpr (kVector) {
    for (int64_t e = globalThread() * 8; e < n; e += gridThreads() * 8) eightToBf16(src + e, dst + e);
  } else {
    for (int64_t e = globalThread(); e < n; e += gridThreads()) dst[e] = __float2bfloat16_rn(src[e]);
  }
}

// dst [chunk rows, d] <- the chunk's rows of src [B * Hq * Sq, d]; kVector:
// 8 elements a thread (d % 8 == 0, src and dst 16-byte aligned), so the row
// map's divisions run once per 8.
template <bool kVector>
__global__ void rowsToBf16Kernel(const float* __restrict__ src, __nv_bfloat16* __restrict__ dst, RowMap map,
                                 int64_t count, int64_t d) {
  if constexpr (kVector) {
    const int64_t perRow = d / 8;
    for (int64_t e = globalThread(); e < count * perRow; e += gridThreads()) {
      const int64_t x = e / perRow, c = (e % perRow) * 8;
      eightToBf16(src + map.global(x) * d + c, dst + x * d + c);
    }
  } else {
    for (int64_t e = globalThread(); e < count * d; e += gridThreads())
      dst[e] = __float2bfloat16_rn(src[map.global(e / d) * d + e % d]);
  }
}

// The row kernels give each chunk row a warp (no block-wide barriers per
// row; 8 rows in flight per block) and read the scores as float4 when the row pitch skv is a multiple
// of 4 (the workspace buffers are 256-byte aligned, so every row is then
// 16-byte aligned). The scores of key j sit in lane (j / 4) % 32's slot
// j / 128. Per lane statistics are f32; the warp combines them in double.
constexpr int kRowWarps = kThreads / 32;

// Four scores of a row from j (j % 4 == 0), -inf past `visible`.
__device__ __forceinline__ float4 visibleFour(const float* row, int64_t j, int64_t visible) {
  float4 v = *reinterpret_cast<const float4*>(row + j);
  if (j + 4 > visible) {
    v.x = j < visible ? v.x : -INFINITY;
    v.y = j + 1 < visible ? v.y : -INFINITY;
    v.z = j + 2 < visible ? v.z : -INFINITY;
    v.w = -INFINITY;  // j + 3 >= visible
  }
  return v;
}

// Folds s into the running (top, sum) of exp(s - top).
__device__ __forceinline__ void online(float s, float& top, float& sum) {
  if (s > top) {
    sum = sum * expf(top - s) + 1.0f;
    top = s;
  } else if (s != -INFINITY) {
    sum += expf(s - top);
  }
}

// The row's log-sum-exp from every lane's (top, sum).
__device__ __forceinline__ float warpLse(float top, float sum) {
  const double rowTop = warpMax(top);
  const double total = warpSum(top == -INFINITY ? 0.0 : sum * exp(static_cast<double>(top) - rowTop));
  return static_cast<float>(rowTop + log(total));
}

// P for key j of a row: exp(s - lse), 0 where masked.
__device__ __forceinline__ float prob(float s, int64_t j, int64_t visible, float rowLse) {
  return j < visible ? expf(s - rowLse) : 0.0f;
}

// Writes P for keys j .. j+3 (j % 4 == 0): bf16 as one 8-byte store, or f32 in place as one 16-byte store.
template <bool kBf16>
__device__ __forceinline__ void storeFour(float* srow, __nv_bfloat16* prow, int64_t j, float4 p) {
  if constexpr (kBf16) *reinterpret_cast<uint2*>(prow + j) = make_uint2(packBf16(p.x, p.y), packBf16(p.z, p.w));
  else *reinterpret_cast<float4*>(srow + j) = p;
}

// A warp per chunk row: lse = logsumexp of the visible scores, P = exp(S - lse).
// kSlots > 0 (skv % 4 == 0 and skv <= 128 kSlots): the row's visible
// scores are read once, into registers, then P written; kSlots == 0: any
// row, element by element, the scores read twice (a running max and sum).
template <bool kBf16, int kSlots>
__global__ void __launch_bounds__(kThreads, 2) softmaxRowsKernel(float* __restrict__ scores,
                                                              __nv_bfloat16* __restrict__ pb,
                                                              float* __restrict__ lse, RowMap map, int64_t count) {
  const int lane = threadIdx.x & 31;
  for (int64_t x = globalThread() / 32; x < count; x += gridThreads() / 32) {
    int64_t visible, computed;
    map.extent(x, visible, computed);
    float* row = scores + x * map.skv;
    __nv_bfloat16* prow = pb + x * map.skv;
    float top = -INFINITY, sum = 0;
    if constexpr (kSlots > 0) {
      // The max first, then the sum of exp(s - max): independent exps, no rescaling.
      float4 cache[kSlots];
#pragma unroll
      for (int t = 0; t < kSlots; ++t) {
        const int64_t j = (static_cast<int64_t>(t) * 32 + lane) * 4;
        cache[t] = j < visible ? visibleFour(row, j, visible) : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
        top = fmaxf(top, fmaxf(fmaxf(cache[t].x, cache[t].y), fmaxf(cache[t].z, cache[t].w)));
      }
      const float rowTop = static_cast<float>(warpMax(top));  // finite: key 0 is visible
#pragma unroll
      for (int t = 0; t < kSlots; ++t)
        sum += (expf(cache[t].x - rowTop) + expf(cache[t].y - rowTop)) +
               (expf(cache[t].z - rowTop) + expf(cache[t].w - rowTop));  // exp(-inf) = 0
      const float rowLse = static_cast<float>(static_cast<double>(rowTop) + log(warpSum(sum)));
      const int64_t whole = computed / 4 * 4;
#pragma unroll
      for (int t = 0; t < kSlots; ++t) {
        const int64_t j = (static_cast<int64_t>(t) * 32 + lane) * 4;
        const float4 c = cache[t];
        const float4 p = make_float4(prob(c.x, j, visible, rowLse), prob(c.y, j + 1, visible, rowLse),
                                     prob(c.z, j + 2, visible, rowLse), prob(c.w, j + 3, visible, rowLse));
        if (j < whole) {
          storeFour<kBf16>(row, prow, j, p);
        } else if (j < computed) {  // the row's last, partial four (computed % 4 keys)
#pragma unroll
          for (int u = 0; u < 3; ++u) {
            if (j + u >= computed) break;
            const float pu = u == 0 ? p.x : u == 1 ? p.y : p.z;
            if constexpr (kBf16) prow[j + u] = __float2bfloat16_rn(pu);
            else row[j + u] = pu;
          }
        }
      }
      if (lane == 0) lse[map.global(x)] = rowLse;
    } else {
      for (int64_t j = lane; j < visible; j += 32) online(row[j], top, sum);
      const float rowLse = warpLse(top, sum);
      for (int64_t j = lane; j < computed; j += 32) {
        const float p = j < visible ? expf(row[j] - rowLse) : 0.0f;
        if constexpr (kBf16) prow[j] = __float2bfloat16_rn(p);
        else row[j] = p;
      }
      if (lane == 0) lse[map.global(x)] = rowLse;
    }
  }
}

// A warp per chunk row: delta = dy . y, P = exp(S - lse), dS = P (dP - delta).
// kVector: skv % 4 == 0, d % 4 == 0 and y, dy 16-byte aligned: every
// operand moves as 16-byte (f32) and 8-byte (bf16) accesses.
template <bool kBf16, bool kVector>
__global__ void __launch_bounds__(kThreads) gradRowsKernel(float* __restrict__ scores, float* __restrict__ dp,
                                                           __nv_bfloat16* __restrict__ pb,
                                                           __nv_bfloat16* __restrict__ dsb,
                                                           const float* __restrict__ y, const float* __restrict__ dy,
                                                           const float* __restrict__ lse, RowMap map, int64_t count,
                                                           int64_t d) {
  const int lane = threadIdx.x & 31;
  for (int64_t x = globalThread() / 32; x < count; x += gridThreads() / 32) {
    const int64_t g = map.global(x);
    double partial = 0;
    if constexpr (kVector) {
      for (int64_t c = lane * 4; c < d; c += 128) {
        const float4 a = *reinterpret_cast<const float4*>(dy + g * d + c);
        const float4 b = *reinterpret_cast<const float4*>(y + g * d + c);
        partial += static_cast<double>(a.x) * b.x + static_cast<double>(a.y) * b.y +
                   static_cast<double>(a.z) * b.z + static_cast<double>(a.w) * b.w;
      }
    } else {
      for (int64_t c = lane; c < d; c += 32)
        partial += static_cast<double>(dy[g * d + c]) * static_cast<double>(y[g * d + c]);
    }
    const double delta = warpSum(partial);
    const float rowLse = lse[g];
    int64_t visible, computed;
    map.extent(x, visible, computed);
    float* srow = scores + x * map.skv;
    float* dprow = dp + x * map.skv;
    __nv_bfloat16* prow = pb + x * map.skv;
    __nv_bfloat16* dsrow = dsb + x * map.skv;
    auto grad = [&](float p, float dpj) { return static_cast<float>(p * (static_cast<double>(dpj) - delta)); };
    int64_t from = 0;
    if constexpr (kVector) {
      const int64_t whole = computed / 4 * 4;
      for (int64_t j = lane * 4; j < whole; j += 128) {
        float4 p = make_float4(0, 0, 0, 0);
        if (j < visible) {  // fully masked fours are zeros: their scores are never read
          const float4 sv = *reinterpret_cast<const float4*>(srow + j);
          p = make_float4(prob(sv.x, j, visible, rowLse), prob(sv.y, j + 1, visible, rowLse),
                          prob(sv.z, j + 2, visible, rowLse), prob(sv.w, j + 3, visible, rowLse));
        }
        const float4 dv = *reinterpret_cast<const float4*>(dprow + j);
        const float4 ds = make_float4(grad(p.x, dv.x), grad(p.y, dv.y), grad(p.z, dv.z), grad(p.w, dv.w));
        if constexpr (kBf16) {
          *reinterpret_cast<uint2*>(prow + j) = make_uint2(packBf16(p.x, p.y), packBf16(p.z, p.w));
          *reinterpret_cast<uint2*>(dsrow + j) = make_uint2(packBf16(ds.x, ds.y), packBf16(ds.z, ds.w));
        } else {
          *reinterpret_cast<float4*>(srow + j) = p;
          *reinterpret_cast<float4*>(dprow + j) = ds;
        }
      }
      from = whole;
    }
    for (int64_t j = from + lane; j < computed; j += 32) {
      const float p = j < visible ? expf(srow[j] - rowLse) : 0.0f;
      const float ds = grad(p, dprow[j]);
      if constexpr (kBf16) {
        prow[j] = __float2bfloat16_rn(p);
        dsrow[j] = __float2bfloat16_rn(ds);
      } else {
        srow[j] = p;
        dprow[j] = ds;
      }
    }
  }
}

int toInt(const Launch& launch, int64_t value, const char* what) {
  if (value > INT_MAX) fail(launch, std::string(what) + " " + std::to_string(value) + " exceeds cuBLAS's int range");
  return static_cast<int>(value);
}

// Row-major C[m, n] = alpha op(A) op(B) + beta C, `count` times with the given
// element strides; lda/ldb/ldc are the stored matrices' row pitches. cuBLAS
// is column-major, so it computes C^T = op(B)^T op(A)^T.
struct Gemm {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1, beta = 0;
  const void* a = nullptr;
  int64_t lda = 0, strideA = 0;
  const void* b = nullptr;
  int64_t ldb = 0, strideB = 0;
  float* c = nullptr;
  int64_t ldc = 0, strideC = 0;
  int64_t count = 1;
};

void gemm(const Launch& launch, AttentionPrecision precision, const Gemm& g) {
  const cudaDataType operands = precision == AttentionPrecision::Bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute =
      precision == AttentionPrecision::Tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  MT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      launch.device->cublas, g.transB ? CUBLAS_OP_T : CUBLAS_OP_N, g.transA ? CUBLAS_OP_T : CUBLAS_OP_N,
      toInt(launch, g.n, "n"), toInt(launch, g.m, "m"), toInt(launch, g.k, "k"), &g.alpha, g.b, operands,
      toInt(launch, g.ldb, "ldb"), g.strideB, g.a, operands, toInt(launch, g.lda, "lda"), g.strideA, &g.beta, g.c,
      CUDA_R_32F, toInt(launch, g.ldc, "ldc"), g.strideC, toInt(launch, g.count, "batch count"), compute,
      CUBLAS_GEMM_DEFAULT));
}

// One GEMM row block of a chunk: query head `gq` of each kv head, query rows
// [a, a + m) (m = group * sq when the whole group is one block), keys [0, keys).
struct RowBlock {
  int64_t gq, a, m, keys;
};

std::vector<RowBlock> rowBlocks(const AttentionShape& s, int64_t i0, int64_t rows) {
  std::vector<RowBlock> blocks;
  const int64_t group = s.group();
  if (!s.causal && rows == s.sq) {
    blocks.push_back({0, 0, group * s.sq, s.skv});
    return blocks;
  }
  const int64_t step = s.causal ? kAttentionCausalRowBlock : rows;
  for (int64_t gq = 0; gq < group; ++gq)
    for (int64_t a = i0; a < i0 + rows; a += step) {
      const int64_t end = std::min(a + step, i0 + rows);
      blocks.push_back({gq, a, end - a, s.causal ? std::min(end, s.skv) : s.skv});
    }
  return blocks;
}

// Where a chunk's operands lie: q-shaped f32 tensors in place (row pitch d,
// kv-head stride group * sq * d), or their bf16 copies in the workspace
// (kv-head stride group * rows * d); k, v in place or copied (stride skv * d).
struct Chunk {
  const AttentionShape* s;
  int64_t h0, heads, i0, rows;
  bool bf16;

  RowMap map() const {
    return {h0, s->group(), rows, i0, s->sq, s->skv, kAttentionCausalRowBlock, s->causal};
  }
  int64_t count() const { return heads * s->group() * rows; }
  // Element offset of a block's first row in a q-shaped tensor, and the stride between kv heads.
  int64_t globalRow(const RowBlock& b) const { return ((h0 * s->group() + b.gq) * s->sq + b.a) * s->d; }
  int64_t globalStride() const { return s->group() * s->sq * s->d; }
  // Row index of a block's first row among the chunk's rows, and the stride between kv heads.
  int64_t chunkRow(const RowBlock& b) const { return b.gq * rows + (b.a - i0); }
  int64_t chunkStride() const { return s->group() * rows; }

  // A q-shaped operand of the block: f32 in place or its bf16 copy.
  const void* rowsOf(const float* global, const void* copy, const RowBlock& b) const {
    if (bf16) return static_cast<const __nv_bfloat16*>(copy) + chunkRow(b) * s->d;
    return global + globalRow(b);
  }
  int64_t rowsStride() const { return bf16 ? chunkStride() * s->d : globalStride(); }
  const void* keysOf(const float* global, const void* copy) const {
    if (bf16) return copy;
    return global + h0 * s->skv * s->d;
  }
};

void convertKeys(const Launch& launch, const float* src, void* dst, const Chunk& c) {
  const int64_t n = c.heads * c.s->skv * c.s->d;
  const float* from = src + c.h0 * c.s->skv * c.s->d;
  __nv_bfloat16* to = static_cast<__nv_bfloat16*>(dst);
  if (n % 8 == 0 && aligned16(from) && aligned16(to))
    toBf16Kernel<true><<<gridFor(launch, n / 8, kThreads), kThreads, 0, launch.device->stream>>>(from, to, n);
  else
    toBf16Kernel<false><<<gridFor(launch, n, kThreads), kThreads, 0, launch.device->stream>>>(from, to, n);
  MT_CHECK_LAUNCH(launch);
}

void convertRows(const Launch& launch, const float* src, void* dst, const Chunk& c) {
  const int64_t n = c.count() * c.s->d;
  __nv_bfloat16* to = static_cast<__nv_bfloat16*>(dst);
  cudaStream_t stream = launch.device->stream;
  if (c.s->d % 8 == 0 && aligned16(src) && aligned16(to))
    rowsToBf16Kernel<true><<<gridFor(launch, n / 8, kThreads), kThreads, 0, stream>>>(src, to, c.map(), c.count(),
                                                                                     c.s->d);
  else
    rowsToBf16Kernel<false><<<gridFor(launch, n, kThreads), kThreads, 0, stream>>>(src, to, c.map(), c.count(),
                                                                                  c.s->d);
  MT_CHECK_LAUNCH(launch);
}

struct Prepared {
  AttentionPrecision precision;
  AttentionChunking plan;
  Workspace w;
  char* base;
};

Prepared prepare(const Launch& launch, const AttentionShape& s, bool backward) {
  Prepared p;
  p.precision = attentionPrecision(launch);
  p.plan = attentionGemmPlan(s, p.precision, backward);
  if (p.plan.bytes == 0) fail(launch, "the GEMM path cannot take this shape");
  if (p.plan.bytes > launch.device->scratchBytes)
    fail(launch, "scratch too small (prepare sized it for another shape)");
  p.w = layout(p.plan.heads * s.group() * p.plan.rows, p.plan.heads, s, p.precision, backward);
  p.base = static_cast<char*>(launch.device->scratch);
  return p;
}

// Calls f(chunk) for every chunk, in order.
template <typename F>
void forEachChunk(const AttentionShape& s, const Prepared& p, F&& f) {
  const int64_t heads = s.batch * s.kvHeads;
  for (int64_t h0 = 0; h0 < heads; h0 += p.plan.heads)
    for (int64_t i0 = 0; i0 < s.sq; i0 += p.plan.rows)
      f(Chunk{&s, h0, std::min(p.plan.heads, heads - h0), i0, std::min(p.plan.rows, s.sq - i0),
              p.precision == AttentionPrecision::Bf16});
}

// Blocks for `count` rows, a warp each.
unsigned rowGrid(const Launch& launch, int64_t count) {
  const int64_t most = static_cast<int64_t>(launch.device->smCount) * 8;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min((count + kRowWarps - 1) / kRowWarps, most)));
}

// Score rows of this many keys or fewer stay in registers in the softmax (16 float4 a lane).
constexpr int kCachedSlots = 16;
constexpr int64_t kCachedKeys = int64_t{kCachedSlots} * 128;

template <bool kBf16>
void launchSoftmaxRows(const Launch& launch, float* scores, void* pb, float* lse, const Chunk& c) {
  const unsigned grid = rowGrid(launch, c.count());
  __nv_bfloat16* p = static_cast<__nv_bfloat16*>(pb);
  cudaStream_t stream = launch.device->stream;
  const bool vector = c.s->skv % 4 == 0 && aligned16(scores) && (!kBf16 || aligned16(p));
  if (vector && c.s->skv <= kCachedKeys)
    softmaxRowsKernel<kBf16, kCachedSlots><<<grid, kThreads, 0, stream>>>(scores, p, lse, c.map(), c.count());
  else
    softmaxRowsKernel<kBf16, 0><<<grid, kThreads, 0, stream>>>(scores, p, lse, c.map(), c.count());
  MT_CHECK_LAUNCH(launch);
}

template <bool kBf16>
void launchGradRows(const Launch& launch, float* scores, float* dp, void* pb, void* dsb, const float* y,
                    const float* dy, const float* lse, const Chunk& c) {
  const unsigned grid = rowGrid(launch, c.count());
  __nv_bfloat16 *p = static_cast<__nv_bfloat16*>(pb), *ds = static_cast<__nv_bfloat16*>(dsb);
  cudaStream_t stream = launch.device->stream;
  const bool vector = c.s->skv % 4 == 0 && c.s->d % 4 == 0 && aligned16(scores) && aligned16(dp) && aligned16(y) &&
                      aligned16(dy) && (!kBf16 || (aligned16(p) && aligned16(ds)));
  if (vector)
    gradRowsKernel<kBf16, true><<<grid, kThreads, 0, stream>>>(scores, dp, p, ds, y, dy, lse, c.map(), c.count(),
                                                              c.s->d);
  else
    gradRowsKernel<kBf16, false><<<grid, kThreads, 0, stream>>>(scores, dp, p, ds, y, dy, lse, c.map(), c.count(),
                                                               c.s->d);
  MT_CHECK_LAUNCH(launch);
}

}  // namespace

AttentionPrecision attentionPrecision(const Launch& launch) {
  const std::string_view p = launch.attrs.getString("precision", "fp32");
  if (p == "fp32") return AttentionPrecision::Fp32;
  if (p == "tf32") return AttentionPrecision::Tf32;
  if (p == "bf16") return AttentionPrecision::Bf16;
  fail(launch, "precision '" + std::string(p) + "' is not fp32, tf32 or bf16");
}

size_t attentionWorkspaceBudget() {
  if (const char* text = std::getenv("MEGATRAIN_ATTENTION_WORKSPACE")) {
    const unsigned long long bytes = std::strtoull(text, nullptr, 10);
    if (bytes > 0 && bytes < kAttentionWorkspaceBytes) return static_cast<size_t>(bytes);
  }
  return kAttentionWorkspaceBytes;
}

AttentionChunking attentionGemmPlan(const AttentionShape& s, AttentionPrecision precision, bool backward) {
  AttentionChunking plan;
  const int64_t heads = s.batch * s.kvHeads;
  if (heads <= 0 || s.qHeads <= 0 || s.sq <= 0 || s.skv <= 0 || s.d <= 0 || s.qHeads % s.kvHeads != 0) return plan;
  const size_t budget = attentionWorkspaceBudget();
  const int64_t group = s.group();
  auto bytes = [&](int64_t h, int64_t rows) { return layout(h * group * rows, h, s, precision, backward).bytes; };
  if (bytes(1, s.sq) <= budget) {
    // Whole groups: as many kv heads as fit (alignment adds < kBuffers * kAlign).
    const size_t perHead = bytes(1, s.sq);
    const size_t usable = budget > kBuffers * kAlign ? budget - kBuffers * kAlign : perHead;
    int64_t h = std::clamp<int64_t>(static_cast<int64_t>(usable / perHead), 1, heads);
    while (h > 1 && bytes(h, s.sq) > budget) --h;
    plan.heads = h;
    plan.rows = s.sq;
  } else {
    // One kv head, its group's query rows a slice at a time.
    const size_t fixed = bytes(1, 0);  // the kv head's bf16 copies
    if (fixed >= budget) return plan;
    const size_t perRow = bytes(1, 1) - fixed;  // at least one row's share
    int64_t rows = std::clamp<int64_t>(static_cast<int64_t>((budget - fixed) / perRow), 1, s.sq);
    if (s.causal && rows > kAttentionCausalRowBlock) rows = rows / kAttentionCausalRowBlock * kAttentionCausalRowBlock;
    while (rows > 1 && bytes(1, rows) > budget) --rows;
    if (bytes(1, rows) > budget) return plan;
    plan.heads = 1;
    plan.rows = rows;
  }
  // cuBLAS takes int dims: the largest row block and the chunk's batch.
  if (group * plan.rows > INT_MAX || s.skv > INT_MAX) return AttentionChunking{};
  plan.bytes = bytes(plan.heads, plan.rows);
  return plan;
}

void attentionGemmForward(const Launch& launch, const AttentionShape& s) {
  const Prepared p = prepare(launch, s, false);
  const bool bf16 = p.precision == AttentionPrecision::Bf16;
  const float *q = launch.in[0].as<const float>(), *k = launch.in[1].as<const float>(),
              *v = launch.in[2].as<const float>();
  float *y = launch.out[0].as<float>(), *lse = launch.out[1].as<float>();
  float* scores = reinterpret_cast<float*>(p.base + p.w.scores);
  void *pb = p.base + p.w.pb, *qb = p.base + p.w.qb, *kb = p.base + p.w.kb, *vb = p.base + p.w.vb;
  const int64_t T = s.skv, D = s.d;
  forEachChunk(s, p, [&](const Chunk& c) {
    if (bf16) {
      if (c.i0 == 0) {
        convertKeys(launch, k, kb, c);
        convertKeys(launch, v, vb, c);
      }
      convertRows(launch, q, qb, c);
    }
    const std::vector<RowBlock> blocks = rowBlocks(s, c.i0, c.rows);
    for (const RowBlock& b : blocks) {
      Gemm g;  // S = scale Q K^T
      g.transB = true;
      g.m = b.m, g.n = b.keys, g.k = D, g.alpha = static_cast<float>(s.scale), g.beta = 0;
      g.a = c.rowsOf(q, qb, b), g.lda = D, g.strideA = c.rowsStride();
      g.b = c.keysOf(k, kb), g.ldb = D, g.strideB = T * D;
      g.c = scores + c.chunkRow(b) * T, g.ldc = T, g.strideC = c.chunkStride() * T;
      g.count = c.heads;
      gemm(launch, p.precision, g);
    }
    if (bf16) launchSoftmaxRows<true>(launch, scores, pb, lse, c);
    else launchSoftmaxRows<false>(launch, scores, nullptr, lse, c);
    for (const RowBlock& b : blocks) {
      Gemm g;  // Y = P V
      g.m = b.m, g.n = D, g.k = b.keys;
      g.a = bf16 ? static_cast<const void*>(static_cast<const __nv_bfloat16*>(pb) + c.chunkRow(b) * T)
                 : static_cast<const void*>(scores + c.chunkRow(b) * T);
      g.lda = T, g.strideA = c.chunkStride() * T;
      g.b = c.keysOf(v, vb), g.ldb = D, g.strideB = T * D;
      g.c = y + c.globalRow(b), g.ldc = D, g.strideC = c.globalStride();
      g.count = c.heads;
      gemm(launch, p.precision, g);
    }
  });
}

void attentionGemmBackward(const Launch& launch, const AttentionShape& s) {
  const Prepared p = prepare(launch, s, true);
  const bool bf16 = p.precision == AttentionPrecision::Bf16;
  const float *q = launch.in[0].as<const float>(), *k = launch.in[1].as<const float>(),
              *v = launch.in[2].as<const float>(), *y = launch.in[3].as<const float>(),
              *lse = launch.in[4].as<const float>(), *dy = launch.in[5].as<const float>();
  float *dq = launch.out[0].as<float>(), *dk = launch.out[1].as<float>(), *dv = launch.out[2].as<float>();
  float* scores = reinterpret_cast<float*>(p.base + p.w.scores);
  float* dp = reinterpret_cast<float*>(p.base + p.w.dp);
  void *pb = p.base + p.w.pb, *dsb = p.base + p.w.dsb, *qb = p.base + p.w.qb, *dyb = p.base + p.w.dyb,
       *kb = p.base + p.w.kb, *vb = p.base + p.w.vb;
  const int64_t T = s.skv, D = s.d;
  cudaStream_t stream = launch.device->stream;
  const size_t kvBytes = static_cast<size_t>(launch.in[1].shape.elements()) * sizeof(float);
  MT_CUDA_CHECK(cudaMemsetAsync(dk, 0, kvBytes, stream));
  MT_CUDA_CHECK(cudaMemsetAsync(dv, 0, kvBytes, stream));
  forEachChunk(s, p, [&](const Chunk& c) {
    if (bf16) {
      if (c.i0 == 0) {
        convertKeys(launch, k, kb, c);
        convertKeys(launch, v, vb, c);
      }
      convertRows(launch, q, qb, c);
      convertRows(launch, dy, dyb, c);
    }
    const std::vector<RowBlock> blocks = rowBlocks(s, c.i0, c.rows);
    for (const RowBlock& b : blocks) {
      Gemm g;  // S = scale Q K^T
      g.transB = true;
      g.m = b.m, g.n = b.keys, g.k = D, g.alpha = static_cast<float>(s.scale);
      g.a = c.rowsOf(q, qb, b), g.lda = D, g.strideA = c.rowsStride();
      g.b = c.keysOf(k, kb), g.ldb = D, g.strideB = T * D;
      g.c = scores + c.chunkRow(b) * T, g.ldc = T, g.strideC = c.chunkStride() * T;
      g.count = c.heads;
      gemm(launch, p.precision, g);
      g.alpha = 1;  // dP = dY V^T
      g.a = c.rowsOf(dy, dyb, b);
      g.b = c.keysOf(v, vb);
      g.c = dp + c.chunkRow(b) * T;
      gemm(launch, p.precision, g);
    }
    if (bf16) launchGradRows<true>(launch, scores, dp, pb, dsb, y, dy, lse, c);
    else launchGradRows<false>(launch, scores, dp, nullptr, nullptr, y, dy, lse, c);
    auto chunkMatrix = [&](float* f32, void* copy, const RowBlock& b) -> const void* {
      if (bf16) return static_cast<const __nv_bfloat16*>(copy) + c.chunkRow(b) * T;
      return f32 + c.chunkRow(b) * T;
    };
    for (const RowBlock& b : blocks) {
      Gemm g;  // dV += P^T dY
      g.transA = true;
      g.m = b.keys, g.n = D, g.k = b.m, g.beta = 1;
      g.a = chunkMatrix(scores, pb, b), g.lda = T, g.strideA = c.chunkStride() * T;
      g.b = c.rowsOf(dy, dyb, b), g.ldb = D, g.strideB = c.rowsStride();
      g.c = dv + c.h0 * T * D, g.ldc = D, g.strideC = T * D;
      g.count = c.heads;
      gemm(launch, p.precision, g);
      g.alpha = static_cast<float>(s.scale);  // dK += scale dS^T Q
      g.a = chunkMatrix(dp, dsb, b);
      g.b = c.rowsOf(q, qb, b);
      g.c = dk + c.h0 * T * D;
      gemm(launch, p.precision, g);
      Gemm h;  // dQ = scale dS K
      h.m = b.m, h.n = D, h.k = b.keys, h.alpha = static_cast<float>(s.scale), h.beta = 0;
      h.a = chunkMatrix(dp, dsb, b), h.lda = T, h.strideA = c.chunkStride() * T;
      h.b = c.keysOf(k, kb), h.ldb = D, h.strideB = T * D;
      h.c = dq + c.globalRow(b), h.ldc = D, h.strideC = c.globalStride();
      h.count = c.heads;
      gemm(launch, p.precision, h);
    }
  });
}

}  // namespace megatrain::runtime::cuda
