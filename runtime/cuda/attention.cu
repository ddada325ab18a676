// attention.cu - fused scaled dot-product attention (grouped-query, optionally causal) and its gradient on the GPU.
//
// q [B, Hq, Sq, D], k and v [B, Hkv, Skv, D]; query head h reads kv head
// h / (Hq / Hkv); causal hides key j from query i when j > i. Correctness
// first: a warp owns one row and its lanes split the head dim (D <= 256, 8
// values per lane), every dot product is a warp sum in double, as the CPU
// twin (runtime/cpu/attention.cpp) accumulates.
//   forward   a warp per query row, online softmax over the visible keys:
//             y_i and lse_i = logsumexp_j(s_ij).
//   backward  two kernels, no atomics (deterministic): a warp per query row
//             computes delta_i = dy_i . y_i (kept in scratch) and dq_i from the
//             recomputed p_ij = exp(s_ij - lse_i); then a warp per key row j of
//             each kv head sums, over the query heads of its group and the
//             queries that see it, dv_j += p_ij dy_i and
//             dk_j += scale p_ij (dy_i . v_j - delta_i) q_i.
// The S x S probabilities are never stored.
// F32 or BF16 operands with the precision "bf16" take cuDNN's fused
// attention (CudnnAttention.h) where prepare() found it takes the step; F32
// operands take the tensor-core path of attention_gemm.cu (AttentionGemm.h)
// whenever its workspace plan fits; this kernel stays for F64 and for what
// those paths do not take (an empty q or k, a key row too long for the
// GEMM path's workspace).
// Operands laid out [B, S, H, D] (the `bshd` attribute) go to cuDNN as they
// are; the GEMM path and these kernels run on [B, H, S, D] copies
// (AttentionLayout.h).
// bf16 operands (lse f32, the precision "bf16") go to cuDNN as they are; a
// step cuDNN does not take runs the f32 paths on f32 copies of them
// (AttentionBf16.h), which the head-major copies then wrap as for f32.
#include "AttentionBf16.h"
#include "AttentionGemm.h"
#include "AttentionLayout.h"
#include "CudnnAttention.h"
#include "DeviceMath.cuh"

namespace megatrain::runtime::cuda {
namespace {

constexpr int kPerLane = 8;                 // head-dim values per lane
constexpr int64_t kMaxHeadDim = 32 * kPerLane;

// The head dim of `row` (length d) into registers: lane l holds c = l + 32 t.
template <typename T>
__device__ __forceinline__ void loadRow(const T* row, int64_t d, int lane, double (&out)[kPerLane]) {
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int64_t c = lane + 32 * t;
    out[t] = c < d ? static_cast<double>(row[c]) : 0.0;
  }
}

// sum_c a[c] * row[c] over the warp (a in registers).
template <typename T>
__device__ __forceinline__ double warpDot(const double (&a)[kPerLane], const T* row, int64_t d, int lane) {
  double partial = 0;
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int64_t c = lane + 32 * t;
    if (c < d) partial += a[t] * static_cast<double>(row[c]);
  }
  return warpSum(partial);
}

// ---- kernels ----

