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
// An operand with its `bshd` bit set lies as [B, S, H, D]: rows are found
// through AttentionDims::row, and every row is the same sum in the same order
// in either layout.
// Element types (ShapeRules.h): all f32, all f64, or bf16 operands with an
// f32 lse. A bf16 operand is read exactly and every bf16 result is the f32
// result rounded to bf16 (narrowTo): the bf16 kernel is bit for bit
// floatToBf16 of the f32 kernel run on the operands widened to f32.
// f32 operands with the precision "bf16" are computed as the device computes
// them (cuDNN's path rounds them to bf16 copies and widens its bf16
// results): each operand but lse read rounded to bf16, each result but lse
// written as its bf16 rounding widened (Bf16InF32). Such a step gives, bit
// for bit, the widened results of the bf16 form on the rounded operands, so
// a plan trains alike with and without mt-bf16-attention. fp32 and tf32
// steps read and write the f32 values as they are.
#include <algorithm>
#include <cmath>
#include <limits>

#include "CpuKernel.h"

namespace megatrain::runtime::cpu {
namespace {

// An f32 operand or result of a precision "bf16" step (see above): read as
// its bf16 rounding, written as the bf16 rounding of the value, widened.
struct Bf16InF32 {
  float value;
  Bf16InF32() = default;
  explicit Bf16InF32(double v) : value(bf16ToFloat(floatToBf16(static_cast<float>(v)))) {}
  explicit operator double() const { return static_cast<double>(bf16ToFloat(floatToBf16(value))); }
};
static_assert(sizeof(Bf16InF32) == sizeof(float), "read in place of an f32 tensor");

// Keys visible to query row i.
int64_t visibleKeys(const AttentionDims& d, int64_t i) { return d.causal ? std::min(i + 1, d.skv) : d.skv; }

template <typename T>
double dot(const T* a, const T* b, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return sum;
}

// T: the operands' element (float, double or Bf16); L: lse's (float or double).
template <typename T, typename L>
void attentionImpl(const KernelArgs& args, const AttentionDims& d) {
  const T* q = args.in[0].as<const T>();
  const T* k = args.in[1].as<const T>();
  const T* v = args.in[2].as<const T>();
  T* y = args.out[0].as<T>();
  L* lse = args.out[1].as<L>();
  double* scores = reinterpret_cast<double*>(args.scratch);  // [skv]
  double* acc = scores + d.skv;                               // [d]
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.qHeads; ++h) {
      const int64_t g = h / d.group();
      for (int64_t i = 0; i < d.sq; ++i) {
        const int64_t row = (b * d.qHeads + h) * d.sq + i;
        const T* qi = q + d.qRow(kRoleQ, b, h, i);
        T* yi = y + d.qRow(kRoleY, b, h, i);
        const int64_t n = visibleKeys(d, i);
        double top = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < n; ++j) {
          scores[j] = d.scale * dot(qi, k + d.kvRow(kRoleK, b, g, j), d.d);
          top = std::max(top, scores[j]);
        }
        double sum = 0;
        for (int64_t c = 0; c < d.d; ++c) acc[c] = 0;
        for (int64_t j = 0; j < n; ++j) {
          const double p = std::exp(scores[j] - top);
          sum += p;
          const T* vj = v + d.kvRow(kRoleV, b, g, j);
          for (int64_t c = 0; c < d.d; ++c) acc[c] += p * static_cast<double>(vj[c]);
        }
        for (int64_t c = 0; c < d.d; ++c) yi[c] = narrowTo<T>(n ? acc[c] / sum : 0.0);
        lse[row] = narrowTo<L>(n ? top + std::log(sum) : -std::numeric_limits<double>::infinity());
      }
    }
}

