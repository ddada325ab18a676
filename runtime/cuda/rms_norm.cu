// rms_norm.cu - RMS normalization over dims [axis, rank) times a weight, and its gradient, on the GPU.
//
// x is viewed as [rows, d] with d = prod(x.shape[axis:]); weight has shape
// x.shape[axis:]. Per row: rstd = 1/sqrt(mean(x^2) + eps), n = x * rstd,
// y = n * weight; sums in double, as the CPU twin computes them. A warp takes
// a row. The gradient runs in two parts: a warp per row writes dx and keeps
// the row's rstd in scratch; then column sums give dweight = sum dy * n,
// split over gridDim.y when d alone cannot fill the GPU (double partials in
// scratch, added in split order by a third kernel: deterministic).
#include <algorithm>

#include "ColumnSums.cuh"
#include "DeviceMath.cuh"

namespace megatrain::runtime::cuda {
namespace {

// Scratch: rstd [rows] then, when split, partials [splits, d]; doubles.
size_t gradScratchDoubles(const NormRows& r, const ColumnSplit& c) {
  return static_cast<size_t>(r.rows) + (c.splits > 1 ? static_cast<size_t>(c.splits) * r.d : 0);
}

// 1/sqrt(mean(x^2) + epsilon) of the row at xr, summed across the warp; every lane gets it.
template <typename T>
__device__ double rowRstd(const T* xr, int64_t d, double epsilon, int lane) {
  double squares = 0;
  for (int64_t j = lane; j < d; j += 32) {
    const double v = static_cast<double>(xr[j]);
    squares += v * v;
  }
  return 1.0 / sqrt(warpSum(squares) / static_cast<double>(d) + epsilon);
}

// ---- kernels ----

// y = x * rstd * weight; x, y [rows, d], weight [d].
template <typename T>
__global__ void rmsNormKernel(const T* __restrict__ x, const T* __restrict__ weight, T* __restrict__ y, NormRows r) {
  const int lane = groupMember<32>();
  for (int64_t row = firstGroup<32>(); row < r.rows; row += groupCount<32>()) {
    const T* xr = x + row * r.d;
    T* yr = y + row * r.d;
    const double rstd = rowRstd(xr, r.d, r.epsilon, lane);
    for (int64_t j = lane; j < r.d; j += 32)
      yr[j] = static_cast<T>(static_cast<double>(xr[j]) * rstd * static_cast<double>(weight[j]));
  }
}

// With g = dy * weight and n = x * rstd: dx = rstd * (g - n * mean(g * n))
// per row; rstd [rows]. x, dy, dx [rows, d], weight [d].
template <typename T>
__global__ void rmsNormDxKernel(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ dy,
                                T* __restrict__ dx, double* __restrict__ rstds, NormRows r) {
  const int lane = groupMember<32>();
  for (int64_t row = firstGroup<32>(); row < r.rows; row += groupCount<32>()) {
    const T* xr = x + row * r.d;
    const T* dyr = dy + row * r.d;
    T* dxr = dx + row * r.d;
    const double rstd = rowRstd(xr, r.d, r.epsilon, lane);
    double sumGN = 0;
    for (int64_t j = lane; j < r.d; j += 32) {
      const double n = static_cast<double>(xr[j]) * rstd;
      sumGN += static_cast<double>(dyr[j]) * static_cast<double>(weight[j]) * n;
    }
    const double meanGN = warpSum(sumGN) / static_cast<double>(r.d);
    for (int64_t j = lane; j < r.d; j += 32) {
      const double n = static_cast<double>(xr[j]) * rstd;
      const double g = static_cast<double>(dyr[j]) * static_cast<double>(weight[j]);
      dxr[j] = static_cast<T>(rstd * (g - n * meanGN));
    }
    if (lane == 0) rstds[row] = rstd;
  }
}

// Block (kColumns, kColumnLanes), grid (blocks, splits): column j sums dy * n
// over its split's rows. One split writes dweight [d]; more write partials
// [splits, d].
template <typename T>
__global__ void __launch_bounds__(kThreads) rmsNormColumnsKernel(const T* __restrict__ x, const T* __restrict__ dy,
                                                                 const double* __restrict__ rstds, T* dweight,
                                                                 double* partial, NormRows r, int64_t chunk) {
  __shared__ double sums[kColumnLanes][kColumns];
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kColumns + threadIdx.x;
  double sum = 0;
  if (j < r.d) {
    const int64_t begin = blockIdx.y * chunk, end = min(r.rows, begin + chunk);
    for (int64_t row = begin + threadIdx.y; row < end; row += kColumnLanes)
      sum += static_cast<double>(dy[row * r.d + j]) * (static_cast<double>(x[row * r.d + j]) * rstds[row]);
  }
  sums[threadIdx.y][threadIdx.x] = sum;
  for (int s = kColumnLanes / 2; s > 0; s /= 2) {
    __syncthreads();
    if (threadIdx.y < s) sums[threadIdx.y][threadIdx.x] += sums[threadIdx.y + s][threadIdx.x];
  }
  if (threadIdx.y == 0 && j < r.d) {
    if (gridDim.y == 1) dweight[j] = static_cast<T>(sums[0][threadIdx.x]);
    else partial[blockIdx.y * r.d + j] = sums[0][threadIdx.x];
  }
}

// dweight [d] = partials [splits, d] added in split order.
template <typename T>
__global__ void rmsNormSplitsKernel(const double* __restrict__ partial, T* dweight, int64_t d, unsigned splits) {
  for (int64_t j = globalThread(); j < d; j += gridThreads()) {
    double sum = 0;
    for (unsigned s = 0; s < splits; ++s) sum += partial[s * d + j];
    dweight[j] = static_cast<T>(sum);
  }
}

// ---- launchers ----

void rmsNorm(const Launch& launch) {
  const DType dtype = cudaFloatingType(launch, inMask(0) | inMask(1) | outMask(0));
  const NormRows r = rmsNormRows(launch);
  if (r.rows == 0 || r.d == 0) return;
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    rmsNormKernel<T><<<gridFor(launch, r.rows * 32, kThreads), kThreads, 0, launch.device->stream>>>(
        launch.in[0].as<const T>(), launch.in[1].as<const T>(), launch.out[0].as<T>(), r);
  });
  MT_CHECK_LAUNCH(launch);
}