// y [B, Hq, Sq, D], lse [B, Hq, Sq].
template <typename T>
__global__ void attentionKernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                T* __restrict__ y, T* __restrict__ lse, AttentionDims dm) {
  const int lane = groupMember<32>();
  const int64_t rows = dm.batch * dm.qHeads * dm.sq;
  for (int64_t row = firstGroup<32>(); row < rows; row += groupCount<32>()) {
    const int64_t i = row % dm.sq, bh = row / dm.sq;
    const int64_t kvHead = (bh / dm.qHeads) * dm.kvHeads + (bh % dm.qHeads) / (dm.qHeads / dm.kvHeads);
    const T* kh = k + kvHead * dm.skv * dm.d;
    const T* vh = v + kvHead * dm.skv * dm.d;
    double qi[kPerLane], acc[kPerLane] = {};
    loadRow(q + row * dm.d, dm.d, lane, qi);
    const int64_t n = dm.causal ? min(i + 1, dm.skv) : dm.skv;
    double top = -INFINITY, sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double s = dm.scale * warpDot(qi, kh + j * dm.d, dm.d, lane);
      const double next = fmax(top, s);
      const double shrink = exp(top - next), p = exp(s - next);
      sum = sum * shrink + p;
#pragma unroll
      for (int t = 0; t < kPerLane; ++t) {
        const int64_t c = lane + 32 * t;
        acc[t] = acc[t] * shrink + (c < dm.d ? p * static_cast<double>(vh[j * dm.d + c]) : 0.0);
      }
      top = next;
    }
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int64_t c = lane + 32 * t;
      if (c < dm.d) y[row * dm.d + c] = static_cast<T>(n ? acc[t] / sum : 0.0);
    }
    if (lane == 0) lse[row] = static_cast<T>(n ? top + log(sum) : -INFINITY);
  }
}

// delta [rows] = dy . y per query row; dq_i = scale sum_j ds_ij k_j.
template <typename T>
__global__ void attentionDqKernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                  const T* __restrict__ y, const T* __restrict__ lse, const T* __restrict__ dy,
                                  T* __restrict__ dq, double* __restrict__ delta, AttentionDims dm) {
  const int lane = groupMember<32>();
  const int64_t rows = dm.batch * dm.qHeads * dm.sq;
  for (int64_t row = firstGroup<32>(); row < rows; row += groupCount<32>()) {
    const int64_t i = row % dm.sq, bh = row / dm.sq;
    const int64_t kvHead = (bh / dm.qHeads) * dm.kvHeads + (bh % dm.qHeads) / (dm.qHeads / dm.kvHeads);
    const T* kh = k + kvHead * dm.skv * dm.d;
    const T* vh = v + kvHead * dm.skv * dm.d;
    double qi[kPerLane], dyi[kPerLane], acc[kPerLane] = {};
    loadRow(q + row * dm.d, dm.d, lane, qi);
    loadRow(dy + row * dm.d, dm.d, lane, dyi);
    const double di = warpDot(dyi, y + row * dm.d, dm.d, lane);
    const double rowLse = static_cast<double>(lse[row]);
    const int64_t n = dm.causal ? min(i + 1, dm.skv) : dm.skv;
    for (int64_t j = 0; j < n; ++j) {
      const T* kj = kh + j * dm.d;
      const double p = exp(dm.scale * warpDot(qi, kj, dm.d, lane) - rowLse);
      const double ds = p * (warpDot(dyi, vh + j * dm.d, dm.d, lane) - di);
#pragma unroll
      for (int t = 0; t < kPerLane; ++t) {
        const int64_t c = lane + 32 * t;
        if (c < dm.d) acc[t] += dm.scale * ds * static_cast<double>(kj[c]);
      }
    }
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int64_t c = lane + 32 * t;
      if (c < dm.d) dq[row * dm.d + c] = static_cast<T>(acc[t]);
    }
    if (lane == 0) delta[row] = di;
  }
}

