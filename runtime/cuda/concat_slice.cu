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
  const size_t elementSize = dtypeBytes(y.dtype);
  if (elementSize == 0) fail(launch, "output dtype is unspecified");
  const int a = static_cast<int>(axis);
  for (int k = 0; k < launch.numIn; ++k) requireDType(launch, launch.in[k], y.dtype, "input");

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

// A slice's walk (megatrain/kernels/ShapeRules.h) as a stride table over the sliced dims.
StridedSpace<1> spaceOf(const SliceWalk& walk) {
  StridedSpace<1> space;
  space.rank = walk.sliced.rank;
  for (int d = 0; d < space.rank; ++d) {
    space.dims[d] = walk.sliced.dims[d];
    space.strides[0][d] = walk.strides[d];
  }
  return space;
}

void slice(const Launch& launch) {
  const Operand &x = launch.in[0], &y = launch.out[0];
  requireSameDType(launch);
  const SliceWalk walk = sliceWalk(launch);
  StridedSpace<1> space = spaceOf(walk);
  const int64_t n = y.shape.elements();
  if (n == 0) return;
  coalesce(space);
  dispatchBytes(dtypeBytes(x.dtype), [&](auto tag) {
    using E = decltype(tag);
    sliceKernel<E><<<gridFor(launch, n, kThreads), kThreads, 0, launch.device->stream>>>(
        x.as<const E>() + walk.base, y.as<E>(), n, space);
  });
  MT_CHECK_LAUNCH(launch);
}

void sliceGrad(const Launch& launch) {
  const Operand &dy = launch.in[0], &dx = launch.out[0];
  requireSameDType(launch);
  const SliceWalk walk = sliceGradWalk(launch);
  StridedSpace<1> space = spaceOf(walk);
  const size_t elementSize = dtypeBytes(dx.dtype);
  MT_CUDA_CHECK(cudaMemsetAsync(dx.data, 0, static_cast<size_t>(dx.shape.elements()) * elementSize,
                                launch.device->stream));
  const int64_t n = dy.shape.elements();
  if (n == 0) return;
  coalesce(space);
  dispatchBytes(elementSize, [&](auto tag) {
    using E = decltype(tag);
    sliceScatterKernel<E><<<gridFor(launch, n, kThreads), kThreads, 0, launch.device->stream>>>(
        dy.as<const E>(), dx.as<E>() + walk.base, n, space);
  });
  MT_CHECK_LAUNCH(launch);
}

}  // namespace

void addConcatSliceKernels(CudaKernelRegistry& registry) {
  registry.add("concat", {concat});
  registry.add("slice", {slice});
  registry.add("slice_grad", {sliceGrad});
}

}  // namespace megatrain::runtime::cuda
