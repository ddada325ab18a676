// linear_cross_entropy.cpp - linear_ce and linear_ce_grad: the output projection and the next-token loss, by vocabulary chunks.
//
// hidden [B, T, H] (rows r = (b, t)), weight [V, H], tokens [B, T]; row r's
// target is tokens[r + 1], none at t = T - 1 or when it is ignore_index.
// logits[r, j] = sum_h hidden[r, h] weight[j, h], summed in double and rounded
// to the results' type (f32 for bf16 operands): the value the unfused matmul
// writes. The forward takes `chunk` vocabulary rows at a time and folds them
// into a running max m and sum s = sum exp(logit - m) per row (in double), so
// only one chunk's logits exist; lse = m + log(s). loss = mean over counted
// rows of lse - logit[target] (0 when none counts). The backward recomputes a
// chunk's logits and takes, per counted row, g_j = dloss / count *
// (exp(logit_j - lse) - [j == target]), rounded as the unfused gradient is (to
// the results' type, then to bf16 for bf16 operands, as the cast before the
// unfused backward matmuls); dhidden += g W_chunk and dweight[chunk] = g^T
// hidden, accumulated in double in the scratch and rounded once.
#include <cmath>

#include "CpuKernel.h"

namespace megatrain::runtime::cpu {
namespace {

// A value rounded as the unfused path stores it in a tensor of type R.
template <typename R>
double roundTo(double value) {
  return static_cast<double>(static_cast<R>(value));
}
template <>
double roundTo<Bf16>(double value) {
  return static_cast<double>(bf16ToFloat(floatToBf16(static_cast<float>(value))));
}

// Row r's target, or -1 when it has none; an Error for a target outside [0, V).
int64_t targetOf(const KernelArgs& args, const LinearCeDims& d, const int64_t* tokens, int64_t r) {
  if (r % d.t == d.t - 1) return -1;
  const int64_t target = tokens[r + 1];
  if (d.ignore && target == *d.ignore) return -1;
  if (target < 0 || target >= d.v)
    fail(args, "label " + std::to_string(target) + " at position " + std::to_string(r + 1) + " is outside [0, " +
                   std::to_string(d.v) + ")");
  return target;
}

// logits of row r for vocabulary rows [j0, j1) into out[0 .. j1 - j0), rounded to R.
template <typename T, typename R>
void chunkLogits(const T* hidden, const T* weight, const LinearCeDims& d, int64_t r, int64_t j0, int64_t j1,
                 double* out) {
  const T* x = hidden + r * d.h;
  for (int64_t j = j0; j < j1; ++j) {
    const T* w = weight + j * d.h;
    double sum = 0;
    for (int64_t k = 0; k < d.h; ++k) sum += static_cast<double>(x[k]) * static_cast<double>(w[k]);
    out[j - j0] = roundTo<R>(sum);
  }
}

// Scratch (doubles): forward max[rows], sum[rows], picked[rows], logits[chunk];
// backward dhidden[rows * H], dweight[chunk * H], logits[chunk].
size_t forwardScratch(const KernelArgs& args) {
  const LinearCeDims d = linearCeDims(args);
  return static_cast<size_t>(3 * d.rows() + std::min(d.chunk, d.v)) * sizeof(double);
}

size_t backwardScratch(const KernelArgs& args) {
  const LinearCeDims d = linearCeDims(args);
  const int64_t chunk = std::min(d.chunk, d.v);
  return static_cast<size_t>(d.rows() * d.h + chunk * d.h + chunk) * sizeof(double);
}

template <typename T, typename R>
void forwardImpl(const KernelArgs& args, const LinearCeDims& d) {
  const T* hidden = args.in[0].as<const T>();
  const T* weight = args.in[1].as<const T>();
  const int64_t* tokens = args.in[2].as<const int64_t>();
  const int64_t rows = d.rows(), chunk = std::min(d.chunk, d.v);
  double* max = reinterpret_cast<double*>(args.scratch);
  double* sum = max + rows;
  double* picked = sum + rows;
  double* logits = picked + rows;
  for (int64_t r = 0; r < rows; ++r) max[r] = -INFINITY, sum[r] = 0, picked[r] = 0;
  for (int64_t j0 = 0; j0 < d.v; j0 += chunk) {
    const int64_t j1 = std::min(j0 + chunk, d.v);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t target = targetOf(args, d, tokens, r);
      if (target < 0) continue;
      chunkLogits<T, R>(hidden, weight, d, r, j0, j1, logits);
      double chunkMax = -INFINITY;
      for (int64_t j = 0; j < j1 - j0; ++j) chunkMax = std::fmax(chunkMax, logits[j]);
      const double m = std::fmax(max[r], chunkMax);
      double s = max[r] == -INFINITY ? 0.0 : sum[r] * std::exp(max[r] - m);
      for (int64_t j = 0; j < j1 - j0; ++j) s += std::exp(logits[j] - m);
      max[r] = m;
      sum[r] = s;
      if (target >= j0 && target < j1) picked[r] = logits[target - j0];
    }
  }
  R* lse = args.out[1].as<R>();
  double total = 0;
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (targetOf(args, d, tokens, r) < 0) {
      lse[r] = R(0);
      continue;
    }
    const double value = max[r] + std::log(sum[r]);
    lse[r] = static_cast<R>(value);
    total += value - picked[r];
    ++count;
  }
  args.out[0].as<R>()[0] = static_cast<R>(count ? total / static_cast<double>(count) : 0.0);
}