// dk_j, dv_j per key row of each kv head, summed over the group's query heads.
template <typename T>
__global__ void attentionDkvKernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                   const T* __restrict__ lse, const T* __restrict__ dy,
                                   const double* __restrict__ delta, T* __restrict__ dk, T* __restrict__ dv,
                                   AttentionDims dm) {
  const int lane = groupMember<32>();
  const int64_t keys = dm.batch * dm.kvHeads * dm.skv, group = dm.qHeads / dm.kvHeads;
  for (int64_t key = firstGroup<32>(); key < keys; key += groupCount<32>()) {
    const int64_t j = key % dm.skv, bg = key / dm.skv;  // bg = b * kvHeads + g
    const int64_t b = bg / dm.kvHeads, g = bg % dm.kvHeads;
    double kj[kPerLane], vj[kPerLane], dkAcc[kPerLane] = {}, dvAcc[kPerLane] = {};
    loadRow(k + key * dm.d, dm.d, lane, kj);
    loadRow(v + key * dm.d, dm.d, lane, vj);
    for (int64_t h = g * group; h < (g + 1) * group; ++h)
      for (int64_t i = dm.causal ? j : 0; i < dm.sq; ++i) {
        const int64_t row = (b * dm.qHeads + h) * dm.sq + i;
        const T* qi = q + row * dm.d;
        const T* dyi = dy + row * dm.d;
        const double p = exp(dm.scale * warpDot(kj, qi, dm.d, lane) - static_cast<double>(lse[row]));
        const double ds = p * (warpDot(vj, dyi, dm.d, lane) - delta[row]);
#pragma unroll
        for (int t = 0; t < kPerLane; ++t) {
          const int64_t c = lane + 32 * t;
          if (c < dm.d) {
            dkAcc[t] += dm.scale * ds * static_cast<double>(qi[c]);
            dvAcc[t] += p * static_cast<double>(dyi[c]);
          }
        }
      }
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int64_t c = lane + 32 * t;
      if (c < dm.d) {
        dk[key * dm.d + c] = static_cast<T>(dkAcc[t]);
        dv[key * dm.d + c] = static_cast<T>(dvAcc[t]);
      }
    }
  }
}

// ---- launchers ----

// The warp-per-row kernels hold a head row in registers: kPerLane values per lane.
AttentionDims checkHeadDim(const Launch& launch, const AttentionDims& d) {
  if (d.d > kMaxHeadDim)
    fail(launch, "head dim " + std::to_string(d.d) + " exceeds " + std::to_string(kMaxHeadDim));
  return d;
}

AttentionShape gemmShape(const AttentionDims& d) {
  AttentionShape s;
  s.batch = d.batch, s.qHeads = d.qHeads, s.kvHeads = d.kvHeads, s.sq = d.sq, s.skv = d.skv, s.d = d.d;
  s.scale = d.scale;
  s.causal = d.causal;
  return s;
}

bool gemmPathTakes(const Launch& launch, const AttentionDims& d, bool backward) {
  return attentionGemmPlan(gemmShape(d), attentionPrecision(launch), backward).bytes > 0;
}

// The scratch of the GEMM path for F32 operands of a shape it takes, else 0.
// prepare() runs the shape rule first; this reads the inputs alone (the GPU
// tests size the workspace from q, k and v), so a bad shape asks for nothing.
size_t gemmScratch(const Launch& launch, bool backward) {
  const Shape &q = launch.in[0].shape, &k = launch.in[1].shape;
  if (launch.in[0].dtype != DType::F32 || q.rank != 4 || k.rank != 4) return 0;
  AttentionShape s;
  s.batch = q[0], s.qHeads = q[1], s.kvHeads = k[1], s.sq = q[2], s.skv = k[2], s.d = q[3];
  s.causal = launch.attrs.getInt("causal", 0) != 0;  // causal row slices are whole row blocks
  if (s.kvHeads <= 0 || s.qHeads % s.kvHeads != 0) return 0;
  return attentionGemmPlan(s, attentionPrecision(launch), backward).bytes;
}

// Whether cuDNN takes the step, and its scratch there in `bytes` (prepare()
// builds its graph here: the scratch functions are the backend's one pass
// over the steps before the scratch is allocated). The scratch may be 0 on
// that path (bf16 operands and a graph without workspace).
bool cudnnPrepared(const Launch& launch, size_t& bytes) {
  if (!launch.device || !launch.device->attention) return false;
  bytes = launch.device->attention->prepare(launch);
  return launch.device->attention->takes(launch);
}

bool cudnnTakes(const Launch& launch) {
  return launch.device->attention && launch.device->attention->takes(launch);
}

size_t attentionScratch(const Launch& launch) {
  size_t bytes = 0;
  if (cudnnPrepared(launch, bytes)) return bytes;
  const Launch f32 = widenedView(launch);
  return widenedCopyBytes(launch) + headMajorCopyBytes(f32) + gemmScratch(headMajorView(f32), false);
}

