// shape.cpp - reshape, transpose, broadcast_to and its adjoint sum_to.
#include <cstring>

#include "CpuKernel.h"

namespace megatrain::runtime::cpu {
namespace {

// Same bytes, new shape. memmove: the planner may give y the bytes of x.
void reshape(const KernelArgs& args) {
  requireSameDType(args);
  std::memmove(args.out[0].data, args.in[0].data,
               static_cast<size_t>(args.out[0].shape.elements()) * dtypeBytes(args.in[0].dtype));
}

// y.shape[i] = x.shape[perm[i]].
void transpose(const KernelArgs& args) {
  requireSameDType(args);
  const Operand &x = args.in[0], &y = args.out[0];
  int64_t strides[kMaxRank];
  transposeDims(args, strides);
  const int64_t zero[kMaxRank] = {};
  dispatchBytes(dtypeBytes(x.dtype), [&](auto tag) {
    using E = decltype(tag);
    const E* src = x.as<const E>();
    E* dst = y.as<E>();
    walk(y.shape, strides, zero, [&](int64_t i, int64_t from, int64_t) { dst[i] = src[from]; });
  });
}

void broadcastTo(const KernelArgs& args) {
  requireSameDType(args);
  const Operand &x = args.in[0], &y = args.out[0];
  int64_t strides[kMaxRank];
  const int64_t zero[kMaxRank] = {};
  broadcastStrides(x.shape, y.shape, strides);
  dispatchBytes(dtypeBytes(x.dtype), [&](auto tag) {
    using E = decltype(tag);
    const E* src = x.as<const E>();
    E* dst = y.as<E>();
    walk(y.shape, strides, zero, [&](int64_t i, int64_t from, int64_t) { dst[i] = src[from]; });
  });
}

// y = x summed over the dims that broadcast_to(y -> x.shape) would stretch.
void sumTo(const KernelArgs& args) {
  const DType dtype = cpuFloatingType(args, inMask(0) | outMask(0));
  const Operand &x = args.in[0], &y = args.out[0];
  int64_t strides[kMaxRank];
  broadcastStrides(y.shape, x.shape, strides);
  double* acc = reinterpret_cast<double*>(args.scratch);  // [y.elements]
  const int64_t n = y.shape.elements();
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    sumInto(x.as<const T>(), x.shape, strides, acc, n);
    T* out = y.as<T>();
    for (int64_t j = 0; j < n; ++j) out[j] = static_cast<T>(acc[j]);
  });
}

size_t sumToScratch(const KernelArgs& args) {
  return static_cast<size_t>(args.out[0].shape.elements()) * sizeof(double);
}

}  // namespace

void addShapeKernels(CpuKernelRegistry& registry) {
  registry.add("reshape", {reshape});
  registry.add("transpose", {transpose});
  registry.add("broadcast_to", {broadcastTo});
  registry.add("sum_to", {sumTo, sumToScratch});
}

}  // namespace megatrain::runtime::cpu
