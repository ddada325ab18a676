// reduce.cu - reduce_sum, reduce_mean and the sum-over-dims primitive sum_to shares.
//
// x is split into kept dims (one output each) and reduced dims (summed), each
// walked through a coalesced stride table. A block of 256 threads gives each
// of its outputs `lanes` threads that stride over the reduction, then adds
// the lanes in shared memory in a fixed tree:
//   - reduced dims innermost (row sums): lanes are adjacent threads, so a
//     warp reads one row contiguously; lanes = 32..256 by the row's length;
//   - kept dims innermost (column sums, e.g. a bias gradient): adjacent
//     threads take adjacent outputs and lanes (1..8) are the slow index.
// When the outputs alone cannot fill the GPU, gridDim.y splits the reduction:
// each split writes a double partial to scratch and a second kernel adds the
// splits in order. Sums are in double; the result is deterministic.
#include <algorithm>

#include "DeviceMath.cuh"

namespace megatrain::runtime::cuda {
namespace {

struct SumGeometry {
  StridedSpace<1> kept;     // over the outputs: offset of each output's first element in x
  StridedSpace<1> reduced;  // over one output's elements: offset from that first element
  int64_t outputs = 0, count = 0;
  int64_t chunk = 0;        // reduced elements per split
  int lanes = 1;            // threads per output
  int outputsPerBlock = 1;  // kThreads / lanes
  bool lanesInner = false;  // lanes are adjacent threads (reduced dims innermost)
  unsigned blocks = 1, splits = 1;
};

int pow2AtLeast(int64_t n, int floor, int ceiling) {
  int p = floor;
  while (p < ceiling && p < n) p *= 2;
  return p;
}

SumGeometry planSum(const Launch& launch, const Shape& x, const Shape& kept) {
  SumGeometry g;
  int64_t strides[kMaxRank];
  contiguousStrides(x, strides);
  for (int d = 0; d < x.rank; ++d) {
    StridedSpace<1>& space = (kept[d] == 1 && x[d] != 1) ? g.reduced : g.kept;
    space.dims[space.rank] = x[d];
    space.strides[0][space.rank++] = strides[d];
  }
  g.outputs = 1;
  for (int d = 0; d < g.kept.rank; ++d) g.outputs *= g.kept.dims[d];
  g.count = 1;
  for (int d = 0; d < g.reduced.rank; ++d) g.count *= g.reduced.dims[d];
  coalesce(g.kept);
  coalesce(g.reduced);

  g.lanesInner = g.reduced.rank > 0 && g.reduced.strides[0][g.reduced.rank - 1] == 1;
  // Inner lanes: about 32 elements each, so that the tree at the end stays
  // small next to the loads. Outer lanes: few, each output's column is long.
  g.lanes = g.lanesInner ? pow2AtLeast((g.count + 31) / 32, 32, kThreads) : pow2AtLeast(g.count, 1, 8);
  g.outputsPerBlock = kThreads / g.lanes;
  const int64_t blocks = (g.outputs + g.outputsPerBlock - 1) / g.outputsPerBlock;
  if (blocks > INT32_MAX) fail(launch, "too many outputs (" + std::to_string(g.outputs) + ")");
  g.blocks = static_cast<unsigned>(std::max<int64_t>(blocks, 1));

  // Split the reduction when the outputs leave most of the GPU idle, keeping
  // at least 16 elements per lane per split.
  const int64_t target = static_cast<int64_t>(launch.device->smCount) * 8;
  int64_t splits = 1;
  if (g.blocks * 2 < target) {
    const int64_t byWork = (g.count + g.lanes * 16 - 1) / (g.lanes * 16);
    splits = std::max<int64_t>(1, std::min<int64_t>({(target + g.blocks - 1) / g.blocks, byWork, 65535}));
  }
  g.chunk = std::max<int64_t>(1, (g.count + splits - 1) / splits);
  g.splits = static_cast<unsigned>(std::max<int64_t>(1, (g.count + g.chunk - 1) / g.chunk));
  return g;
}

// ---- kernels ----

// Block (kThreads), grid (blocks, splits). With one split, y[j] = sum / divisor;
// otherwise partial[split][j] = the split's sum. x [..], y [outputs],
// partial [splits, outputs].
template <typename T>
__global__ void __launch_bounds__(kThreads) sumKernel(const T* x, T* y, double* partial, SumGeometry g,
                                                      double divisor) {
  __shared__ double lanes[kThreads];
  const int tid = threadIdx.x;
  const int lane = g.lanesInner ? tid % g.lanes : tid / g.outputsPerBlock;
  const int local = g.lanesInner ? tid / g.lanes : tid % g.outputsPerBlock;
  const int laneStride = g.lanesInner ? 1 : g.outputsPerBlock;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * g.outputsPerBlock + local;

  double acc = 0;
  if (j < g.outputs) {
    int64_t base[1];
    stridedOffsets(g.kept, j, base);
    const int64_t begin = blockIdx.y * g.chunk;
    const int64_t end = min(g.count, begin + g.chunk);
    for (int64_t r = begin + lane; r < end; r += g.lanes) {
      int64_t at[1];
      stridedOffsets(g.reduced, r, at);
      acc += static_cast<double>(x[base[0] + at[0]]);
    }
  }
  lanes[tid] = acc;
  for (int s = g.lanes / 2; s > 0; s /= 2) {
    __syncthreads();
    if (lane < s) lanes[tid] += lanes[tid + s * laneStride];
  }
  if (lane == 0 && j < g.outputs) {
    if (gridDim.y == 1) y[j] = static_cast<T>(lanes[tid] / divisor);
    else partial[blockIdx.y * g.outputs + j] = lanes[tid];
  }
}

// y[j] = (sum over splits of partial[s][j], in order) / divisor.
template <typename T>
__global__ void sumSplitsKernel(const double* partial, T* y, int64_t outputs, unsigned splits,
                                double divisor) {
  for (int64_t j = globalThread(); j < outputs; j += gridThreads()) {
    double acc = 0;
    for (unsigned s = 0; s < splits; ++s) acc += partial[s * outputs + j];
    y[j] = static_cast<T>(acc / divisor);
  }
}

// ---- launchers ----

void reduce(const Launch& launch, bool mean) {
  cudaFloatingType(launch, inMask(0) | outMask(0));
  const ReduceDims r = reduceDims(launch);
  // The mean of nothing is NaN (0 / 0), as in numpy and the CPU backend.
  launchSumInto(launch, launch.in[0], r.kept, mean ? static_cast<double>(r.count) : 1.0, launch.out[0]);
}

void reduceSum(const Launch& launch) { reduce(launch, false); }
void reduceMean(const Launch& launch) { reduce(launch, true); }

size_t reduceScratch(const Launch& launch) {
  return sumIntoScratch(launch, launch.in[0].shape, reduceDims(launch).kept);
}

}  // namespace

size_t sumIntoScratch(const Launch& launch, const Shape& x, const Shape& kept) {
  const SumGeometry g = planSum(launch, x, kept);
  return g.splits > 1 ? static_cast<size_t>(g.splits) * static_cast<size_t>(g.outputs) * sizeof(double) : 0;
}

void launchSumInto(const Launch& launch, const Operand& x, const Shape& kept, double divisor,
                   const Operand& y) {
  const SumGeometry g = planSum(launch, x.shape, kept);
  if (g.outputs == 0) return;
  double* partial = static_cast<double*>(launch.device->scratch);
  if (g.splits > 1 && static_cast<size_t>(g.splits) * g.outputs * sizeof(double) > launch.device->scratchBytes)
    fail(launch, "scratch too small for a split reduction (prepare sized it for another shape)");
  const cudaStream_t stream = launch.device->stream;
  dispatchFloating(y.dtype, [&](auto tag) {
    using T = decltype(tag);
    sumKernel<T><<<dim3(g.blocks, g.splits), kThreads, 0, stream>>>(x.as<const T>(), y.as<T>(), partial, g,
                                                                     divisor);
    MT_CHECK_LAUNCH(launch);
    if (g.splits > 1) {
      sumSplitsKernel<T><<<gridFor(launch, g.outputs, kThreads), kThreads, 0, stream>>>(
          partial, y.as<T>(), g.outputs, g.splits, divisor);
      MT_CHECK_LAUNCH(launch);
    }
  });
}

void addReduceKernels(CudaKernelRegistry& registry) {
  registry.add("reduce_sum", {reduceSum, reduceScratch});
  registry.add("reduce_mean", {reduceMean, reduceScratch});
}

}  // namespace megatrain::runtime::cuda