void rmsNormGrad(const Launch& launch) {
  const DType dtype = cudaFloatingType(launch, inMask(0) | inMask(1) | inMask(2) | outMask(0) | outMask(1));
  const NormRows r = rmsNormGradRows(launch);
  if (r.d == 0) return;
  const ColumnSplit c = planColumns(launch, r);
  const DeviceContext& device = *launch.device;
  if (gradScratchDoubles(r, c) * sizeof(double) > device.scratchBytes)
    fail(launch, "scratch too small (prepare sized it for another shape)");
  double* rstds = static_cast<double*>(device.scratch);  // [rows]
  double* partial = rstds + r.rows;                       // [splits, d]
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = launch.in[0].as<const T>();
    const T* dy = launch.in[2].as<const T>();
    T* dweight = launch.out[1].as<T>();
    if (r.rows > 0) {
      rmsNormDxKernel<T><<<gridFor(launch, r.rows * 32, kThreads), kThreads, 0, device.stream>>>(
          x, launch.in[1].as<const T>(), dy, launch.out[0].as<T>(), rstds, r);
      MT_CHECK_LAUNCH(launch);
    }
    rmsNormColumnsKernel<T><<<dim3(c.blocks, c.splits), dim3(kColumns, kColumnLanes), 0, device.stream>>>(
        x, dy, rstds, dweight, partial, r, c.chunk);
    MT_CHECK_LAUNCH(launch);
    if (c.splits > 1) {
      rmsNormSplitsKernel<T><<<gridFor(launch, r.d, kThreads), kThreads, 0, device.stream>>>(partial, dweight, r.d,
                                                                                             c.splits);
      MT_CHECK_LAUNCH(launch);
    }
  });
}

size_t rmsNormGradScratch(const Launch& launch) {
  const NormRows r = rmsNormGradRows(launch);
  return gradScratchDoubles(r, planColumns(launch, r)) * sizeof(double);
}

}  // namespace

void addRmsNormKernels(CudaKernelRegistry& registry) {
  registry.add("rms_norm", {rmsNorm});
  registry.add("rms_norm_grad", {rmsNormGrad, rmsNormGradScratch});
}

}  // namespace megatrain::runtime::cuda