void attention(const Launch& launch) {
  const AttentionDims d = checkHeadDim(launch, attentionDims(launch));
  const DType dtype = d.operands;
  const int64_t rows = d.batch * d.qHeads * d.sq;
  if (rows == 0 || d.d == 0) return;
  if (dtype != DType::F64 && cudnnTakes(launch)) {
    launch.device->attention->run(launch);
    return;
  }
  if (dtype == DType::BF16) return runWidened(launch, attention);
  if (d.bshd != 0) return runHeadMajor(launch, attention);
  if (dtype == DType::F32 && gemmPathTakes(launch, d, false)) {
    attentionGemmForward(launch, gemmShape(d));
    return;
  }
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    attentionKernel<T><<<gridFor(launch, rows * 32, kThreads), kThreads, 0, launch.device->stream>>>(
        launch.in[0].as<const T>(), launch.in[1].as<const T>(), launch.in[2].as<const T>(),
        launch.out[0].as<T>(), launch.out[1].as<T>(), d);
  });
  MT_CHECK_LAUNCH(launch);
}

void attentionGrad(const Launch& launch) {
  const AttentionDims d = checkHeadDim(launch, attentionGradDims(launch));
  const DType dtype = d.operands;
  const int64_t rows = d.batch * d.qHeads * d.sq, keys = d.batch * d.kvHeads * d.skv;
  if (d.d == 0) return;
  if (dtype != DType::F64 && cudnnTakes(launch)) {
    launch.device->attention->run(launch);
    return;
  }
  if (dtype == DType::BF16) return runWidened(launch, attentionGrad);
  if (d.bshd != 0) return runHeadMajor(launch, attentionGrad);
  if (dtype == DType::F32 && gemmPathTakes(launch, d, true)) {
    attentionGemmBackward(launch, gemmShape(d));
    return;
  }
  const DeviceContext& device = *launch.device;
  if (static_cast<size_t>(rows) * sizeof(double) > device.scratchBytes)
    fail(launch, "scratch too small (prepare sized it for another shape)");
  double* delta = static_cast<double*>(device.scratch);  // [rows]
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *q = launch.in[0].as<const T>(), *k = launch.in[1].as<const T>(), *v = launch.in[2].as<const T>();
    const T *lse = launch.in[4].as<const T>(), *dy = launch.in[5].as<const T>();
    if (rows > 0) {
      attentionDqKernel<T><<<gridFor(launch, rows * 32, kThreads), kThreads, 0, device.stream>>>(
          q, k, v, launch.in[3].as<const T>(), lse, dy, launch.out[0].as<T>(), delta, d);
      MT_CHECK_LAUNCH(launch);
    }
    if (keys > 0) {
      attentionDkvKernel<T><<<gridFor(launch, keys * 32, kThreads), kThreads, 0, device.stream>>>(
          q, k, v, lse, dy, delta, launch.out[1].as<T>(), launch.out[2].as<T>(), d);
      MT_CHECK_LAUNCH(launch);
    }
  });
}

size_t attentionGradScratch(const Launch& launch) {
  size_t bytes = 0;
  if (cudnnPrepared(launch, bytes)) return bytes;
  const Launch f32 = widenedView(launch);
  const size_t copies = widenedCopyBytes(launch) + headMajorCopyBytes(f32);
  const Launch view = headMajorView(f32);
  if (const size_t gemm = gemmScratch(view, true)) return copies + gemm;
  const Shape& q = view.in[0].shape;
  return copies + static_cast<size_t>(q.rank == 4 ? q[0] * q[1] * q[2] : 0) * sizeof(double);
}

}  // namespace

void addAttentionKernels(CudaKernelRegistry& registry) {
  registry.add("attention", {attention, attentionScratch});
  registry.add("attention_grad", {attentionGrad, attentionGradScratch});
}

}  // namespace megatrain::runtime::cuda
