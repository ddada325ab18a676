// shape.cu - reshape, transpose, broadcast_to and its adjoint sum_to on the GPU.
//
// transpose and broadcast_to are one kernel: y[i] = x[offset(i)] with the
// offsets from a stride table over y (permuted strides, or 0 on stretched
// dims), on the element's bytes, so every dtype moves. When the innermost dim
// is contiguous in x as in y (an attention head transpose [B, S, H, D] ->
// [B, H, S, D], a broadcast over leading dims), the kernel moves 16, 8 or 4
// bytes at a time: the same copy over wider elements, with one index
// computation per vector instead of per element. sum_to is the shared
// sum-over-dims of reduce.cu.
#include "DeviceMath.cuh"

namespace megatrain::runtime::cuda {
namespace {

// ---- kernels ----

// y[i] = x[offset(i)]; y [n] row-major over space; E an unsigned type of the element's size.
template <typename E>
__global__ void stridedCopyKernel(const E* __restrict__ x, E* __restrict__ y, int64_t n,
                                  StridedSpace<1> space) {
  for (int64_t i = globalThread(); i < n; i += gridThreads()) {
    int64_t at[1];
    stridedOffsets(space, i, at);
    y[i] = x[at[0]];
  }
}

// ---- launchers ----

// Same bytes, new shape.
void reshape(const Launch& launch) {
  requireSameDType(launch);
  const Operand &x = launch.in[0], &y = launch.out[0];
  copyBytes(y.data, x.data, static_cast<size_t>(y.shape.elements()) * dtypeBytes(x.dtype),
            launch.device->stream);
}

// The widest vector (16, 8 or 4 bytes, at least one element) that `space`
// can be copied in, for elements of `bytes` bytes: the innermost dim
// contiguous in x, its extent and every other stride a whole number of
// vectors, and both buffers aligned to the vector. Returns `bytes` when none is.
size_t vectorBytes(const StridedSpace<1>& space, size_t bytes, const void* x, const void* y) {
  if (space.rank == 0 || space.strides[0][space.rank - 1] != 1) return bytes;
  for (size_t vector : {size_t(16), size_t(8), size_t(4)}) {
    if (vector <= bytes) break;
    const int64_t lanes = static_cast<int64_t>(vector / bytes);
    bool fits = space.dims[space.rank - 1] % lanes == 0 && reinterpret_cast<uintptr_t>(x) % vector == 0 &&
                reinterpret_cast<uintptr_t>(y) % vector == 0;
    for (int d = 0; d + 1 < space.rank && fits; ++d) fits = space.strides[0][d] % lanes == 0;
    if (fits) return vector;
  }
  return bytes;
}

// y = x read through `space` (a stride table over y's dims).
void launchStridedCopy(const Launch& launch, StridedSpace<1> space) {
  const Operand &x = launch.in[0], &y = launch.out[0];
  int64_t n = y.shape.elements();
  if (n == 0) return;
  coalesce(space);
  const size_t bytes = dtypeBytes(x.dtype);
  const size_t vector = vectorBytes(space, bytes, x.data, y.data);
  if (vector != bytes) {  // the same copy over elements of `vector` bytes
    const int64_t lanes = static_cast<int64_t>(vector / bytes);
    space.dims[space.rank - 1] /= lanes;
    for (int d = 0; d + 1 < space.rank; ++d) space.strides[0][d] /= lanes;
    markNarrow(space);
    n /= lanes;
  }
  const unsigned blocks = gridFor(launch, n, kThreads);
  const cudaStream_t stream = launch.device->stream;
  switch (vector) {
    case 16: stridedCopyKernel<<<blocks, kThreads, 0, stream>>>(x.as<const uint4>(), y.as<uint4>(), n, space); break;
    case 1: stridedCopyKernel<<<blocks, kThreads, 0, stream>>>(x.as<const uint8_t>(), y.as<uint8_t>(), n, space); break;
    case 2: stridedCopyKernel<<<blocks, kThreads, 0, stream>>>(x.as<const uint16_t>(), y.as<uint16_t>(), n, space); break;
    case 4: stridedCopyKernel<<<blocks, kThreads, 0, stream>>>(x.as<const uint32_t>(), y.as<uint32_t>(), n, space); break;
    default: stridedCopyKernel<<<blocks, kThreads, 0, stream>>>(x.as<const uint64_t>(), y.as<uint64_t>(), n, space); break;
  }
  MT_CHECK_LAUNCH(launch);
}

// y.shape[i] = x.shape[perm[i]].
void transpose(const Launch& launch) {
  requireSameDType(launch);
  const Shape& y = launch.out[0].shape;
  StridedSpace<1> space;
  space.rank = y.rank;
  for (int i = 0; i < y.rank; ++i) space.dims[i] = y[i];
  transposeDims(launch, space.strides[0]);
  launchStridedCopy(launch, space);
}

void broadcastTo(const Launch& launch) {
  requireSameDType(launch);
  const Operand &x = launch.in[0], &y = launch.out[0];
  StridedSpace<1> space;
  space.rank = y.shape.rank;
  for (int i = 0; i < y.shape.rank; ++i) space.dims[i] = y.shape[i];
  broadcastStrides(x.shape, y.shape, space.strides[0]);
  launchStridedCopy(launch, space);
}

// y.shape right-aligned against x's rank, leading dims 1: sum_to's kept shape.
Shape keptOfSumTo(const Launch& launch) {
  const Operand &x = launch.in[0], &y = launch.out[0];
  Shape kept;
  kept.rank = x.shape.rank;
  const int lead = x.shape.rank - y.shape.rank;
  for (int i = 0; i < x.shape.rank; ++i) kept.dims[i] = i < lead ? 1 : y.shape[i - lead];
  return kept;
}

// y = x summed over the dims that broadcast_to(y -> x.shape) would stretch.
void sumTo(const Launch& launch) {
  cudaFloatingType(launch, inMask(0) | outMask(0));
  launchSumInto(launch, launch.in[0], keptOfSumTo(launch), 1.0, launch.out[0]);
}

size_t sumToScratch(const Launch& launch) {
  return sumIntoScratch(launch, launch.in[0].shape, keptOfSumTo(launch));
}

}  // namespace

void addShapeKernels(CudaKernelRegistry& registry) {
  registry.add("reshape", {reshape});
  registry.add("transpose", {transpose});
  registry.add("broadcast_to", {broadcastTo});
  registry.add("sum_to", {sumTo, sumToScratch});
}

}  // namespace megatrain::runtime::cuda
