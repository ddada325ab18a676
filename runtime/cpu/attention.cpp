// attention.cpp - fused scaled dot-product attention (grouped-query, optionally causal) and its gradient.
//
// q [B, Hq, Sq, D], k and v [B, Hkv, Skv, D]; query head h reads kv head
// h / (Hq / Hkv). Row i of head h: s_j = scale * q_i . k_j over the visible
// keys (j <= i when causal), y_i = sum_j softmax(s)_j v_j, lse_i = logsumexp(s).
// The gradient recomputes p_ij = exp(s_ij - lse_i) instead of reading stored
// probabilities (flash-attention style): with D_i = dy_i . y_i,
// ds_ij = p_ij (dy_i . v_j - D_i), dq_i = scale sum_j ds_ij k_j,
// dk_j = scale sum_i ds_ij q_i, dv_j = sum_i p_ij dy_i, dk and dv summed over
// the query heads of their kv head. Everything accumulates in double.
#include <algorithm>
#include <cmath>
#include <limits>

#include "CpuKernel.h"

namespace megatrain::runtime::cpu {
namespace {

// Keys visible to query row i.
int64_t visibleKeys(const AttentionDims& d, int64_t i) { return d.causal ? std::min(i + 1, d.skv) : d.skv; }

template <typename T>
double dot(const T* a, const T* b, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return sum;
}

template <typename T>
void attentionImpl(const KernelArgs& args, const AttentionDims& d) {
  const T* q = args.in[0].as<const T>();
  const T* k = args.in[1].as<const T>();
  const T* v = args.in[2].as<const T>();
  T* y = args.out[0].as<T>();
  T* lse = args.out[1].as<T>();
  double* scores = reinterpret_cast<double*>(args.scratch);  // [skv]
  double* acc = scores + d.skv;                               // [d]
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.qHeads; ++h) {
      const int64_t kvHead = b * d.kvHeads + h / d.group();
      const T* kh = k + kvHead * d.skv * d.d;
      const T* vh = v + kvHead * d.skv * d.d;
      for (int64_t i = 0; i < d.sq; ++i) {
        const int64_t row = (b * d.qHeads + h) * d.sq + i;
        const T* qi = q + row * d.d;
        const int64_t n = visibleKeys(d, i);
        double top = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < n; ++j) {
          scores[j] = d.scale * dot(qi, kh + j * d.d, d.d);
          top = std::max(top, scores[j]);
        }
        double sum = 0;
        for (int64_t c = 0; c < d.d; ++c) acc[c] = 0;
        for (int64_t j = 0; j < n; ++j) {
          const double p = std::exp(scores[j] - top);
          sum += p;
          for (int64_t c = 0; c < d.d; ++c) acc[c] += p * static_cast<double>(vh[j * d.d + c]);
        }
        for (int64_t c = 0; c < d.d; ++c) y[row * d.d + c] = static_cast<T>(n ? acc[c] / sum : 0.0);
        lse[row] = static_cast<T>(n ? top + std::log(sum) : -std::numeric_limits<double>::infinity());
      }
    }
}

template <typename T>
void attentionGradImpl(const KernelArgs& args, const AttentionDims& d) {
  const T* q = args.in[0].as<const T>();
  const T* k = args.in[1].as<const T>();
  const T* v = args.in[2].as<const T>();
  const T* y = args.in[3].as<const T>();
  const T* lse = args.in[4].as<const T>();
  const T* dy = args.in[5].as<const T>();
  T* dq = args.out[0].as<T>();
  T* dk = args.out[1].as<T>();
  T* dv = args.out[2].as<T>();
  double* dqAcc = reinterpret_cast<double*>(args.scratch);  // [d]
  double* dkAcc = dqAcc + d.d;                               // [skv, d]
  double* dvAcc = dkAcc + d.skv * d.d;                       // [skv, d]
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t g = 0; g < d.kvHeads; ++g) {
      const int64_t kvHead = b * d.kvHeads + g;
      const T* kh = k + kvHead * d.skv * d.d;
      const T* vh = v + kvHead * d.skv * d.d;
      std::fill(dkAcc, dkAcc + 2 * d.skv * d.d, 0.0);
      for (int64_t h = g * d.group(); h < (g + 1) * d.group(); ++h)
        for (int64_t i = 0; i < d.sq; ++i) {
          const int64_t row = (b * d.qHeads + h) * d.sq + i;
          const T* qi = q + row * d.d;
          const T* dyi = dy + row * d.d;
          const double rowLse = static_cast<double>(lse[row]);
          const double di = dot(dyi, y + row * d.d, d.d);
          std::fill(dqAcc, dqAcc + d.d, 0.0);
          const int64_t n = visibleKeys(d, i);
          for (int64_t j = 0; j < n; ++j) {
            const T* kj = kh + j * d.d;
            const double p = std::exp(d.scale * dot(qi, kj, d.d) - rowLse);
            const double ds = p * (dot(dyi, vh + j * d.d, d.d) - di);
            for (int64_t c = 0; c < d.d; ++c) {
              dqAcc[c] += d.scale * ds * static_cast<double>(kj[c]);
              dkAcc[j * d.d + c] += d.scale * ds * static_cast<double>(qi[c]);
              dvAcc[j * d.d + c] += p * static_cast<double>(dyi[c]);
            }
          }
          for (int64_t c = 0; c < d.d; ++c) dq[row * d.d + c] = static_cast<T>(dqAcc[c]);
        }
      for (int64_t e = 0; e < d.skv * d.d; ++e) {
        dk[kvHead * d.skv * d.d + e] = static_cast<T>(dkAcc[e]);
        dv[kvHead * d.skv * d.d + e] = static_cast<T>(dvAcc[e]);
      }
    }
}

void attention(const KernelArgs& args) {
  const DType dtype =
      cpuFloatingType(args, inMask(0) | inMask(1) | inMask(2) | outMask(0) | outMask(1));
  const AttentionDims d = attentionDims(args);
  dispatchFloating(dtype, [&](auto tag) { attentionImpl<decltype(tag)>(args, d); });
}

size_t attentionScratch(const KernelArgs& args) {
  return static_cast<size_t>(args.in[1].shape[2] + args.in[0].shape[3]) * sizeof(double);
}

void attentionGrad(const KernelArgs& args) {
  const DType dtype =
      cpuFloatingType(args, inMask(0) | inMask(1) | inMask(2) | inMask(3) | inMask(4) | inMask(5) |
                             outMask(0) | outMask(1) | outMask(2));
  const AttentionDims d = attentionGradDims(args);
  dispatchFloating(dtype, [&](auto tag) { attentionGradImpl<decltype(tag)>(args, d); });
}

size_t attentionGradScratch(const KernelArgs& args) {
  const int64_t d = args.in[0].shape[3], skv = args.in[1].shape[2];
  return static_cast<size_t>(d + 2 * skv * d) * sizeof(double);
}

}  // namespace

void addAttentionKernels(CpuKernelRegistry& registry) {
  registry.add("attention", {attention, attentionScratch});
  registry.add("attention_grad", {attentionGrad, attentionGradScratch});
}

}  // namespace megatrain::runtime::cpu
