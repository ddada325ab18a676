// layer_norm.cu - layer normalization over dims [axis, rank) and its gradient on the GPU.
//
// x is viewed as [rows, d] with d = prod(x.shape[axis:]); scale and bias have
// shape x.shape[axis:]. Per row: mean, biased variance, rstd = 1/sqrt(var + eps),
// n = (x - mean) * rstd, y = n * scale + bias. Rows up to RowNorm.cuh's limit
// (8,192 f32 elements) take its register path: a block per row, each element
// read once with 16-byte accesses, the mean and then the variance from the
// registers (two passes, as the CPU twin), float arithmetic for f32 (double
// for f64) and row sums across threads in double; the gradient writes dx in
// the same pass and keeps dscale = sum dy * n and dbias = sum dy per column in
// registers over the block's rows, then adds the blocks' partials in order.
// Longer rows take a warp per row with statistics in double; their gradient
// keeps each row's mean and rstd in scratch and then sums columns, split over
// gridDim.y when d alone cannot fill the GPU (double partials in scratch,
// added in split order by a third kernel). Both paths are deterministic.
#include <algorithm>

#include "ColumnSums.cuh"
#include "DeviceMath.cuh"
#include "RowNorm.cuh"

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

// ---- the register path (RowNorm.cuh): a block per row ----

// The row's packs, loaded; returns this thread's share of the row sum.
template <typename T, int V, int P, typename C>
__device__ __forceinline__ double loadRow(const T* row, int64_t accesses, C (&v)[P][V]) {
  double sum = 0;
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int64_t k = threadIdx.x + static_cast<int64_t>(p) * blockDim.x;
    if (k < accesses) loadPack(row, k, v[p]);
#pragma unroll
    for (int i = 0; i < V; ++i) sum += static_cast<double>(v[p][i]);
  }
  return sum;
}

// This thread's share of sum (v - mean)^2; packs past the row hold zeros and add nothing.
template <int V, int P, typename C>
__device__ __forceinline__ double centeredSquares(const C (&v)[P][V], C mean, int64_t accesses) {
  double squares = 0;
#pragma unroll
  for (int p = 0; p < P; ++p) {
    if (threadIdx.x + static_cast<int64_t>(p) * blockDim.x >= accesses) continue;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const C c = v[p][i] - mean;
      squares += static_cast<double>(c * c);
    }
  }
  return squares;
}

// y = n * scale + bias; x, y [rows, d], scale, bias [d]; d = accesses x V.
template <typename T, int V, int P>
__global__ void __launch_bounds__(kRowThreadsMax)
    layerNormRowKernel(const T* __restrict__ x, const T* __restrict__ scale, const T* __restrict__ bias,
                       T* __restrict__ y, NormRows r) {
  using C = RowCompute<T>;
  __shared__ double shared[32];
  const int64_t accesses = r.d / V;
  C s[P][V] = {}, b[P][V] = {};
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int64_t k = threadIdx.x + static_cast<int64_t>(p) * blockDim.x;
    if (k < accesses) {
      loadPack(scale, k, s[p]);
      loadPack(bias, k, b[p]);
    }
  }
  for (int64_t row = blockIdx.x; row < r.rows; row += gridDim.x) {
    C v[P][V] = {};
    const double meanD = blockSum(loadRow(x + row * r.d, accesses, v), shared) / static_cast<double>(r.d);
    const C mean = static_cast<C>(meanD);
    const double var = blockSum(centeredSquares(v, mean, accesses), shared) / static_cast<double>(r.d);
    const C rstd = static_cast<C>(1.0 / sqrt(var + r.epsilon));
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int64_t k = threadIdx.x + static_cast<int64_t>(p) * blockDim.x;
      if (k >= accesses) continue;
      C out[V];
#pragma unroll
      for (int i = 0; i < V; ++i) out[i] = (v[p][i] - mean) * rstd * s[p][i] + b[p][i];
      storePack(y + row * r.d, k, out);
    }
  }
}

