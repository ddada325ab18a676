// gather.cu - ONNX Gather along one axis and its scatter-add gradient on the GPU.
//
// data is viewed as [outer, A, inner] around `axis`, y as [outer, N, inner]
// with N the number of indices: y[o, p, q] = data[o, indices[p], q].
// The gradient buckets positions by gathered row (a counting sort in
// scratch: count, scan, place), then writes every ddata element once as the
// double sum of its bucket's dy elements. No float atomics: each sum is in
// double, and only the order of a bucket's terms may vary between runs (it
// comes from an atomic cursor), which moves a double sum by an ulp at most.
// An index outside [-A, A) flags bad data (reported by the backend at the
// next synchronization); gather writes NaN bytes there, gather_grad skips it.
#include "DeviceMath.cuh"

namespace megatrain::runtime::cuda {
namespace {

__device__ __forceinline__ bool validIndex(int64_t index, int64_t a) { return index >= -a && index < a; }
__device__ __forceinline__ int64_t rowOf(int64_t index, int64_t a) { return index < 0 ? index + a : index; }

// ---- kernels ----

// y [outer, n, inner] = data [outer, a, inner] at rows indices [n].
template <typename E>
__global__ void gatherKernel(const E* __restrict__ data, const int64_t* __restrict__ indices, E* __restrict__ y,
                             GatherDims d, int* badData, int step) {
  const int64_t total = d.outer * d.n * d.inner;
  for (int64_t i = globalThread(); i < total; i += gridThreads()) {
    const int64_t q = i % d.inner, t = i / d.inner, p = t % d.n, o = t / d.n;
    const int64_t index = indices[p];
    if (!validIndex(index, d.a)) {
      flagBadData(badData, step);
      y[i] = static_cast<E>(~E(0));  // all ones: NaN for a float element
      continue;
    }
    y[i] = data[(o * d.a + rowOf(index, d.a)) * d.inner + q];
  }
}

// counts[row + 1] += 1 for every valid index; counts [a + 1] zeroed before.
__global__ void countRowsKernel(const int64_t* __restrict__ indices, int* counts, GatherDims d, int* badData,
                                int step) {
  for (int64_t p = globalThread(); p < d.n; p += gridThreads()) {
    const int64_t index = indices[p];
    if (!validIndex(index, d.a)) {
      flagBadData(badData, step);
      continue;
    }
    atomicAdd(&counts[rowOf(index, d.a) + 1], 1);
  }
}

// In place inclusive prefix sum of counts [length]; one block of kScanThreads.
// Afterwards counts[r] is where bucket r starts and counts[a] == n.
constexpr int kScanThreads = 1024;
__global__ void __launch_bounds__(kScanThreads) scanKernel(int* counts, int64_t length) {
  __shared__ int64_t sums[kScanThreads];
  const int tid = threadIdx.x;
  const int64_t chunk = (length + kScanThreads - 1) / kScanThreads;
  const int64_t begin = min(length, tid * chunk), end = min(length, begin + chunk);
  int64_t own = 0;
  for (int64_t k = begin; k < end; ++k) own += counts[k];
  sums[tid] = own;
  __syncthreads();
  for (int offset = 1; offset < kScanThreads; offset *= 2) {  // Hillis-Steele inclusive scan
    const int64_t left = tid >= offset ? sums[tid - offset] : 0;
    __syncthreads();
    sums[tid] += left;
    __syncthreads();
  }
  int64_t running = sums[tid] - own;
  for (int64_t k = begin; k < end; ++k) {
    running += counts[k];
    counts[k] = static_cast<int>(running);
  }
}

// order[starts[row] + slot] = p, slot from a per-row cursor [a] zeroed before.
__global__ void placeRowsKernel(const int64_t* __restrict__ indices, const int* __restrict__ starts, int* cursor,
                                int* order, GatherDims d) {
  for (int64_t p = globalThread(); p < d.n; p += gridThreads()) {
    const int64_t index = indices[p];
    if (!validIndex(index, d.a)) continue;
    const int64_t row = rowOf(index, d.a);
    order[starts[row] + atomicAdd(&cursor[row], 1)] = static_cast<int>(p);
  }
}

// ddata [outer, a, inner]: each element the double sum of dy [outer, n, inner]
// over the positions of its row's bucket.
template <typename T>
__global__ void sumBucketsKernel(const T* __restrict__ dy, const int* __restrict__ starts,
                                 const int* __restrict__ order, T* __restrict__ ddata, GatherDims d) {
  const int64_t total = d.outer * d.a * d.inner;
  for (int64_t i = globalThread(); i < total; i += gridThreads()) {
    const int64_t q = i % d.inner, t = i / d.inner, r = t % d.a, o = t / d.a;
    double acc = 0;
    for (int s = starts[r]; s < starts[r + 1]; ++s) acc += static_cast<double>(dy[(o * d.n + order[s]) * d.inner + q]);
    ddata[i] = static_cast<T>(acc);
  }
}

// ---- launchers ----

void gather(const Launch& launch) {
  const Operand &data = launch.in[0], &indices = launch.in[1], &y = launch.out[0];
  requireDType(launch, y, data.dtype, "output");
  if (dtypeBytes(data.dtype) == 0) fail(launch, "data dtype is unspecified");
  const GatherDims d = gatherDims(launch);
  const int64_t total = y.shape.elements();
  if (total == 0) return;
  const unsigned blocks = gridFor(launch, total, kThreads);
  const DeviceContext& device = *launch.device;
  const int64_t* idx = indices.as<const int64_t>();
  switch (dtypeBytes(data.dtype)) {
    case 1: gatherKernel<<<blocks, kThreads, 0, device.stream>>>(data.as<const uint8_t>(), idx, y.as<uint8_t>(), d, device.badData, launch.step); break;
    case 2: gatherKernel<<<blocks, kThreads, 0, device.stream>>>(data.as<const uint16_t>(), idx, y.as<uint16_t>(), d, device.badData, launch.step); break;
    case 4: gatherKernel<<<blocks, kThreads, 0, device.stream>>>(data.as<const uint32_t>(), idx, y.as<uint32_t>(), d, device.badData, launch.step); break;
    default: gatherKernel<<<blocks, kThreads, 0, device.stream>>>(data.as<const uint64_t>(), idx, y.as<uint64_t>(), d, device.badData, launch.step); break;
  }
  MT_CHECK_LAUNCH(launch);
}

// Scratch: starts [a + 1], cursor [a], order [n], all int.
size_t bucketInts(const GatherDims& d) { return static_cast<size_t>(2 * d.a + 1 + d.n); }

GatherDims checkGatherGrad(const Launch& launch) {
  const GatherDims d = gatherGradDims(launch);
  if (d.n >= INT32_MAX || d.a >= INT32_MAX) fail(launch, "more than 2^31 indices or rows");
  return d;
}

void gatherGrad(const Launch& launch) {
  const DType dtype = cudaFloatingType(launch, inMask(1) | outMask(0));
  const GatherDims d = checkGatherGrad(launch);
  const Operand &indices = launch.in[0], &dy = launch.in[1], &ddata = launch.out[0];
  const int64_t total = ddata.shape.elements();
  if (total == 0) return;
  const DeviceContext& device = *launch.device;
  if (bucketInts(d) * sizeof(int) > device.scratchBytes) fail(launch, "scratch too small (prepare sized it for another shape)");
  int* starts = static_cast<int*>(device.scratch);  // [a + 1]
  int* cursor = starts + d.a + 1;                    // [a]
  int* order = cursor + d.a;                         // [n]
  const int64_t* idx = indices.as<const int64_t>();

  MT_CUDA_CHECK(cudaMemsetAsync(starts, 0, static_cast<size_t>(2 * d.a + 1) * sizeof(int), device.stream));
  if (d.n > 0) {
    countRowsKernel<<<gridFor(launch, d.n, kThreads), kThreads, 0, device.stream>>>(idx, starts, d, device.badData,
                                                                                     launch.step);
    MT_CHECK_LAUNCH(launch);
    scanKernel<<<1, kScanThreads, 0, device.stream>>>(starts, d.a + 1);
    MT_CHECK_LAUNCH(launch);
    placeRowsKernel<<<gridFor(launch, d.n, kThreads), kThreads, 0, device.stream>>>(idx, starts, cursor, order, d);
    MT_CHECK_LAUNCH(launch);
  }
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    sumBucketsKernel<T><<<gridFor(launch, total, kThreads), kThreads, 0, device.stream>>>(
        dy.as<const T>(), starts, order, ddata.as<T>(), d);
  });
  MT_CHECK_LAUNCH(launch);
}

size_t gatherGradScratch(const Launch& launch) { return bucketInts(checkGatherGrad(launch)) * sizeof(int); }

}  // namespace

void addGatherKernels(CudaKernelRegistry& registry) {
  registry.add("gather", {gather, nullptr, "an index lies outside the gathered axis [-A, A)"});
  registry.add("gather_grad", {gatherGrad, gatherGradScratch, "an index lies outside the gathered axis [-A, A)"});
}

}  // namespace megatrain::runtime::cuda
