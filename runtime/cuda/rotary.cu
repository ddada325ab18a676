// rotary.cu - rotary position embedding in the rotate-half form and its gradient on the GPU.
//
// y = x * cos + rotate_half(x) * sin, rotate_half(x) = concat(-x2, x1) over
// the halves of x's last dim; cos and sin broadcast to x (a coalesced
// StridedSpace<2>, stride 0 on stretched dims) and keep its last dim, so the
// partner of an element sits half a row away in x and in sin alike.
// rotary_grad (from dy): dx = dy * cos - rotate_half(dy * sin). A thread per
// element, products in double as in the CPU twin; or, when the half row is a
// whole number of 16-byte packs, the tables are contiguous along the innermost
// dim and every tensor is 16-byte aligned, a thread per pack (4 f32 or 2 f64
// elements, 16-byte loads and stores, one offset computation a pack), with the
// same arithmetic per element. With `bshd` x lies as [B, S, H, D]: the
// tables' strides are those of x's [B, H, S, D] form with dims 1 and 2
// swapped (rotaryTableStrides), so the same kernels read them in place.
#include <cstdint>
#include <initializer_list>

#include "DeviceMath.cuh"

namespace megatrain::runtime::cuda {
namespace {

// ---- kernel ----

// out [n] over space (tables: cos, sin); d = x's last dim.
template <typename T, bool Grad>
__global__ void rotaryKernel(const T* __restrict__ x, const T* __restrict__ cos, const T* __restrict__ sin,
                             T* __restrict__ out, int64_t n, int64_t d, StridedSpace<2> space) {
  const int64_t half = d / 2;
  for (int64_t i = globalThread(); i < n; i += gridThreads()) {
    int64_t at[2];
    stridedOffsets(space, i, at);
    const int64_t column = i < space.narrowBelow ? static_cast<uint32_t>(i) % static_cast<uint32_t>(d) : i % d;
    const bool low = column < half;
    const int64_t partner = low ? i + half : i - half;
    const double sign = low ? -1.0 : 1.0;
    double rotated;
    if (!Grad) rotated = sign * static_cast<double>(x[partner]) * static_cast<double>(sin[at[1]]);
    else rotated = -sign * static_cast<double>(x[partner]) * static_cast<double>(sin[low ? at[1] + half : at[1] - half]);
    out[i] = static_cast<T>(static_cast<double>(x[i]) * static_cast<double>(cos[at[0]]) + rotated);
  }
}

// rotaryKernel a pack at a time: out packs [n / L]; pack p starts at element
// p * L, inside one half of its row (half % L == 0), its table offsets
// contiguous (innermost table strides 1, innermost dim % L == 0).
template <typename T, bool Grad>
__global__ void rotaryPackKernel(const T* __restrict__ x, const T* __restrict__ cos, const T* __restrict__ sin,
                                 T* __restrict__ out, int64_t packs, int64_t d, StridedSpace<2> space) {
  constexpr int kLanes = 16 / sizeof(T);
  const int64_t half = d / 2;
  for (int64_t p = globalThread(); p < packs; p += gridThreads()) {
    const int64_t i = p * kLanes;
    int64_t at[2];
    stridedOffsets(space, i, at);
    const int64_t column = i < space.narrowBelow ? static_cast<uint32_t>(i) % static_cast<uint32_t>(d) : i % d;
    const bool low = column < half;
    const int64_t partner = low ? i + half : i - half;
    const double sign = low ? -1.0 : 1.0;
    const Pack<T> xs = *reinterpret_cast<const Pack<T>*>(x + i);
    const Pack<T> xp = *reinterpret_cast<const Pack<T>*>(x + partner);
    const Pack<T> c = *reinterpret_cast<const Pack<T>*>(cos + at[0]);
    const Pack<T> sn = *reinterpret_cast<const Pack<T>*>(sin + (Grad ? (low ? at[1] + half : at[1] - half) : at[1]));
    Pack<T> y;
#pragma unroll
    for (int l = 0; l < kLanes; ++l) {
      const double rotated = (Grad ? -sign : sign) * static_cast<double>(xp.v[l]) * static_cast<double>(sn.v[l]);
      y.v[l] = static_cast<T>(static_cast<double>(xs.v[l]) * static_cast<double>(c.v[l]) + rotated);
    }
    *reinterpret_cast<Pack<T>*>(out + i) = y;
  }
}

// Whether rotaryPackKernel covers this launch for elements of `bytes` bytes.
bool packable(const StridedSpace<2>& space, int64_t d, size_t bytes, std::initializer_list<const void*> tensors) {
  const int64_t lanes = static_cast<int64_t>(16 / bytes);
  if (space.rank == 0 || (d / 2) % lanes != 0 || space.dims[space.rank - 1] % lanes != 0) return false;
  if (space.strides[0][space.rank - 1] != 1 || space.strides[1][space.rank - 1] != 1) return false;
  for (int t = 0; t < 2; ++t)
    for (int k = 0; k + 1 < space.rank; ++k)
      if (space.strides[t][k] % lanes != 0) return false;
  for (const void* tensor : tensors)
    if (reinterpret_cast<uintptr_t>(tensor) % 16 != 0) return false;
  return true;
}

// ---- launcher ----

template <bool Grad>
void rotary(const Launch& launch) {
  const DType dtype = cudaFloatingType(launch, inMask(0) | inMask(1) | inMask(2) | outMask(0));
  const Operand &x = launch.in[0], &cos = launch.in[1], &sin = launch.in[2];
  const Shape& s = x.shape;
  const int64_t n = s.elements();
  if (n == 0) return;
  StridedSpace<2> space;
  space.rank = s.rank;
  for (int d = 0; d < s.rank; ++d) space.dims[d] = s[d];
  rotaryTableStrides(launch, cos.shape, space.strides[0]);
  rotaryTableStrides(launch, sin.shape, space.strides[1]);
  coalesce(space);
  const int64_t d = s[s.rank - 1];
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const cudaStream_t stream = launch.device->stream;
    if (packable(space, d, sizeof(T), {x.data, cos.data, sin.data, launch.out[0].data})) {
      const int64_t packs = n / static_cast<int64_t>(16 / sizeof(T));
      rotaryPackKernel<T, Grad><<<gridFor(launch, packs, kThreads), kThreads, 0, stream>>>(
          x.as<const T>(), cos.as<const T>(), sin.as<const T>(), launch.out[0].as<T>(), packs, d, space);
    } else {
      rotaryKernel<T, Grad><<<gridFor(launch, n, kThreads), kThreads, 0, stream>>>(
          x.as<const T>(), cos.as<const T>(), sin.as<const T>(), launch.out[0].as<T>(), n, d, space);
    }
  });
  MT_CHECK_LAUNCH(launch);
}

}  // namespace

void addRotaryKernels(CudaKernelRegistry& registry) {
  registry.add("rotary", {rotary<false>});
  registry.add("rotary_grad", {rotary<true>});
}

}  // namespace megatrain::runtime::cuda
