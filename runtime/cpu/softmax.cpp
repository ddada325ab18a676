// softmax.cpp - softmax along one axis and its gradient.
//
// The tensor is viewed as [outer, n, inner] around `axis`; each of the
// outer * inner lanes is n elements `inner` apart. Sums run in double.
#include <cmath>

#include "CpuKernel.h"

namespace megatrain::runtime::cpu {
namespace {

// y = exp(x - max) / sum exp(x - max) per lane.
template <typename T>
void softmaxImpl(const KernelArgs& args, const SoftmaxLanes& l) {
  const T* x = args.in[0].as<const T>();
  T* y = args.out[0].as<T>();
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t q = 0; q < l.inner; ++q) {
      const int64_t base = o * l.n * l.inner + q;
      double max = -INFINITY;
      for (int64_t i = 0; i < l.n; ++i) max = std::fmax(max, static_cast<double>(x[base + i * l.inner]));
      double sum = 0;
      for (int64_t i = 0; i < l.n; ++i) sum += std::exp(static_cast<double>(x[base + i * l.inner]) - max);
      for (int64_t i = 0; i < l.n; ++i)
        y[base + i * l.inner] = static_cast<T>(std::exp(static_cast<double>(x[base + i * l.inner]) - max) / sum);
    }
}

// dx = y * (dy - sum(dy * y)) per lane.
template <typename T>
void softmaxGradImpl(const KernelArgs& args, const SoftmaxLanes& l) {
  const T* y = args.in[0].as<const T>();
  const T* dy = args.in[1].as<const T>();
  T* dx = args.out[0].as<T>();
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t q = 0; q < l.inner; ++q) {
      const int64_t base = o * l.n * l.inner + q;
      double dot = 0;
      for (int64_t i = 0; i < l.n; ++i) {
        const int64_t at = base + i * l.inner;
        dot += static_cast<double>(dy[at]) * static_cast<double>(y[at]);
      }
      for (int64_t i = 0; i < l.n; ++i) {
        const int64_t at = base + i * l.inner;
        dx[at] = static_cast<T>(static_cast<double>(y[at]) * (static_cast<double>(dy[at]) - dot));
      }
    }
}

void softmax(const KernelArgs& args) {
  const DType dtype = cpuFloatingType(args, inMask(0) | outMask(0));
  const SoftmaxLanes lanes = softmaxLanes(args);
  dispatchFloating(dtype, [&](auto tag) { softmaxImpl<decltype(tag)>(args, lanes); });
}

void softmaxGrad(const KernelArgs& args) {
  const DType dtype = cpuFloatingType(args, inMask(0) | inMask(1) | outMask(0));
  const SoftmaxLanes lanes = softmaxLanes(args);
  dispatchFloating(dtype, [&](auto tag) { softmaxGradImpl<decltype(tag)>(args, lanes); });
}

}  // namespace

void addSoftmaxKernels(CpuKernelRegistry& registry) {
  registry.add("softmax", {softmax});
  registry.add("softmax_grad", {softmaxGrad});
}

}  // namespace megatrain::runtime::cpu
