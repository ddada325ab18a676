// rms_norm.cu - RMS normalization over dims [axis, rank) times a weight, and its gradient, on the GPU.
//
// x is viewed as [rows, d] with d = prod(x.shape[axis:]); weight has shape
// x.shape[axis:]. Per row: rstd = 1/sqrt(mean(x^2) + eps), n = x * rstd,
// y = n * weight. Rows up to RowNorm.cuh's limit (8,192 f32 elements) take
// its register path: a block per row, each element read once with 16-byte
// accesses, float arithmetic for f32 (double for f64) and row sums across
// threads in double; the gradient writes dx in the same pass and keeps
// dweight = sum dy * n per column in registers over the block's rows, then
// adds the blocks' partials in order. Longer rows take a warp per row with
// sums in double; their gradient keeps each row's rstd in scratch and then
// sums columns, split over gridDim.y when d alone cannot fill the GPU (double
// partials in scratch, added in split order by a third kernel). Both paths
// are deterministic. rms_norm_grad_add runs the gradient's kernels with the
// residual's add (and its bf16 cast) applied to dx as it is stored, and
// writes the bits that rms_norm_grad, add and cast would.
#include <algorithm>

#include "ColumnSums.cuh"
#include "DeviceMath.cuh"
#include "RowNorm.cuh"

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

// The result element as Y: T, or (Y = uint16_t, T = float) the bf16 bits of
// its f32 value, as cast rounds it.
template <typename T, typename Y>
__device__ __forceinline__ Y normOut(double value) {
  if constexpr (std::is_same_v<Y, uint16_t>)
    return floatToBf16Bits(static_cast<float>(value));
  else
    return static_cast<T>(value);
}

// Stores access k (V elements) of the dx row at element `at` from out, which
// holds dx rounded to T as rms_norm_grad writes it. rms_norm_grad_add's
// kernels (Add) first add addend's access k to it in T, one addition as add
// makes it, and with Bf16 (T = float) also store the sum's bf16 bits as cast
// rounds them: the fused kernel writes what the three kernels would.
template <bool Add, bool Bf16, typename T, int V, typename C>
__device__ __forceinline__ void storeDx(T* dx, const T* addend, uint16_t* dxBf16, int64_t at, int64_t k,
                                        C (&out)[V]) {
  if constexpr (Add) {
    T a[V];
    loadPack(addend + at, k, a);
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = static_cast<C>(a[i] + static_cast<T>(out[i]));
  }
  storePack(dx + at, k, out);
  if constexpr (Bf16) storeOut(dxBf16 + at, k, out);
}

// y = x * rstd * weight; x, y [rows, d], weight [d]; y of T or bf16 bits (Y).
template <typename T, typename Y = T>
__global__ void rmsNormKernel(const T* __restrict__ x, const T* __restrict__ weight, Y* __restrict__ y, NormRows r) {
  const int lane = groupMember<32>();
  for (int64_t row = firstGroup<32>(); row < r.rows; row += groupCount<32>()) {
    const T* xr = x + row * r.d;
    Y* yr = y + row * r.d;
    const double rstd = rowRstd(xr, r.d, r.epsilon, lane);
    for (int64_t j = lane; j < r.d; j += 32)
      yr[j] = normOut<T, Y>(static_cast<double>(xr[j]) * rstd * static_cast<double>(weight[j]));
  }
}

