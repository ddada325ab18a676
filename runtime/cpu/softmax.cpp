// softmax.cpp - softmax along one axis and its gradient.
//
// The tensor is viewed as [outer, n, inner] around `axis`; each of the
// outer * inner lanes is n elements `inner` apart. Sums run in double.
#include <cmath>

#include "CpuKernel.h"

namespace megatrain::runtime::cpu {
namespace {

struct Lanes {
  int64_t outer, n, inner;
};

Lanes checkSoftmax(const KernelArgs& args) {
  const Shape& shape = args.out[0].shape;
  for (int i = 0; i < args.numIn; ++i) requireShape(args, args.in[i], shape, "input");
  const int64_t axis = args.attrs.getInt("axis");
  if (axis < 0 || axis >= shape.rank)
    fail(args, "axis " + std::to_string(axis) + " is outside " + shape.str());
  const int a = static_cast<int>(axis);
  return {shape.product(0, a), shape[a], shape.product(a + 1, shape.rank)};
}

// y = exp(x - max) / sum exp(x - max) per lane.
template <typename T>
void softmaxImpl(const KernelArgs& args, const Lanes& l) {
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
void softmaxGradImpl(const KernelArgs& args, const Lanes& l) {
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
  const plan::DType dtype = floatingType(args, inMask(0) | outMask(0));
  const Lanes lanes = checkSoftmax(args);
  dispatchFloating(dtype, [&](auto tag) { softmaxImpl<decltype(tag)>(args, lanes); });
}

void softmaxGrad(const KernelArgs& args) {
  const plan::DType dtype = floatingType(args, inMask(0) | inMask(1) | outMask(0));
  const Lanes lanes = checkSoftmax(args);
  dispatchFloating(dtype, [&](auto tag) { softmaxGradImpl<decltype(tag)>(args, lanes); });
}

}  // namespace

void addSoftmaxKernels(KernelRegistry& registry) {
  registry.add("softmax", 1, 1, softmax);
  registry.add("softmax_grad", 2, 1, softmaxGrad);
}

}  // namespace megatrain::runtime::cpu