// dx = rstd * (g - mean(g) - n * mean(g * n)) with g = dy * scale, in one read
// of x and dy; this block's sums of dy * n and dy per column go to
// partial [2, blocks, d] (compute type) at blockIdx.x.
template <typename T, int V, int P>
__global__ void __launch_bounds__(kRowThreadsMax)
    layerNormGradRowKernel(const T* __restrict__ x, const T* __restrict__ scale, const T* __restrict__ dy,
                           T* __restrict__ dx, RowCompute<T>* __restrict__ partial, NormRows r) {
  using C = RowCompute<T>;
  __shared__ double shared[64];
  const int64_t accesses = r.d / V;
  C sumScale[P][V] = {}, sumBias[P][V] = {};
  for (int64_t row = blockIdx.x; row < r.rows; row += gridDim.x) {
    C v[P][V] = {}, g[P][V] = {};
    const double rowSum = loadRow(x + row * r.d, accesses, v);
    double gSum = 0;
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int64_t k = threadIdx.x + static_cast<int64_t>(p) * blockDim.x;
      if (k >= accesses) continue;
      C s[V];
      loadPack(dy + row * r.d, k, g[p]);
      loadPack(scale, k, s);  // [d]: stays in L1
#pragma unroll
      for (int i = 0; i < V; ++i) gSum += static_cast<double>(g[p][i] * s[i]);
    }
    // First the row sums of x and g, then of (x - mean)^2 and g (x - mean).
    double totalX = rowSum, totalG = gSum;
    blockSum2(totalX, totalG, shared);
    const C mean = static_cast<C>(totalX / static_cast<double>(r.d));
    double squares = 0, gc = 0;
#pragma unroll
    for (int p = 0; p < P; ++p) {
      if (threadIdx.x + static_cast<int64_t>(p) * blockDim.x >= accesses) continue;
      C s[V];
      loadPack(scale, threadIdx.x + static_cast<int64_t>(p) * blockDim.x, s);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const C c = v[p][i] - mean;
        squares += static_cast<double>(c * c);
        gc += static_cast<double>(g[p][i] * s[i] * c);
      }
    }
    double totalSquares = squares, totalGc = gc;
    blockSum2(totalSquares, totalGc, shared);
    const double rstdD = 1.0 / sqrt(totalSquares / static_cast<double>(r.d) + r.epsilon);
    const C rstd = static_cast<C>(rstdD);
    const C meanG = static_cast<C>(totalG / static_cast<double>(r.d));
    const C meanGN = static_cast<C>(totalGc * rstdD / static_cast<double>(r.d));
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int64_t k = threadIdx.x + static_cast<int64_t>(p) * blockDim.x;
      if (k >= accesses) continue;
      C s[V], out[V];
      loadPack(scale, k, s);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const C n = (v[p][i] - mean) * rstd;
        out[i] = rstd * (g[p][i] * s[i] - meanG - n * meanGN);
        sumScale[p][i] += g[p][i] * n;
        sumBias[p][i] += g[p][i];
      }
      storePack(dx + row * r.d, k, out);
    }
  }
  const int64_t blocks = gridDim.x;
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int64_t k = threadIdx.x + static_cast<int64_t>(p) * blockDim.x;
    if (k >= accesses) continue;
    storePack(partial + blockIdx.x * r.d, k, sumScale[p]);
    storePack(partial + (blocks + blockIdx.x) * r.d, k, sumBias[p]);
  }
}

// The register path's plan (operands as given, or assumed aligned when
// `assumeAligned`: scratch is sized before the buffers exist).
RowPlan layerRowPlan(const Launch& launch, const NormRows& r, int elementBytes, bool assumeAligned) {
  bool aligned = true;
  if (!assumeAligned) {
    for (int k = 0; k < launch.numIn; ++k) aligned = aligned && aligned16({launch.in[k].data});
    for (int k = 0; k < launch.numOut; ++k) aligned = aligned && aligned16({launch.out[k].data});
  }
  return planRows(launch, r.rows, r.d, elementBytes, aligned);
}

// ---- launchers ----

void layerNorm(const Launch& launch) {
  const DType dtype = cudaFloatingType(launch, inMask(0) | inMask(1) | inMask(2) | outMask(0));
  const NormRows r = layerNormRows(launch);
  if (r.rows == 0 || r.d == 0) return;
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = launch.in[0].as<const T>();
    const T* scale = launch.in[1].as<const T>();
    const T* bias = launch.in[2].as<const T>();
    T* y = launch.out[0].as<T>();
    const RowPlan p = layerRowPlan(launch, r, sizeof(T), false);
    if (p.fits) {
      dispatchRowPlan<T>(p, [&](auto v, auto packs) {
        const auto kernel = layerNormRowKernel<T, decltype(v)::value, decltype(packs)::value>;
        kernel<<<residentBlocks(launch, kernel, p), p.threads, 0, launch.device->stream>>>(x, scale, bias, y, r);
      });
    } else {
      layerNormKernel<T><<<gridFor(launch, r.rows * 32, kThreads), kThreads, 0, launch.device->stream>>>(
          x, scale, bias, y, r);
    }
  });
  MT_CHECK_LAUNCH(launch);
}

