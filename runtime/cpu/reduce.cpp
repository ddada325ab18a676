// reduce.cpp - reduce_sum and reduce_mean over a sorted list of axes.
#include "CpuKernel.h"

namespace megatrain::runtime::cpu {
namespace {

// The reduced shape with keepdims (reduced dims set to 1); y's bytes are laid
// out the same with or without keepdims. An empty `axes` reduces every dim, as
// in ONNX ReduceSum without noop_with_empty_axes.
void checkReduce(const KernelArgs& args, Shape& kept, int64_t& count) {
  const Operand &x = args.in[0], &y = args.out[0];
  const auto& axes = args.attrs.getInts("axes");
  const bool keepdims = args.attrs.getInt("keepdims", 1) != 0;
  bool reduced[kMaxRank] = {};
  for (int i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= x.shape.rank)
      fail(args, "axis " + std::to_string(axes[i]) + " is outside input " + x.shape.str());
    if (i && axes[i] <= axes[i - 1]) fail(args, "axes must be sorted and distinct");
    reduced[axes[i]] = true;
  }
  if (axes.empty())
    for (int i = 0; i < x.shape.rank; ++i) reduced[i] = true;

  kept = x.shape;
  Shape expected;
  count = 1;
  for (int i = 0; i < x.shape.rank; ++i) {
    if (reduced[i]) {
      count *= x.shape[i];
      kept.dims[i] = 1;
      if (keepdims) expected.dims[expected.rank++] = 1;
    } else {
      expected.dims[expected.rank++] = x.shape[i];
    }
  }
  requireShape(args, y, expected, "output");
}

void reduce(const KernelArgs& args, bool mean) {
  const plan::DType dtype = floatingType(args, inMask(0) | outMask(0));
  Shape kept;
  int64_t count = 0;
  checkReduce(args, kept, count);
  int64_t strides[kMaxRank];
  broadcastStrides(kept, args.in[0].shape, strides);
  double* acc = reinterpret_cast<double*>(args.scratch);  // [y.elements]
  const int64_t n = args.out[0].shape.elements();
  // The mean of nothing is NaN (0 / 0), as in numpy.
  const double divisor = mean ? static_cast<double>(count) : 1.0;
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

void addReduceKernels(KernelRegistry& registry) {
  registry.add("reduce_sum", 1, 1, reduceSum, reduceScratch);
  registry.add("reduce_mean", 1, 1, reduceMean, reduceScratch);
}

}  // namespace megatrain::runtime::cpu
