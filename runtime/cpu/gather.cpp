// gather.cpp - ONNX Gather along one axis and its scatter-add gradient.
//
// data is viewed as [outer, A, inner] around `axis` and y as [outer, N, inner]
// with N the number of indices: y[o, p, q] = data[o, indices[p], q].
#include "CpuKernel.h"
#include "megatrain/plan/DType.h"

namespace megatrain::runtime::cpu {
namespace {

struct GatherDims {
  int64_t outer, a, inner, n;
};

// `data` is the gathered-from shape (data or ddata), `gathered` the gathered
// shape (y or dy); checks gathered = data[:axis] + indices.shape + data[axis+1:].
GatherDims checkGather(const KernelArgs& args, const Operand& data, const Operand& indices,
                       const Operand& gathered, const char* gatheredRole) {
  requireDType(args, indices, plan::I64, "indices");
  const int64_t axis = args.attrs.getInt("axis", 0);
  if (axis < 0 || axis >= data.shape.rank)
    fail(args, "axis " + std::to_string(axis) + " is outside " + data.shape.str());
  const int ax = static_cast<int>(axis);
  Shape expected;
  expected.rank = data.shape.rank - 1 + indices.shape.rank;
  if (expected.rank > kMaxRank) fail(args, "result rank exceeds " + std::to_string(kMaxRank));
  int at = 0;
  for (int i = 0; i < ax; ++i) expected.dims[at++] = data.shape[i];
  for (int i = 0; i < indices.shape.rank; ++i) expected.dims[at++] = indices.shape[i];
  for (int i = ax + 1; i < data.shape.rank; ++i) expected.dims[at++] = data.shape[i];
  requireShape(args, gathered, expected, gatheredRole);
  return {data.shape.product(0, ax), data.shape[ax], data.shape.product(ax + 1, data.shape.rank),
          indices.shape.elements()};
}

// indices[p] made non-negative; Error if outside [-a, a).
int64_t normalizedIndex(const KernelArgs& args, const int64_t* indices, int64_t p, int64_t a) {
  int64_t index = indices[p];
  if (index < -a || index >= a)
    fail(args, "index " + std::to_string(index) + " at position " + std::to_string(p) +
                   " is outside [" + std::to_string(-a) + ", " + std::to_string(a) + ")");
  return index < 0 ? index + a : index;
}

void gather(const KernelArgs& args) {
  const Operand &data = args.in[0], &indices = args.in[1], &y = args.out[0];
  requireDType(args, y, data.dtype, "output");
  const GatherDims d = checkGather(args, data, indices, y, "output");
  const int64_t* idx = indices.as<const int64_t>();
  dispatchBytes(dtypeSize(data.dtype), [&](auto tag) {
    using E = decltype(tag);
    const E* src = data.as<const E>();
    E* dst = y.as<E>();
    for (int64_t p = 0; p < d.n; ++p) {
      const int64_t row = normalizedIndex(args, idx, p, d.a);
      for (int64_t o = 0; o < d.outer; ++o)
        for (int64_t q = 0; q < d.inner; ++q)
          dst[(o * d.n + p) * d.inner + q] = src[(o * d.a + row) * d.inner + q];
    }
  });
}

// ddata = zeros, then ddata[o, indices[p], q] += dy[o, p, q]. Positions are
// bucketed by row (a stable counting sort in scratch) so that each row sums its
// contributions in double, in position order, without a ddata-sized buffer.
template <typename T>
void gatherGradImpl(const KernelArgs& args, const GatherDims& d) {
  const int64_t* idx = args.in[0].as<const int64_t>();
  const T* dy = args.in[1].as<const T>();
  T* ddata = args.out[0].as<T>();
  int64_t* order = reinterpret_cast<int64_t*>(args.scratch);  // [n] positions by row
  int64_t* end = order + d.n;                                  // [a + 1] bucket ends
  double* acc = reinterpret_cast<double*>(end + d.a + 1);      // [inner]

  for (int64_t r = 0; r <= d.a; ++r) end[r] = 0;
  for (int64_t p = 0; p < d.n; ++p) ++end[normalizedIndex(args, idx, p, d.a) + 1];
  for (int64_t r = 1; r <= d.a; ++r) end[r] += end[r - 1];  // end[r] = start of bucket r
  for (int64_t p = 0; p < d.n; ++p) {
    const int64_t row = idx[p] < 0 ? idx[p] + d.a : idx[p];
    order[end[row]++] = p;  // afterwards end[r] = end of bucket r
  }

  for (int64_t o = 0; o < d.outer; ++o)
    for (int64_t r = 0; r < d.a; ++r) {
      for (int64_t q = 0; q < d.inner; ++q) acc[q] = 0;
      for (int64_t s = r == 0 ? 0 : end[r - 1]; s < end[r]; ++s) {
        const T* src = dy + (o * d.n + order[s]) * d.inner;
        for (int64_t q = 0; q < d.inner; ++q) acc[q] += static_cast<double>(src[q]);
      }
      T* dst = ddata + (o * d.a + r) * d.inner;
      for (int64_t q = 0; q < d.inner; ++q) dst[q] = static_cast<T>(acc[q]);
    }
}

void gatherGrad(const KernelArgs& args) {
  const plan::DType dtype = floatingType(args, inMask(1) | outMask(0));
  const GatherDims d = checkGather(args, args.out[0], args.in[0], args.in[1], "dy");
  dispatchFloating(dtype, [&](auto tag) { gatherGradImpl<decltype(tag)>(args, d); });
}

size_t gatherGradScratch(const KernelArgs& args) {
  const Shape& ddata = args.out[0].shape;
  const int64_t axis = args.attrs.getInt("axis", 0);
  if (axis < 0 || axis >= ddata.rank) return 0;  // the launch reports the bad axis
  const int ax = static_cast<int>(axis);
  const int64_t n = args.in[0].shape.elements(), a = ddata[ax];
  const int64_t inner = ddata.product(ax + 1, ddata.rank);
  return static_cast<size_t>(n + a + 1) * sizeof(int64_t) + static_cast<size_t>(inner) * sizeof(double);
}

}  // namespace

void addGatherKernels(KernelRegistry& registry) {
  registry.add("gather", 2, 1, gather);
  registry.add("gather_grad", 2, 1, gatherGrad, gatherGradScratch);
}

}  // namespace megatrain::runtime::cpu
