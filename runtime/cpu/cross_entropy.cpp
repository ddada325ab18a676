// cross_entropy.cpp - softmax cross-entropy losses (softmax_ce, next_token_ce) and their gradients.
//
// Both score lanes of C logits against an integer label: loss = logsumexp(lane)
// - lane[label], averaged (or summed) over the lanes whose label is not
// ignore_index. The gradient of a lane is scale * (softmax(lane) - onehot(label))
// with scale = dloss / count (mean) or dloss (sum). Sums run in double.
#include <cmath>
#include <optional>

#include "CpuKernel.h"

namespace megatrain::runtime::cpu {
namespace {

// A lane of `c` logits starting at `base`, `stride` apart.
struct Lane {
  int64_t base, stride;
};

template <typename T>
double logSumExp(const T* logits, Lane lane, int64_t c) {
  double max = -INFINITY;
  for (int64_t i = 0; i < c; ++i) max = std::fmax(max, static_cast<double>(logits[lane.base + i * lane.stride]));
  double sum = 0;
  for (int64_t i = 0; i < c; ++i) sum += std::exp(static_cast<double>(logits[lane.base + i * lane.stride]) - max);
  return max + std::log(sum);
}

template <typename T>
void laneGrad(const T* logits, T* dlogits, Lane lane, int64_t c, int64_t label, double scale) {
  const double lse = logSumExp(logits, lane, c);
  for (int64_t i = 0; i < c; ++i) {
    const int64_t at = lane.base + i * lane.stride;
    const double p = std::exp(static_cast<double>(logits[at]) - lse);
    dlogits[at] = static_cast<T>(scale * (p - (i == label ? 1.0 : 0.0)));
  }
}

template <typename T>
void zeroLane(T* dlogits, Lane lane, int64_t c) {
  for (int64_t i = 0; i < c; ++i) dlogits[lane.base + i * lane.stride] = T(0);
}

// True if the lane counts; Error if its label is neither ignored nor a class.
bool counts(const KernelArgs& args, int64_t label, std::optional<int64_t> ignore, int64_t c,
            int64_t position) {
  if (ignore && label == *ignore) return false;
  if (label < 0 || label >= c)
    fail(args, "label " + std::to_string(label) + " at position " + std::to_string(position) +
                   " is outside [0, " + std::to_string(c) + ")");
  return true;
}

// ---- softmax_ce: logits [N, C, D...], labels [N, D...] ----

template <typename T>
void softmaxCeImpl(const KernelArgs& args, const SoftmaxCeDims& d) {
  const T* logits = args.in[0].as<const T>();
  const int64_t* labels = args.in[1].as<const int64_t>();
  double total = 0;
  int64_t count = 0;
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t q = 0; q < d.inner; ++q) {
      const int64_t position = n * d.inner + q, label = labels[position];
      if (!counts(args, label, d.ignore, d.c, position)) continue;
      const Lane lane{n * d.c * d.inner + q, d.inner};
      total += logSumExp(logits, lane, d.c) - static_cast<double>(logits[lane.base + label * lane.stride]);
      ++count;
    }
  // A mean over no labels is 0, as docs/ops.md defines it.
  const double loss = d.mean ? (count ? total / static_cast<double>(count) : 0.0) : total;
  args.out[0].as<T>()[0] = static_cast<T>(loss);
}

template <typename T>
void softmaxCeGradImpl(const KernelArgs& args, const SoftmaxCeDims& d) {
  const T* logits = args.in[0].as<const T>();
  const int64_t* labels = args.in[1].as<const int64_t>();
  const double dloss = static_cast<double>(args.in[2].as<const T>()[0]);
  T* dlogits = args.out[0].as<T>();
  int64_t count = 0;
  for (int64_t p = 0; p < d.n * d.inner; ++p) count += counts(args, labels[p], d.ignore, d.c, p);
  const double scale = d.mean ? (count ? dloss / static_cast<double>(count) : 0.0) : dloss;
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t q = 0; q < d.inner; ++q) {
      const int64_t label = labels[n * d.inner + q];
      const Lane lane{n * d.c * d.inner + q, d.inner};
      if (d.ignore && label == *d.ignore) zeroLane(dlogits, lane, d.c);
      else laneGrad(logits, dlogits, lane, d.c, label, scale);
    }
}

