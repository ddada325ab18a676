// softmax.cu - softmax along one axis and its gradient on the GPU.
//
// The tensor is viewed as [outer, n, inner] around `axis`: outer * inner rows
// of n elements `inner` apart. A long contiguous row gets a block, a shorter
// one a warp, an interleaved one a thread (DeviceMath.cuh's row groups). Max,
// exp and sums run in double, as the CPU twin's do.
#include "DeviceMath.cuh"

namespace megatrain::runtime::cuda {
namespace {

struct Rows {
  int64_t count, n, inner;  // count = outer * inner

  // Element i of row r sits at base(r) + i * inner.
  __device__ int64_t base(int64_t r) const { return (r / inner) * n * inner + r % inner; }
};

// ---- kernels ----

// y = exp(x - max) / sum exp(x - max) per row; x, y [outer, n, inner].
template <typename T, int G>
__global__ void softmaxKernel(const T* __restrict__ x, T* __restrict__ y, Rows rows) {
  const int member = groupMember<G>();
  for (int64_t r = firstGroup<G>(); r < rows.count; r += groupCount<G>()) {
    const int64_t base = rows.base(r);
    double max = -INFINITY;
    for (int64_t i = member; i < rows.n; i += G) max = fmax(max, static_cast<double>(x[base + i * rows.inner]));
    max = groupMax<G>(max);
    double sum = 0;
    for (int64_t i = member; i < rows.n; i += G) sum += exp(static_cast<double>(x[base + i * rows.inner]) - max);
    sum = groupSum<G>(sum);
    for (int64_t i = member; i < rows.n; i += G) {
      const int64_t at = base + i * rows.inner;
      y[at] = static_cast<T>(exp(static_cast<double>(x[at]) - max) / sum);
    }
  }
}

// dx = y * (dy - sum(dy * y)) per row; y, dy, dx [outer, n, inner].
template <typename T, int G>
__global__ void softmaxGradKernel(const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx,
                                  Rows rows) {
  const int member = groupMember<G>();
  for (int64_t r = firstGroup<G>(); r < rows.count; r += groupCount<G>()) {
    const int64_t base = rows.base(r);
    double dot = 0;
    for (int64_t i = member; i < rows.n; i += G) {
      const int64_t at = base + i * rows.inner;
      dot += static_cast<double>(dy[at]) * static_cast<double>(y[at]);
    }
    dot = groupSum<G>(dot);
    for (int64_t i = member; i < rows.n; i += G) {
      const int64_t at = base + i * rows.inner;
      dx[at] = static_cast<T>(static_cast<double>(y[at]) * (static_cast<double>(dy[at]) - dot));
    }
  }
}

// ---- launchers ----

// The device view of the lanes: row r of count = outer * inner.
Rows softmaxRows(const Launch& launch) {
  const SoftmaxLanes l = softmaxLanes(launch);
  return {l.outer * l.inner, l.n, l.inner};
}

void softmax(const Launch& launch) {
  const DType dtype = cudaFloatingType(launch, inMask(0) | outMask(0));
  const Rows rows = softmaxRows(launch);
  if (rows.count == 0 || rows.n == 0) return;
  const cudaStream_t stream = launch.device->stream;
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = launch.in[0].as<const T>();
    T* y = launch.out[0].as<T>();
    dispatchRowGroup(rows.n, rows.inner, [&](auto group) {
      constexpr int G = decltype(group)::value;
      softmaxKernel<T, G><<<gridFor(launch, rows.count * G, kThreads), kThreads, 0, stream>>>(x, y, rows);
    });
  });
  MT_CHECK_LAUNCH(launch);
}

void softmaxGrad(const Launch& launch) {
  const DType dtype = cudaFloatingType(launch, inMask(0) | inMask(1) | outMask(0));
  const Rows rows = softmaxRows(launch);
  if (rows.count == 0 || rows.n == 0) return;
  const cudaStream_t stream = launch.device->stream;
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* y = launch.in[0].as<const T>();
    const T* dy = launch.in[1].as<const T>();
    T* dx = launch.out[0].as<T>();
    dispatchRowGroup(rows.n, rows.inner, [&](auto group) {
      constexpr int G = decltype(group)::value;
      softmaxGradKernel<T, G><<<gridFor(launch, rows.count * G, kThreads), kThreads, 0, stream>>>(y, dy, dx, rows);
    });
  });
  MT_CHECK_LAUNCH(launch);
}

}  // namespace

void addSoftmaxKernels(CudaKernelRegistry& registry) {
  registry.add("softmax", {softmax});
  registry.add("softmax_grad", {softmaxGrad});
}

}  // namespace megatrain::runtime::cuda
