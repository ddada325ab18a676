// concat_slice.cu - concat along an axis, strided slice and its adjoint slice_grad on the GPU.
//
// All three only move elements, on their bytes (any dtype). concat launches
// one copy per input into its stretch of every output row; slice reads and
// slice_grad writes through the same coalesced stride table over the slice.
#include "DeviceMath.cuh"

namespace megatrain::runtime::cuda {
namespace {

// ---- kernels ----

// x [outer, run] into y [outer, outRow] at column `offset`: n = outer * run.
template <typename E>
__global__ void concatKernel(const E* x, E* y, int64_t n, int64_t run, int64_t outRow, int64_t offset) {
  for (int64_t i = globalThread(); i < n; i += gridThreads()) {
    const int64_t o = i / run, j = i - o * run;
    y[o * outRow + offset + j] = x[i];
  }
}

// y[i] = x[offset(i)]; y [n] row-major over space (x already advanced to the slice's first element).
template <typename E>
__global__ void sliceKernel(const E* x, E* y, int64_t n, StridedSpace<1> space) {
  for (int64_t i = globalThread(); i < n; i += gridThreads()) {
    int64_t at[1];
    stridedOffsets(space, i, at);
    y[i] = x[at[0]];
  }
}

// dx[offset(i)] = dy[i]; the positions are distinct (steps >= 1), so no races.
template <typename E>
__global__ void sliceScatterKernel(const E* dy, E* dx, int64_t n, StridedSpace<1> space) {
  for (int64_t i = globalThread(); i < n; i += gridThreads()) {
    int64_t at[1];
    stridedOffsets(space, i, at);
    dx[at[0]] = dy[i];
  }
}

// Calls f(E{}) with E an unsigned type of `bytes` bytes.
template <typename F>
void dispatchBytes(size_t bytes, F&& f) {
  switch (bytes) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    default: f(uint64_t{}); break;
  }
}

// ---- concat ----

void concat(const Launch& launch) {
  const Operand& y = launch.out[0];
  const int64_t axis = launch.attrs.getInt("axis");
  if (axis < 0 || axis >= y.shape.rank)
    fail(launch, "axis " + std::to_string(axis) + " out of range for output " + y.shape.str());
  const size_t elementSize = dtypeBytes(y.dtype);
  if (elementSize == 0) fail(launch, "output dtype is unspecified");
  const int a = static_cast<int>(axis);
  Shape expected = y.shape;
  expected.dims[a] = 0;
  for (int k = 0; k < launch.numIn; ++k) {
    const Operand& x = launch.in[k];
    requireDType(launch, x, y.dtype, "input");
    Shape like = y.shape;
    if (x.shape.rank == y.shape.rank) like.dims[a] = x.shape[a];
    requireShape(launch, x, like, "input");
    expected.dims[a] += x.shape[a];
  }
  requireShape(launch, y, expected, "output");

  const int64_t outer = y.shape.product(0, a);
  const int64_t inner = y.shape.product(a + 1, y.shape.rank);
  const int64_t outRow = y.shape[a] * inner;
  int64_t offset = 0;
  for (int k = 0; k < launch.numIn; ++k) {
    const Operand& x = launch.in[k];
    const int64_t run = x.shape[a] * inner, n = outer * run;
    if (n > 0) {
      dispatchBytes(elementSize, [&](auto tag) {
        using E = decltype(tag);
        concatKernel<E><<<gridFor(launch, n, kThreads), kThreads, 0, launch.device->stream>>>(
            x.as<const E>(), y.as<E>(), n, run, outRow, offset);
      });
      MT_CHECK_LAUNCH(launch);
    }
    offset += run;
  }
}

// ---- slice and slice_grad ----

// The slice of `full` the attributes select: a stride table over the
// slice's dims into `full`, and the element offset of its first element.
struct SliceWalk {
  Shape sliced;
  int64_t base = 0;
  StridedSpace<1> space;
};

SliceWalk sliceWalk(const Launch& launch, const Shape& full) {
  const std::vector<int64_t>& starts = launch.attrs.getInts("starts");
  const std::vector<int64_t>& ends = launch.attrs.getInts("ends");
  const std::vector<int64_t>& steps = launch.attrs.getInts("steps");
  const size_t rank = static_cast<size_t>(full.rank);
  if (starts.size() != rank || ends.size() != rank || steps.size() != rank)
    fail(launch, "starts, ends and steps need " + std::to_string(full.rank) + " entries each for " + full.str());
  SliceWalk walk;
  walk.sliced.rank = walk.space.rank = full.rank;
  int64_t fullStrides[kMaxRank];
  contiguousStrides(full, fullStrides);
  for (int d = 0; d < full.rank; ++d) {
    const int64_t start = starts[d], end = ends[d], step = steps[d];
    if (step < 1) fail(launch, "step " + std::to_string(step) + " of dim " + std::to_string(d) + " must be >= 1");
    if (start < 0 || start > full[d] || end < 0 || end > full[d])
      fail(launch, "range [" + std::to_string(start) + ", " + std::to_string(end) + ") of dim " + std::to_string(d) +
                       " is not within [0, " + std::to_string(full[d]) + "]");
    walk.sliced.dims[d] = walk.space.dims[d] = end > start ? (end - start + step - 1) / step : 0;
    walk.base += start * fullStrides[d];
    walk.space.strides[0][d] = step * fullStrides[d];
  }
  return walk;
}

void slice(const Launch& launch) {
  const Operand &x = launch.in[0], &y = launch.out[0];
  requireSameDType(launch);
  SliceWalk walk = sliceWalk(launch, x.shape);
  requireShape(launch, y, walk.sliced, "output");
  const int64_t n = y.shape.elements();
  if (n == 0) return;
  coalesce(walk.space);
  dispatchBytes(dtypeBytes(x.dtype), [&](auto tag) {
    using E = decltype(tag);
    sliceKernel<E><<<gridFor(launch, n, kThreads), kThreads, 0, launch.device->stream>>>(
        x.as<const E>() + walk.base, y.as<E>(), n, walk.space);
  });
  MT_CHECK_LAUNCH(launch);
}

void sliceGrad(const Launch& launch) {
  const Operand &dy = launch.in[0], &dx = launch.out[0];
  requireSameDType(launch);
  SliceWalk walk = sliceWalk(launch, dx.shape);
  requireShape(launch, dy, walk.sliced, "input");
  const size_t elementSize = dtypeBytes(dx.dtype);
  MT_CUDA_CHECK(cudaMemsetAsync(dx.data, 0, static_cast<size_t>(dx.shape.elements()) * elementSize,
                                launch.device->stream));
  const int64_t n = dy.shape.elements();
  if (n == 0) return;
  coalesce(walk.space);
  dispatchBytes(elementSize, [&](auto tag) {
    using E = decltype(tag);
    sliceScatterKernel<E><<<gridFor(launch, n, kThreads), kThreads, 0, launch.device->stream>>>(
        dy.as<const E>(), dx.as<E>() + walk.base, n, walk.space);
  });
  MT_CHECK_LAUNCH(launch);
}

}  // namespace

void addConcatSliceKernels(KernelTable& table) {
  table.add("concat", kAnyInputs, 1, concat);
  table.add("slice", 1, 1, slice);
  table.add("slice_grad", 1, 1, sliceGrad);
}

}  // namespace megatrain::runtime::cuda
