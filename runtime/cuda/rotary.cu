// rotary.cu - rotary position embedding in the rotate-half form and its gradient on the GPU.
//
// y = x * cos + rotate_half(x) * sin, rotate_half(x) = concat(-x2, x1) over
// the halves of x's last dim; cos and sin broadcast to x (a coalesced
// StridedSpace<2>, stride 0 on stretched dims) and keep its last dim, so the
// partner of an element sits half a row away in x and in sin alike.
// rotary_grad (from dy): dx = dy * cos - rotate_half(dy * sin). A thread per
// element, products in double as in the CPU twin.
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

// ---- launcher ----

template <bool Grad>
void rotary(const Launch& launch) {
  const DType dtype = floatingType(launch, inMask(0) | inMask(1) | inMask(2) | outMask(0));
  const Operand &x = launch.in[0], &cos = launch.in[1], &sin = launch.in[2];
  const Shape& s = x.shape;
  if (s.rank == 0 || s[s.rank - 1] % 2 != 0) fail(launch, "x " + s.str() + " must have an even last dim");
  for (const Operand* table : {&cos, &sin})
    if (table->shape.rank == 0 || table->shape[table->shape.rank - 1] != s[s.rank - 1] ||
        !broadcastsTo(table->shape, s))
      fail(launch, "cos and sin " + table->shape.str() + " must broadcast to " + s.str() +
                       " and keep its last dim");
  requireShape(launch, launch.out[0], s, "output");
  const int64_t n = s.elements();
  if (n == 0) return;
  StridedSpace<2> space;
  space.rank = s.rank;
  for (int d = 0; d < s.rank; ++d) space.dims[d] = s[d];
  broadcastStrides(cos.shape, s, space.strides[0]);
  broadcastStrides(sin.shape, s, space.strides[1]);
  coalesce(space);
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    rotaryKernel<T, Grad><<<gridFor(launch, n, kThreads), kThreads, 0, launch.device->stream>>>(
        x.as<const T>(), cos.as<const T>(), sin.as<const T>(), launch.out[0].as<T>(), n, s[s.rank - 1], space);
  });
  MT_CHECK_LAUNCH(launch);
}

}  // namespace

void addRotaryKernels(KernelTable& table) {
  table.add("rotary", 3, 1, rotary<false>);
  table.add("rotary_grad", 3, 1, rotary<true>);
}

}  // namespace megatrain::runtime::cuda