// The gradient's scratch in bytes: the register path's partials [2, blocks, d]
// in the compute type, or the long-row path's statistics and split partials.
size_t layerGradScratchBytes(const Launch& launch, const NormRows& r, int elementBytes, bool assumeAligned) {
  const RowPlan p = layerRowPlan(launch, r, elementBytes, assumeAligned);
  if (p.fits) return 2 * static_cast<size_t>(p.blocks) * r.d * (elementBytes == 8 ? 8 : 4);
  return gradScratchDoubles(r, planColumns(launch, r)) * sizeof(double);
}

void layerNormGrad(const Launch& launch) {
  const DType dtype = cudaFloatingType(launch, inMask(0) | inMask(1) | inMask(2) | outMask(0) | outMask(1) | outMask(2));
  const NormRows r = layerNormGradRows(launch);
  if (r.d == 0) return;
  const DeviceContext& device = *launch.device;
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = RowCompute<T>;
    const T* x = launch.in[0].as<const T>();
    const T* scale = launch.in[1].as<const T>();
    const T* dy = launch.in[2].as<const T>();
    T* dx = launch.out[0].as<T>();
    T* dscale = launch.out[1].as<T>();
    T* dbias = launch.out[2].as<T>();
    if (layerGradScratchBytes(launch, r, sizeof(T), false) > device.scratchBytes)
      fail(launch, "scratch too small (prepare sized it for another shape)");
    const RowPlan p = layerRowPlan(launch, r, sizeof(T), false);
    if (p.fits) {
      C* partial = static_cast<C*>(device.scratch);  // [2, blocks, d]
      unsigned blocks = 0;
      dispatchRowPlan<T>(p, [&](auto v, auto packs) {
        const auto kernel = layerNormGradRowKernel<T, decltype(v)::value, decltype(packs)::value>;
        blocks = residentBlocks(launch, kernel, p);
        kernel<<<blocks, p.threads, 0, device.stream>>>(x, scale, dy, dx, partial, r);
      });
      MT_CHECK_LAUNCH(launch);
      reduceRowPartials(launch, static_cast<const C*>(partial), dscale, dbias, r.d, blocks, 2);
      return;
    }
    const ColumnSplit c = planColumns(launch, r);
    double* stats = static_cast<double*>(device.scratch);  // [rows, 2]
    double* split = stats + 2 * r.rows;                    // [2, splits, d]
    if (r.rows > 0) {
      layerNormDxKernel<T><<<gridFor(launch, r.rows * 32, kThreads), kThreads, 0, device.stream>>>(x, scale, dy, dx,
                                                                                                  stats, r);
      MT_CHECK_LAUNCH(launch);
    }
    layerNormColumnsKernel<T><<<dim3(c.blocks, c.splits), dim3(kColumns, kColumnLanes), 0, device.stream>>>(
        x, dy, stats, dscale, dbias, split, r, c.chunk);
    MT_CHECK_LAUNCH(launch);
    if (c.splits > 1) {
      layerNormSplitsKernel<T><<<gridFor(launch, r.d, kThreads), kThreads, 0, device.stream>>>(split, dscale, dbias,
                                                                                             r.d, c.splits);
      MT_CHECK_LAUNCH(launch);
    }
  });
}

// Sized for aligned operands and for the long-row path, whichever is larger
// (misaligned operands take narrower accesses, never more blocks).
size_t layerNormGradScratch(const Launch& launch) {
  const NormRows r = layerNormGradRows(launch);
  const int bytes = launch.in[0].dtype == DType::F64 ? 8 : 4;
  return std::max(layerGradScratchBytes(launch, r, bytes, true),
                  gradScratchDoubles(r, planColumns(launch, r)) * sizeof(double));
}

}  // namespace

void addLayerNormKernels(CudaKernelRegistry& registry) {
  registry.add("layer_norm", {layerNorm});
  registry.add("layer_norm_grad", {layerNormGrad, layerNormGradScratch});
}

}  // namespace megatrain::runtime::cuda