// With g = dy * weight and n = x * rstd: dx = rstd * (g - n * mean(g * n))
// per row, stored by storeDx; rstd [rows]. x, dy, addend, dx, dxBf16
// [rows, d], weight [d].
template <typename T, bool Add = false, bool Bf16 = false>
__global__ void rmsNormDxKernel(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ dy,
                                const T* __restrict__ addend, T* __restrict__ dx, uint16_t* __restrict__ dxBf16,
                                double* __restrict__ rstds, NormRows r) {
  const int lane = groupMember<32>();
  for (int64_t row = firstGroup<32>(); row < r.rows; row += groupCount<32>()) {
    const T* xr = x + row * r.d;
    const T* dyr = dy + row * r.d;
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
      T out[1] = {static_cast<T>(rstd * (g - n * meanGN))};
      storeDx<Add, Bf16>(dx, addend, dxBf16, row * r.d, j, out);
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

// ---- the register path (RowNorm.cuh): a block per row ----

// y = x * rstd * weight; x, y [rows, d], weight [d]; d = accesses x V.
// At most 128 registers (two blocks an SM): d = 8192 f32 needs 110 forward
// and spills 4 bytes backward; one block an SM would leave nothing to run
// while a block waits at its row sum.
template <typename T, int V, int P, typename Y = T>
__global__ void __launch_bounds__(kRowThreadsMax, 2)
    rmsNormRowKernel(const T* __restrict__ x, const T* __restrict__ weight, Y* __restrict__ y, NormRows r) {
  using C = RowCompute<T>;
  __shared__ double shared[32];
  const int64_t accesses = r.d / V;
  C w[P][V] = {};
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int64_t k = threadIdx.x + static_cast<int64_t>(p) * blockDim.x;
    if (k < accesses) loadPack(weight, k, w[p]);
  }
  // The block's next row is loaded before this row's sum and stores, so its
  // loads are in flight while the block waits at the sum (the kernel is
  // bound by that wait, not by bandwidth, at one row per block).
  C next[P][V] = {};
  auto load = [&](int64_t row) {
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int64_t k = threadIdx.x + static_cast<int64_t>(p) * blockDim.x;
      if (row < r.rows && k < accesses) loadPack(x + row * r.d, k, next[p]);
    }
  };
  load(blockIdx.x);
  for (int64_t row = blockIdx.x; row < r.rows; row += gridDim.x) {
    C v[P][V];
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
      for (int i = 0; i < V; ++i) v[p][i] = next[p][i];
    load(row + gridDim.x);
    double squares = 0;
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
      for (int i = 0; i < V; ++i) squares += static_cast<double>(v[p][i] * v[p][i]);
    const double total = blockSum(squares, shared);
    const C rstd = static_cast<C>(1.0 / sqrt(total / static_cast<double>(r.d) + r.epsilon));
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int64_t k = threadIdx.x + static_cast<int64_t>(p) * blockDim.x;
      if (k >= accesses) continue;
      C out[V];
#pragma unroll
      for (int i = 0; i < V; ++i) out[i] = v[p][i] * rstd * w[p][i];
      storeOut(y + row * r.d, k, out);
    }
  }
}

// dx = rstd * (g - n * mean(g * n)) with g = dy * weight, n = x * rstd, in one
// read of x and dy, stored by storeDx; this block's sums of dy * n per
// column go to partial[blockIdx.x] ([blocks, d], compute type).
template <typename T, int V, int P, bool Add = false, bool Bf16 = false>
__global__ void __launch_bounds__(kRowThreadsMax, 2)
    rmsNormGradRowKernel(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ dy,
                         const T* __restrict__ addend, T* __restrict__ dx, uint16_t* __restrict__ dxBf16,
                         RowCompute<T>* __restrict__ partial, NormRows r) {
  using C = RowCompute<T>;
  __shared__ double shared[64];
  const int64_t accesses = r.d / V;
  C sum[P][V] = {};
  for (int64_t row = blockIdx.x; row < r.rows; row += gridDim.x) {
    const T* xr = x + row * r.d;
    const T* dyr = dy + row * r.d;
    C v[P][V] = {}, g[P][V] = {};
    double squares = 0, gx = 0;
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int64_t k = threadIdx.x + static_cast<int64_t>(p) * blockDim.x;
      if (k < accesses) {
        C w[V];
        loadPack(xr, k, v[p]);
        loadPack(dyr, k, g[p]);
        loadPack(weight, k, w);  // [d]: stays in L1
#pragma unroll
        // Products in double too: dx's difference below cancels for short
        // rows, and a float product's rounding would come out amplified.
        for (int i = 0; i < V; ++i) {
          const double vD = static_cast<double>(v[p][i]);
          squares += vD * vD;
          gx += static_cast<double>(g[p][i]) * static_cast<double>(w[i]) * vD;
        }
      }
    }
    // sum(g * n) = rstd * sum(dy * weight * x): one block sum for both.
    double totalSquares = squares, totalGx = gx;
    blockSum2(totalSquares, totalGx, shared);
    const double rstdD = 1.0 / sqrt(totalSquares / static_cast<double>(r.d) + r.epsilon);
    const C rstd = static_cast<C>(rstdD);
    const double meanGN = totalGx * rstdD / static_cast<double>(r.d);
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int64_t k = threadIdx.x + static_cast<int64_t>(p) * blockDim.x;
      if (k >= accesses) continue;
      C w[V], out[V];
      loadPack(weight, k, w);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const C n = v[p][i] * rstd;
        // g w - n mean(g n) cancels when the row is short (d = 1: the
        // difference is eps / (x^2 + eps) of g w): in double, as the CPU twin.
        const double nD = static_cast<double>(v[p][i]) * rstdD;
        out[i] = static_cast<C>(rstdD * (static_cast<double>(g[p][i]) * static_cast<double>(w[i]) - nD * meanGN));
        sum[p][i] += g[p][i] * n;
      }
      storeDx<Add, Bf16>(dx, addend, dxBf16, row * r.d, k, out);
    }
  }
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int64_t k = threadIdx.x + static_cast<int64_t>(p) * blockDim.x;
    if (k < accesses) storePack(partial + blockIdx.x * r.d, k, sum[p]);
  }
}

