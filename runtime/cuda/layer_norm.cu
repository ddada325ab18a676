// layer_norm.cu - layer normalization over dims [axis, rank) and its gradient on the GPU.
//
// x is viewed as [rows, d] with d = prod(x.shape[axis:]); scale and bias have
// shape x.shape[axis:]. Per row: mean, biased variance, rstd = 1/sqrt(var + eps),
// n = (x - mean) * rstd, y = n * scale + bias; statistics in double, as the
// CPU twin computes them. A warp takes a row. The gradient runs in two
// parts: a warp per row writes dx and keeps the row's mean and rstd in
// scratch; then column sums give dscale = sum dy * n and dbias = sum dy, split
// over gridDim.y when d alone cannot fill the GPU (double partials in
// scratch, added in split order by a third kernel: deterministic).
#include <algorithm>

#include "ColumnSums.cuh"
#include "DeviceMath.cuh"

namespace megatrain::runtime::cuda {
namespace {

// Scratch: stats [rows, 2] then, when split, partials [2, splits, d]; doubles.
size_t gradScratchDoubles(const NormRows& r, const ColumnSplit& c) {
  return static_cast<size_t>(2 * r.rows) + (c.splits > 1 ? static_cast<size_t>(2) * c.splits * r.d : 0);
}

// Mean and rstd of the row at xr, summed across the warp; every lane gets them.
template <typename T>
__device__ void rowStats(const T* xr, int64_t d, double epsilon, int lane, double& mean, double& rstd) {
  double sum = 0;
  for (int64_t j = lane; j < d; j += 32) sum += static_cast<double>(xr[j]);
  mean = warpSum(sum) / static_cast<double>(d);
  double squares = 0;
  for (int64_t j = lane; j < d; j += 32) {
    const double c = static_cast<double>(xr[j]) - mean;
    squares += c * c;
  }
  rstd = 1.0 / sqrt(warpSum(squares) / static_cast<double>(d) + epsilon);
}

// ---- kernels ----

// y = n * scale + bias; x, y [rows, d], scale, bias [d].
template <typename T>
__global__ void layerNormKernel(const T* __restrict__ x, const T* __restrict__ scale, const T* __restrict__ bias,
                                T* __restrict__ y, NormRows r) {
  const int lane = groupMember<32>();
  for (int64_t row = firstGroup<32>(); row < r.rows; row += groupCount<32>()) {
    const T* xr = x + row * r.d;
    T* yr = y + row * r.d;
    double mean, rstd;
    rowStats(xr, r.d, r.epsilon, lane, mean, rstd);
    for (int64_t j = lane; j < r.d; j += 32) {
      const double n = (static_cast<double>(xr[j]) - mean) * rstd;
      yr[j] = static_cast<T>(n * static_cast<double>(scale[j]) + static_cast<double>(bias[j]));
    }
  }
}

// With g = dy * scale: dx = rstd * (g - mean(g) - n * mean(g * n)) per row;
// stats [rows, 2] = (mean, rstd). x, dy, dx [rows, d], scale [d].
template <typename T>
__global__ void layerNormDxKernel(const T* __restrict__ x, const T* __restrict__ scale, const T* __restrict__ dy,
                                  T* __restrict__ dx, double* __restrict__ stats, NormRows r) {
  const int lane = groupMember<32>();
  for (int64_t row = firstGroup<32>(); row < r.rows; row += groupCount<32>()) {
    const T* xr = x + row * r.d;
    const T* dyr = dy + row * r.d;
    T* dxr = dx + row * r.d;
    double mean, rstd;
    rowStats(xr, r.d, r.epsilon, lane, mean, rstd);
    double sumG = 0, sumGN = 0;
    for (int64_t j = lane; j < r.d; j += 32) {
      const double n = (static_cast<double>(xr[j]) - mean) * rstd;
      const double g = static_cast<double>(dyr[j]) * static_cast<double>(scale[j]);
      sumG += g;
      sumGN += g * n;
    }
    const double meanG = warpSum(sumG) / static_cast<double>(r.d);
    const double meanGN = warpSum(sumGN) / static_cast<double>(r.d);
    for (int64_t j = lane; j < r.d; j += 32) {
      const double n = (static_cast<double>(xr[j]) - mean) * rstd;
      const double g = static_cast<double>(dyr[j]) * static_cast<double>(scale[j]);
      dxr[j] = static_cast<T>(rstd * (g - meanG - n * meanGN));
    }
    if (lane == 0) {
      stats[2 * row] = mean;
      stats[2 * row + 1] = rstd;
    }
  }
}

// Block (kColumns, kColumnLanes), grid (blocks, splits): column j sums dy * n
// and dy over its split's rows. One split writes dscale, dbias [d]; more write
// partials [2, splits, d].
template <typename T>
__global__ void __launch_bounds__(kThreads) layerNormColumnsKernel(const T* __restrict__ x, const T* __restrict__ dy,
                                                                   const double* __restrict__ stats, T* dscale, T* dbias,
                                                                   double* partial, NormRows r, int64_t chunk) {
  __shared__ double sums[2][kColumnLanes][kColumns];
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kColumns + threadIdx.x;
  double sumScale = 0, sumBias = 0;
  if (j < r.d) {
    const int64_t begin = blockIdx.y * chunk, end = min(r.rows, begin + chunk);
    for (int64_t row = begin + threadIdx.y; row < end; row += kColumnLanes) {
      const double g = static_cast<double>(dy[row * r.d + j]);
      const double n = (static_cast<double>(x[row * r.d + j]) - stats[2 * row]) * stats[2 * row + 1];
      sumScale += g * n;
      sumBias += g;
    }
  }
  sums[0][threadIdx.y][threadIdx.x] = sumScale;
  sums[1][threadIdx.y][threadIdx.x] = sumBias;
  for (int s = kColumnLanes / 2; s > 0; s /= 2) {
    __syncthreads();
    if (threadIdx.y < s) {
      sums[0][threadIdx.y][threadIdx.x] += sums[0][threadIdx.y + s][threadIdx.x];
      sums[1][threadIdx.y][threadIdx.x] += sums[1][threadIdx.y + s][threadIdx.x];
    }
  }
  if (threadIdx.y == 0 && j < r.d) {
    if (gridDim.y == 1) {
      dscale[j] = static_cast<T>(sums[0][0][threadIdx.x]);
      dbias[j] = static_cast<T>(sums[1][0][threadIdx.x]);
    } else {
      partial[blockIdx.y * r.d + j] = sums[0][0][threadIdx.x];
      partial[(gridDim.y + blockIdx.y) * r.d + j] = sums[1][0][threadIdx.x];
    }
  }
}

// dscale, dbias [d] = partials [2, splits, d] added in split order.
template <typename T>
__global__ void layerNormSplitsKernel(const double* __restrict__ partial, T* dscale, T* dbias, int64_t d,
                                      unsigned splits) {
  for (int64_t j = globalThread(); j < d; j += gridThreads()) {
    double sumScale = 0, sumBias = 0;
    for (unsigned s = 0; s < splits; ++s) {
      sumScale += partial[s * d + j];
      sumBias += partial[(splits + s) * d + j];
    }
    dscale[j] = static_cast<T>(sumScale);
    dbias[j] = static_cast<T>(sumBias);
  }
}

// ---- launchers ----

void layerNorm(const Launch& launch) {
  const DType dtype = cudaFloatingType(launch, inMask(0) | inMask(1) | inMask(2) | outMask(0));
  const NormRows r = layerNormRows(launch);
  if (r.rows == 0 || r.d == 0) return;
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    layerNormKernel<T><<<gridFor(launch, r.rows * 32, kThreads), kThreads, 0, launch.device->stream>>>(
        launch.in[0].as<const T>(), launch.in[1].as<const T>(), launch.in[2].as<const T>(),
        launch.out[0].as<T>(), r);
  });
  MT_CHECK_LAUNCH(launch);
}