void softmaxCe(const KernelArgs& args) {
  const DType dtype = cpuFloatingType(args, inMask(0) | outMask(0));
  const SoftmaxCeDims d = softmaxCeDims(args);
  dispatchFloating(dtype, [&](auto tag) { softmaxCeImpl<decltype(tag)>(args, d); });
}

void softmaxCeGrad(const KernelArgs& args) {
  const DType dtype = cpuFloatingType(args, inMask(0) | inMask(2) | outMask(0));
  const SoftmaxCeDims d = softmaxCeDims(args);
  dispatchFloating(dtype, [&](auto tag) { softmaxCeGradImpl<decltype(tag)>(args, d); });
}

// ---- next_token_ce: logits [B, T, V], tokens [B, T]; position t predicts tokens[b, t + 1] ----

template <typename T>
void nextTokenCeImpl(const KernelArgs& args, const NextTokenDims& d) {
  const T* logits = args.in[0].as<const T>();
  const int64_t* tokens = args.in[1].as<const int64_t>();
  double total = 0;
  int64_t count = 0;
  for (int64_t b = 0; b < d.b; ++b)
    for (int64_t t = 0; t + 1 < d.t; ++t) {
      const int64_t position = b * d.t + t + 1, target = tokens[position];
      if (!counts(args, target, d.ignore, d.v, position)) continue;
      const Lane lane{(b * d.t + t) * d.v, 1};
      total += logSumExp(logits, lane, d.v) - static_cast<double>(logits[lane.base + target]);
      ++count;
    }
  args.out[0].as<T>()[0] = static_cast<T>(count ? total / static_cast<double>(count) : 0.0);
}

template <typename T>
void nextTokenCeGradImpl(const KernelArgs& args, const NextTokenDims& d) {
  const T* logits = args.in[0].as<const T>();
  const int64_t* tokens = args.in[1].as<const int64_t>();
  const double dloss = static_cast<double>(args.in[2].as<const T>()[0]);
  T* dlogits = args.out[0].as<T>();
  int64_t count = 0;
  for (int64_t b = 0; b < d.b; ++b)
    for (int64_t t = 0; t + 1 < d.t; ++t) {
      const int64_t position = b * d.t + t + 1;
      count += counts(args, tokens[position], d.ignore, d.v, position);
    }
  const double scale = count ? dloss / static_cast<double>(count) : 0.0;
  for (int64_t b = 0; b < d.b; ++b)
    for (int64_t t = 0; t < d.t; ++t) {
      const Lane lane{(b * d.t + t) * d.v, 1};
      const bool last = t + 1 == d.t;
      const int64_t target = last ? 0 : tokens[b * d.t + t + 1];
      if (last || (d.ignore && target == *d.ignore)) zeroLane(dlogits, lane, d.v);
      else laneGrad(logits, dlogits, lane, d.v, target, scale);
    }
}

void nextTokenCe(const KernelArgs& args) {
  const DType dtype = cpuFloatingType(args, inMask(0) | outMask(0));
  const NextTokenDims d = nextTokenDims(args);
  dispatchFloating(dtype, [&](auto tag) { nextTokenCeImpl<decltype(tag)>(args, d); });
}

void nextTokenCeGrad(const KernelArgs& args) {
  const DType dtype = cpuFloatingType(args, inMask(0) | inMask(2) | outMask(0));
  const NextTokenDims d = nextTokenDims(args);
  dispatchFloating(dtype, [&](auto tag) { nextTokenCeGradImpl<decltype(tag)>(args, d); });
}

}  // namespace

void addCrossEntropyKernels(CpuKernelRegistry& registry) {
  registry.add("softmax_ce", {softmaxCe});
  registry.add("softmax_ce_grad", {softmaxCeGrad});
  registry.add("next_token_ce", {nextTokenCe});
  registry.add("next_token_ce_grad", {nextTokenCeGrad});
}

}  // namespace megatrain::runtime::cpu