// The register path's plan for a launch (operands as given, or assumed
// aligned when `assumeAligned`: scratch is sized before the buffers exist).
RowPlan rmsRowPlan(const Launch& launch, const NormRows& r, int elementBytes, bool assumeAligned) {
  bool aligned = assumeAligned;
  if (!assumeAligned) {
    aligned = true;
    for (int k = 0; k < launch.numIn; ++k) aligned = aligned && aligned16({launch.in[k].data});
    for (int k = 0; k < launch.numOut; ++k) aligned = aligned && aligned16({launch.out[k].data});
  }
  return planRows(launch, r.rows, r.d, elementBytes, aligned);
}

// ---- launchers ----

// y = rms_norm(x) * weight into y of T, or of bf16 bits (Y = uint16_t).
template <typename T, typename Y>
void rmsNormLaunch(const Launch& launch, const NormRows& r) {
  const T* x = launch.in[0].as<const T>();
  const T* weight = launch.in[1].as<const T>();
  Y* y = launch.out[0].as<Y>();
  const RowPlan p = rmsRowPlan(launch, r, sizeof(T), false);
  if (p.fits) {
    dispatchRowPlan<T>(p, [&](auto v, auto packs) {
      const auto kernel = rmsNormRowKernel<T, decltype(v)::value, decltype(packs)::value, Y>;
      kernel<<<residentBlocks(launch, kernel, p), p.threads, 0, launch.device->stream>>>(x, weight, y, r);
    });
  } else {
    rmsNormKernel<T, Y><<<gridFor(launch, r.rows * 32, kThreads), kThreads, 0, launch.device->stream>>>(x, weight,
                                                                                                          y, r);
  }
}

// y has x's type, or is bf16 from f32 operands (mt-fold-norm-casts).
void rmsNorm(const Launch& launch) {
  const bool bf16Out = launch.out[0].dtype == DType::BF16;
  if (bf16Out && cudaFloatingType(launch, inMask(0) | inMask(1)) != DType::F32)
    fail(launch, "a bf16 output needs f32 x and weight");
  const DType dtype = bf16Out ? DType::F32 : cudaFloatingType(launch, inMask(0) | inMask(1) | outMask(0));
  const NormRows r = rmsNormRows(launch);
  if (r.rows == 0 || r.d == 0) return;
  if (bf16Out) {
    rmsNormLaunch<float, uint16_t>(launch, r);
  } else {
    dispatchFloating(dtype, [&](auto tag) {
      using T = decltype(tag);
      rmsNormLaunch<T, T>(launch, r);
    });
  }
  MT_CHECK_LAUNCH(launch);
}

// The gradient's scratch in bytes for element size `elementBytes`: the
// register path's partials [blocks, d] in the compute type, or the long-row
// path's rstds and split partials in double.
size_t rmsGradScratchBytes(const Launch& launch, const NormRows& r, int elementBytes, bool assumeAligned) {
  const RowPlan p = rmsRowPlan(launch, r, elementBytes, assumeAligned);
  if (p.fits) return static_cast<size_t>(p.blocks) * r.d * (elementBytes == 8 ? 8 : 4);
  return gradScratchDoubles(r, planColumns(launch, r)) * sizeof(double);
}

// The register path's blocks for the gradient on T at (V, P): the fewest that
// any of rms_norm_grad's and rms_norm_grad_add's kernels keeps resident
// (their registers differ), so every variant sums dweight's partials over
// the same blocks, each resident: rms_norm_grad_add's dweight has
// rms_norm_grad's bits.
template <typename T, int V, int P>
unsigned gradRowBlocks(const Launch& launch, const RowPlan& p) {
  unsigned blocks = std::min(residentBlocks(launch, rmsNormGradRowKernel<T, V, P>, p),
                             residentBlocks(launch, rmsNormGradRowKernel<T, V, P, true>, p));
  if constexpr (std::is_same_v<T, float>)
    blocks = std::min(blocks, residentBlocks(launch, rmsNormGradRowKernel<T, V, P, true, true>, p));
  return blocks;
}

