// shape.cpp - reshape, transpose, broadcast_to and its adjoint sum_to.
#include <cstring>

#include "CpuKernel.h"
#include "megatrain/plan/DType.h"

namespace megatrain::runtime::cpu {
namespace {

void requireSameDType(const KernelArgs& args) {
  requireDType(args, args.out[0], args.in[0].dtype, "output");
  if (dtypeSize(args.in[0].dtype) == 0) fail(args, "input dtype is unspecified");
}

// Same bytes, new shape. memmove: the planner may give y the bytes of x.
void reshape(const KernelArgs& args) {
  requireSameDType(args);
  if (args.in[0].shape.elements() != args.out[0].shape.elements())
    fail(args, "cannot reshape " + args.in[0].shape.str() + " to " + args.out[0].shape.str());
  std::memmove(args.out[0].data, args.in[0].data,
               static_cast<size_t>(args.out[0].shape.elements()) * dtypeSize(args.in[0].dtype));
}

// y.shape[i] = x.shape[perm[i]].
void transpose(const KernelArgs& args) {
  requireSameDType(args);
  const Operand &x = args.in[0], &y = args.out[0];
  const auto& perm = args.attrs.getInts("perm");
  if (perm.size() != x.shape.rank)
    fail(args, "perm has " + std::to_string(perm.size()) + " entries, input " + x.shape.str() +
                   " has rank " + std::to_string(x.shape.rank));
  bool seen[kMaxRank] = {};
  Shape expected;
  expected.rank = x.shape.rank;
  int64_t xStrides[kMaxRank], strides[kMaxRank];
  contiguousStrides(x.shape, xStrides);
  for (int i = 0; i < x.shape.rank; ++i) {
    const int64_t p = perm[i];
    if (p < 0 || p >= x.shape.rank || seen[p]) fail(args, "perm is not a permutation");
    seen[p] = true;
    expected.dims[i] = x.shape[static_cast<int>(p)];
    strides[i] = xStrides[p];
  }
  requireShape(args, y, expected, "output");
  const int64_t zero[kMaxRank] = {};
  dispatchBytes(dtypeSize(x.dtype), [&](auto tag) {
    using E = decltype(tag);
    const E* src = x.as<const E>();
    E* dst = y.as<E>();
    walk(y.shape, strides, zero, [&](int64_t i, int64_t from, int64_t) { dst[i] = src[from]; });
  });
}

// True if `small` broadcasts to `large` (right-aligned, 1 stretches).
bool broadcastsTo(const Shape& small, const Shape& large) {
  if (small.rank > large.rank) return false;
  for (int i = 0; i < small.rank; ++i) {
    const int64_t s = small.dims[i], l = large.dims[i + large.rank - small.rank];
    if (s != l && s != 1) return false;
  }
  return true;
}

void broadcastTo(const KernelArgs& args) {
  requireSameDType(args);
  const Operand &x = args.in[0], &y = args.out[0];
  if (!broadcastsTo(x.shape, y.shape))
    fail(args, x.shape.str() + " does not broadcast to " + y.shape.str());
  int64_t strides[kMaxRank];
  const int64_t zero[kMaxRank] = {};
  broadcastStrides(x.shape, y.shape, strides);
  dispatchBytes(dtypeSize(x.dtype), [&](auto tag) {
    using E = decltype(tag);
    const E* src = x.as<const E>();
    E* dst = y.as<E>();
    walk(y.shape, strides, zero, [&](int64_t i, int64_t from, int64_t) { dst[i] = src[from]; });
  });
}

// y = x summed over the dims that broadcast_to(y -> x.shape) would stretch.
void sumTo(const KernelArgs& args) {
  const plan::DType dtype = floatingType(args, inMask(0) | outMask(0));
  const Operand &x = args.in[0], &y = args.out[0];
  if (!broadcastsTo(y.shape, x.shape))
    fail(args, "output " + y.shape.str() + " does not broadcast to input " + x.shape.str());
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

void addShapeKernels(KernelRegistry& registry) {
  registry.add("reshape", 1, 1, reshape);
  registry.add("transpose", 1, 1, transpose);
  registry.add("broadcast_to", 1, 1, broadcastTo);
  registry.add("sum_to", 1, 1, sumTo, sumToScratch);
}

}  // namespace megatrain::runtime::cpu