template <typename T, typename L>
void attentionGradImpl(const KernelArgs& args, const AttentionDims& d) {
  const T* q = args.in[0].as<const T>();
  const T* k = args.in[1].as<const T>();
  const T* v = args.in[2].as<const T>();
  const T* y = args.in[3].as<const T>();
  const L* lse = args.in[4].as<const L>();
  const T* dy = args.in[5].as<const T>();
  T* dq = args.out[0].as<T>();
  T* dk = args.out[1].as<T>();
  T* dv = args.out[2].as<T>();
  double* dqAcc = reinterpret_cast<double*>(args.scratch);  // [d]
  double* dkAcc = dqAcc + d.d;                               // [skv, d]
  double* dvAcc = dkAcc + d.skv * d.d;                       // [skv, d]
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t g = 0; g < d.kvHeads; ++g) {
      std::fill(dkAcc, dkAcc + 2 * d.skv * d.d, 0.0);
      for (int64_t h = g * d.group(); h < (g + 1) * d.group(); ++h)
        for (int64_t i = 0; i < d.sq; ++i) {
          const int64_t row = (b * d.qHeads + h) * d.sq + i;
          const T* qi = q + d.qRow(kRoleQ, b, h, i);
          const T* dyi = dy + d.qRow(kRoleDy, b, h, i);
          const double rowLse = static_cast<double>(lse[row]);
          const double di = dot(dyi, y + d.qRow(kRoleY, b, h, i), d.d);
          std::fill(dqAcc, dqAcc + d.d, 0.0);
          const int64_t n = visibleKeys(d, i);
          for (int64_t j = 0; j < n; ++j) {
            const T* kj = k + d.kvRow(kRoleK, b, g, j);
            const double p = std::exp(d.scale * dot(qi, kj, d.d) - rowLse);
            const double ds = p * (dot(dyi, v + d.kvRow(kRoleV, b, g, j), d.d) - di);
            for (int64_t c = 0; c < d.d; ++c) {
              dqAcc[c] += d.scale * ds * static_cast<double>(kj[c]);
              dkAcc[j * d.d + c] += d.scale * ds * static_cast<double>(qi[c]);
              dvAcc[j * d.d + c] += p * static_cast<double>(dyi[c]);
            }
          }
          T* dqi = dq + d.qRow(kRoleQ, b, h, i);
          for (int64_t c = 0; c < d.d; ++c) dqi[c] = narrowTo<T>(dqAcc[c]);
        }
      for (int64_t j = 0; j < d.skv; ++j) {
        T* dkj = dk + d.kvRow(kRoleK, b, g, j);
        T* dvj = dv + d.kvRow(kRoleV, b, g, j);
        for (int64_t c = 0; c < d.d; ++c) {
          dkj[c] = narrowTo<T>(dkAcc[j * d.d + c]);
          dvj[c] = narrowTo<T>(dvAcc[j * d.d + c]);
        }
      }
    }
}

// Calls f(operand tag, lse tag) for the step's element types and precision.
template <typename F>
void dispatchAttention(const KernelArgs& args, const AttentionDims& d, F&& f) {
  if (d.operands == DType::BF16) f(Bf16{}, float{});
  else if (d.operands == DType::F64) f(double{}, double{});
  else if (args.attrs.getString("precision", "fp32") == "bf16") f(Bf16InF32{}, float{});
  else f(float{}, float{});
}

void attention(const KernelArgs& args) {
  const AttentionDims d = attentionDims(args);
  dispatchAttention(args, d, [&](auto t, auto l) { attentionImpl<decltype(t), decltype(l)>(args, d); });
}

size_t attentionScratch(const KernelArgs& args) {
  const AttentionDims d = attentionDims(args);
  return static_cast<size_t>(d.skv + d.d) * sizeof(double);
}

void attentionGrad(const KernelArgs& args) {
  const AttentionDims d = attentionGradDims(args);
  dispatchAttention(args, d, [&](auto t, auto l) { attentionGradImpl<decltype(t), decltype(l)>(args, d); });
}

size_t attentionGradScratch(const KernelArgs& args) {
  const AttentionDims d = attentionGradDims(args);
  return static_cast<size_t>(d.d + 2 * d.skv * d.d) * sizeof(double);
}

}  // namespace

void addAttentionKernels(CpuKernelRegistry& registry) {
  registry.add("attention", {attention, attentionScratch});
  registry.add("attention_grad", {attentionGrad, attentionGradScratch});
}

}  // namespace megatrain::runtime::cpu
