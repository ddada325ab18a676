// reduce.cpp - reduce_sum and reduce_mean over a sorted list of axes.
#include "CpuKernel.h"

namespace megatrain::runtime::cpu {
namespace {

void reduce(const KernelArgs& args, bool mean) {
  const DType dtype = cpuFloatingType(args, inMask(0) | outMask(0));
  const ReduceDims r = reduceDims(args);
  int64_t strides[kMaxRank];
  broadcastStrides(r.kept, args.in[0].shape, strides);
  double* acc = reinterpret_cast<double*>(args.scratch);  // [y.elements]
  const int64_t n = args.out[0].shape.elements();
  // The mean of nothing is NaN (0 / 0), as in numpy.
  const double divisor = mean ? static_cast<double>(r.count) : 1.0;
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    sumInto(args.in[0].as<const T>(), args.in[0].shape, strides, acc, n);
    T* y = args.out[0].as<T>();
    for (int64_t j = 0; j < n; ++j) y[j] = static_cast<T>(acc[j] / divisor);
  });
}

void reduceSum(const KernelArgs& args) { reduce(args, false); }
void reduceMean(const KernelArgs& args) { reduce(args, true); }

size_t reduceScratch(const KernelArgs& args) {
  return static_cast<size_t>(args.out[0].shape.elements()) * sizeof(double);
}

}  // namespace

void addReduceKernels(CpuKernelRegistry& registry) {
  registry.add("reduce_sum", {reduceSum, reduceScratch});
  registry.add("reduce_mean", {reduceMean, reduceScratch});
}

}  // namespace megatrain::runtime::cpu