void layerNormGrad(const Launch& launch) {
  const DType dtype = cudaFloatingType(launch, inMask(0) | inMask(1) | inMask(2) | outMask(0) | outMask(1) | outMask(2));
  const NormRows r = layerNormGradRows(launch);
  if (r.d == 0) return;
  const ColumnSplit c = planColumns(launch, r);
  const DeviceContext& device = *launch.device;
  if (gradScratchDoubles(r, c) * sizeof(double) > device.scratchBytes)
    fail(launch, "scratch too small (prepare sized it for another shape)");
  double* stats = static_cast<double*>(device.scratch);  // [rows, 2]
  double* partial = stats + 2 * r.rows;                  // [2, splits, d]
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = launch.in[0].as<const T>();
    const T* dy = launch.in[2].as<const T>();
    T* dscale = launch.out[1].as<T>();
    T* dbias = launch.out[2].as<T>();
    if (r.rows > 0) {
      layerNormDxKernel<T><<<gridFor(launch, r.rows * 32, kThreads), kThreads, 0, device.stream>>>(
          x, launch.in[1].as<const T>(), dy, launch.out[0].as<T>(), stats, r);
      MT_CHECK_LAUNCH(launch);
    }
    layerNormColumnsKernel<T><<<dim3(c.blocks, c.splits), dim3(kColumns, kColumnLanes), 0, device.stream>>>(
        x, dy, stats, dscale, dbias, partial, r, c.chunk);
    MT_CHECK_LAUNCH(launch);
    if (c.splits > 1) {
      layerNormSplitsKernel<T><<<gridFor(launch, r.d, kThreads), kThreads, 0, device.stream>>>(partial, dscale, dbias,
                                                                                               r.d, c.splits);
      MT_CHECK_LAUNCH(launch);
    }
  });
}

size_t layerNormGradScratch(const Launch& launch) {
  const NormRows r = layerNormGradRows(launch);
  return gradScratchDoubles(r, planColumns(launch, r)) * sizeof(double);
}

}  // namespace

void addLayerNormKernels(CudaKernelRegistry& registry) {
  registry.add("layer_norm", {layerNorm});
  registry.add("layer_norm_grad", {layerNormGrad, layerNormGradScratch});
}

}  // namespace megatrain::runtime::cuda
