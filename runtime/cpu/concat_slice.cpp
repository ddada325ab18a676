// concat_slice.cpp - concat along an axis, strided slice and its adjoint slice_grad.
//
// All three only move elements, so they work on any dtype through an
// unsigned type of the element's size.
#include <cstring>

#include "CpuKernel.h"
#include "megatrain/plan/DType.h"

namespace megatrain::runtime::cpu {
namespace {

// ---- concat ----

// y = inputs joined along `axis`; every input has y's rank and dims but that one.
void concat(const KernelArgs& args) {
  const Operand& y = args.out[0];
  const int64_t axis = args.attrs.getInt("axis");
  if (axis < 0 || axis >= y.shape.rank)
    fail(args, "axis " + std::to_string(axis) + " out of range for output " + y.shape.str());
  const size_t elementSize = dtypeSize(y.dtype);
  if (elementSize == 0) fail(args, "output dtype is unspecified");
  const int a = static_cast<int>(axis);
  Shape expected = y.shape;
  expected.dims[a] = 0;
  for (int k = 0; k < args.numIn; ++k) {
    const Operand& x = args.in[k];
    requireDType(args, x, y.dtype, "input");
    Shape like = y.shape;
    if (x.shape.rank == y.shape.rank) like.dims[a] = x.shape[a];
    requireShape(args, x, like, "input");
    expected.dims[a] += x.shape[a];
  }
  requireShape(args, y, expected, "output");

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
      std::memcpy(y.data + static_cast<size_t>(o) * outRow + offset,
                  x.data + static_cast<size_t>(o) * run, run);
    offset += run;
  }
}

// ---- slice and slice_grad ----

// Where a slice of `full` reads: `sliced` its shape, `base` the element offset
// of its first element and `strides` the per-dim steps in `full`'s elements.
struct SliceWalk {
  Shape sliced;
  int64_t base = 0;
  int64_t strides[kMaxRank] = {};
};

// Reads starts/ends/steps (one per dim, normalized as docs/ops.md says).
SliceWalk sliceWalk(const KernelArgs& args, const Shape& full) {
  const auto& starts = args.attrs.getInts("starts");
  const auto& ends = args.attrs.getInts("ends");
  const auto& steps = args.attrs.getInts("steps");
  if (starts.size() != full.rank || ends.size() != full.rank || steps.size() != full.rank)
    fail(args, "starts, ends and steps need " + std::to_string(full.rank) + " entries each for " +
                   full.str());
  SliceWalk walk;
  walk.sliced.rank = full.rank;
  int64_t fullStrides[kMaxRank];
  contiguousStrides(full, fullStrides);
  for (int d = 0; d < full.rank; ++d) {
    const int64_t start = starts[d], end = ends[d], step = steps[d];
    if (step < 1)
      fail(args, "step " + std::to_string(step) + " of dim " + std::to_string(d) + " must be >= 1");
    if (start < 0 || start > full[d] || end < 0 || end > full[d])
      fail(args, "range [" + std::to_string(start) + ", " + std::to_string(end) + ") of dim " +
                     std::to_string(d) + " is not within [0, " + std::to_string(full[d]) + "]");
    walk.sliced.dims[d] = end > start ? (end - start + step - 1) / step : 0;
    walk.base += start * fullStrides[d];
    walk.strides[d] = step * fullStrides[d];
  }
  return walk;
}

// y = x[starts : ends : steps] per dim.
void slice(const KernelArgs& args) {
  const Operand &x = args.in[0], &y = args.out[0];
  requireDType(args, y, x.dtype, "output");
  if (dtypeSize(x.dtype) == 0) fail(args, "input dtype is unspecified");
  const SliceWalk walkOf = sliceWalk(args, x.shape);
  requireShape(args, y, walkOf.sliced, "output");
  const int64_t zero[kMaxRank] = {};
  dispatchBytes(dtypeSize(x.dtype), [&](auto tag) {
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
  if (dtypeSize(dy.dtype) == 0) fail(args, "input dtype is unspecified");
  const SliceWalk walkOf = sliceWalk(args, dx.shape);
  requireShape(args, dy, walkOf.sliced, "input");
  std::memset(dx.data, 0, static_cast<size_t>(dx.shape.elements()) * dtypeSize(dx.dtype));
  const int64_t zero[kMaxRank] = {};
  dispatchBytes(dtypeSize(dy.dtype), [&](auto tag) {
    using E = decltype(tag);
    const E* src = dy.as<const E>();
    E* dst = dx.as<E>() + walkOf.base;
    walk(dy.shape, walkOf.strides, zero, [&](int64_t i, int64_t to, int64_t) { dst[to] = src[i]; });
  });
}

}  // namespace

void addConcatSliceKernels(KernelRegistry& registry) {
  registry.add("concat", KernelSignature::kAnyInputs, 1, concat);
  registry.add("slice", 1, 1, slice);
  registry.add("slice_grad", 1, 1, sliceGrad);
}

}  // namespace megatrain::runtime::cpu