template <typename T, typename R>
void backwardImpl(const KernelArgs& args, const LinearCeDims& d) {
  const T* hidden = args.in[0].as<const T>();
  const T* weight = args.in[1].as<const T>();
  const int64_t* tokens = args.in[2].as<const int64_t>();
  const R* lse = args.in[3].as<const R>();
  const double dloss = static_cast<double>(args.in[4].as<const R>()[0]);
  R* dhidden = args.out[0].as<R>();
  R* dweight = args.out[1].as<R>();
  const int64_t rows = d.rows(), chunk = std::min(d.chunk, d.v);
  double* accHidden = reinterpret_cast<double*>(args.scratch);
  double* accWeight = accHidden + rows * d.h;
  double* logits = accWeight + chunk * d.h;
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) count += targetOf(args, d, tokens, r) >= 0;
  const double scale = count ? dloss / static_cast<double>(count) : 0.0;
  for (int64_t i = 0; i < rows * d.h; ++i) accHidden[i] = 0;
  for (int64_t j0 = 0; j0 < d.v; j0 += chunk) {
    const int64_t j1 = std::min(j0 + chunk, d.v);
    for (int64_t i = 0; i < (j1 - j0) * d.h; ++i) accWeight[i] = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t target = targetOf(args, d, tokens, r);
      if (target < 0) continue;
      chunkLogits<T, R>(hidden, weight, d, r, j0, j1, logits);
      const double rowLse = static_cast<double>(lse[r]);
      const T* x = hidden + r * d.h;
      double* dx = accHidden + r * d.h;
      for (int64_t j = j0; j < j1; ++j) {
        const double p = std::exp(logits[j - j0] - rowLse);
        const double g = roundTo<T>(roundTo<R>(scale * (p - (j == target ? 1.0 : 0.0))));
        if (g == 0) continue;
        const T* w = weight + j * d.h;
        double* dw = accWeight + (j - j0) * d.h;
        for (int64_t k = 0; k < d.h; ++k) {
          dx[k] += g * static_cast<double>(w[k]);
          dw[k] += g * static_cast<double>(x[k]);
        }
      }
    }
    for (int64_t i = 0; i < (j1 - j0) * d.h; ++i) dweight[j0 * d.h + i] = static_cast<R>(accWeight[i]);
  }
  for (int64_t i = 0; i < rows * d.h; ++i) dhidden[i] = static_cast<R>(accHidden[i]);
}

// Calls f(T{}, R{}) for the operand and result types of d.
template <typename F>
void dispatch(const LinearCeDims& d, F&& f) {
  if (d.operands == DType::F64) f(double{}, double{});
  else if (d.operands == DType::F32) f(float{}, float{});
  else f(Bf16{}, float{});
}

void linearCe(const KernelArgs& args) {
  const LinearCeDims d = linearCeDims(args);
  dispatch(d, [&](auto t, auto r) { forwardImpl<decltype(t), decltype(r)>(args, d); });
}

void linearCeGrad(const KernelArgs& args) {
  const LinearCeDims d = linearCeDims(args);
  dispatch(d, [&](auto t, auto r) { backwardImpl<decltype(t), decltype(r)>(args, d); });
}

}  // namespace

void addLinearCrossEntropyKernels(CpuKernelRegistry& registry) {
  registry.add("linear_ce", {linearCe, forwardScratch});
  registry.add("linear_ce_grad", {linearCeGrad, backwardScratch});
}

}  // namespace megatrain::runtime::cpu
