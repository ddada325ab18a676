// concat_slice.cpp - concat along an axis, strided slice and its adjoint slice_grad.
//
// All three only move elements, so they work on any dtype through an
// unsigned type of the element's size.
#include <cstring>

#include "CpuKernel.h"

namespace megatrain::runtime::cpu {
namespace {

// ---- concat ----

// y = inputs joined along `axis`; every input has y's rank and dims but that one.
void concat(const KernelArgs& args) {
  const Operand& y = args.out[0];
  const int64_t axis = args.attrs.getInt("axis");
  const size_t elementSize = dtypeBytes(y.dtype);
  if (elementSize == 0) fail(args, "output dtype is unspecified");
  const int a = static_cast<int>(axis);
  for (int k = 0; k < args.numIn; ++k) requireDType(args, args.in[k], y.dtype, "input");

  // Per outer index (dims before the axis), each input contributes one
  // contiguous run of its axis dim times the inner dims.
  const int64_t outer = y.shape.product(0, a);
  const size_t inner = static_cast<size_t>(y.shape.product(a + 1, y.shape.rank)) * elementSize;
  const size_t outRow = static_cast<size_t>(y.shape[a]) * inner;
  size_t offset = 0;
  for (int k = 0; k < args.numIn; ++k) {
    const Operand& x = args.in[k];
    const size_t run = static_cast<size_t>(x.shape[a]) * inner;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(y.bytes() + static_cast<size_t>(o) * outRow + offset,
                  x.bytes() + static_cast<size_t>(o) * run, run);
    offset += run;
  }
}

// ---- slice and slice_grad ----

// y = x[starts : ends : steps] per dim.
void slice(const KernelArgs& args) {
  const Operand &x = args.in[0], &y = args.out[0];
  requireDType(args, y, x.dtype, "output");
  if (dtypeBytes(x.dtype) == 0) fail(args, "input dtype is unspecified");
  const SliceWalk walkOf = sliceWalk(args);
  const int64_t zero[kMaxRank] = {};
  dispatchBytes(dtypeBytes(x.dtype), [&](auto tag) {
    using E = decltype(tag);
    const E* src = x.as<const E>() + walkOf.base;
    E* dst = y.as<E>();
    walk(y.shape, walkOf.strides, zero, [&](int64_t i, int64_t from, int64_t) { dst[i] = src[from]; });
  });
}

// dx = zeros of the sliced input's shape, dy written where slice read.
void sliceGrad(const KernelArgs& args) {
  const Operand &dy = args.in[0], &dx = args.out[0];
  requireDType(args, dx, dy.dtype, "output");
  if (dtypeBytes(dy.dtype) == 0) fail(args, "input dtype is unspecified");
  const SliceWalk walkOf = sliceGradWalk(args);
  std::memset(dx.data, 0, static_cast<size_t>(dx.shape.elements()) * dtypeBytes(dx.dtype));
  const int64_t zero[kMaxRank] = {};
  dispatchBytes(dtypeBytes(dy.dtype), [&](auto tag) {
    using E = decltype(tag);
    const E* src = dy.as<const E>();
    E* dst = dx.as<E>() + walkOf.base;
    walk(dy.shape, walkOf.strides, zero, [&](int64_t i, int64_t to, int64_t) { dst[to] = src[i]; });
  });
}

}  // namespace

void addConcatSliceKernels(CpuKernelRegistry& registry) {
  registry.add("concat", {concat});
  registry.add("slice", {slice});
  registry.add("slice_grad", {sliceGrad});
}

}  // namespace megatrain::runtime::cpu