// rms_norm_grad's kernels on T, or rms_norm_grad_add's (Add: addend in[3];
// Bf16: dx_bf16 out[2]).
template <typename T, bool Add, bool Bf16>
void rmsNormGradLaunch(const Launch& launch, const NormRows& r) {
  using C = RowCompute<T>;
  const DeviceContext& device = *launch.device;
  const T* x = launch.in[0].as<const T>();
  const T* weight = launch.in[1].as<const T>();
  const T* dy = launch.in[2].as<const T>();
  const T* addend = Add ? launch.in[3].as<const T>() : nullptr;
  T* dx = launch.out[0].as<T>();
  T* dweight = launch.out[1].as<T>();
  uint16_t* dxBf16 = Bf16 ? launch.out[2].as<uint16_t>() : nullptr;
  if (rmsGradScratchBytes(launch, r, sizeof(T), false) > device.scratchBytes)
    fail(launch, "scratch too small (prepare sized it for another shape)");
  const RowPlan p = rmsRowPlan(launch, r, sizeof(T), false);
  if (p.fits) {
    C* partial = static_cast<C*>(device.scratch);  // [blocks, d]
    unsigned blocks = 0;
    dispatchRowPlan<T>(p, [&](auto v, auto packs) {
      constexpr int V = decltype(v)::value, P = decltype(packs)::value;
      blocks = gradRowBlocks<T, V, P>(launch, p);
      rmsNormGradRowKernel<T, V, P, Add, Bf16>
          <<<blocks, p.threads, 0, device.stream>>>(x, weight, dy, addend, dx, dxBf16, partial, r);
    });
    MT_CHECK_LAUNCH(launch);
    reduceRowPartials(launch, static_cast<const C*>(partial), dweight, dweight, r.d, blocks, 1);
    return;
  }
  const ColumnSplit c = planColumns(launch, r);
  double* rstds = static_cast<double*>(device.scratch);  // [rows]
  double* split = rstds + r.rows;                         // [splits, d]
  if (r.rows > 0) {
    rmsNormDxKernel<T, Add, Bf16><<<gridFor(launch, r.rows * 32, kThreads), kThreads, 0, device.stream>>>(
        x, weight, dy, addend, dx, dxBf16, rstds, r);
    MT_CHECK_LAUNCH(launch);
  }
  rmsNormColumnsKernel<T><<<dim3(c.blocks, c.splits), dim3(kColumns, kColumnLanes), 0, device.stream>>>(
      x, dy, rstds, dweight, split, r, c.chunk);
  MT_CHECK_LAUNCH(launch);
  if (c.splits > 1) {
    rmsNormSplitsKernel<T><<<gridFor(launch, r.d, kThreads), kThreads, 0, device.stream>>>(split, dweight, r.d,
                                                                                         c.splits);
    MT_CHECK_LAUNCH(launch);
  }
}

void rmsNormGrad(const Launch& launch) {
  const DType dtype = cudaFloatingType(launch, inMask(0) | inMask(1) | inMask(2) | outMask(0) | outMask(1));
  const NormRows r = rmsNormGradRows(launch);
  if (r.d == 0) return;
  dispatchFloating(dtype, [&](auto tag) { rmsNormGradLaunch<decltype(tag), false, false>(launch, r); });
}

// dx_bf16, when present, is bf16 from f32 operands (the rule checks both).
void rmsNormGradAdd(const Launch& launch) {
  const NormRows r = rmsNormGradAddRows(launch);
  const DType dtype =
      cudaFloatingType(launch, inMask(0) | inMask(1) | inMask(2) | inMask(3) | outMask(0) | outMask(1));
  if (r.d == 0) return;
  if (launch.numOut == 3) rmsNormGradLaunch<float, true, true>(launch, r);
  else dispatchFloating(dtype, [&](auto tag) { rmsNormGradLaunch<decltype(tag), true, false>(launch, r); });
}

// Sized for aligned operands and for the long-row path, whichever is larger
// (misaligned operands take narrower accesses, never more blocks). Also
// rms_norm_grad_add's: the same partials and rstds.
size_t rmsNormGradScratch(const Launch& launch) {
  const NormRows r = rmsNormGradRows(launch);
  const int bytes = launch.in[0].dtype == DType::F64 ? 8 : 4;
  return std::max(rmsGradScratchBytes(launch, r, bytes, true),
                  gradScratchDoubles(r, planColumns(launch, r)) * sizeof(double));
}

}  // namespace

void addRmsNormKernels(CudaKernelRegistry& registry) {
  registry.add("rms_norm", {rmsNorm});
  registry.add("rms_norm_grad", {rmsNormGrad, rmsNormGradScratch});
  registry.add("rms_norm_grad_add", {rmsNormGradAdd, rmsNormGradScratch});
}

}  // namespace megatrain::runtime::cuda
