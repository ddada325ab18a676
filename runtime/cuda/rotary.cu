// rotary.cu - rotary position embedding in the rotate-half form and its gradient on the GPU.
//
// y = x * cos + rotate_half(x) * sin, rotate_half(x) = concat(-x2, x1) over
// the halves of x's last dim; cos and sin broadcast to x (a coalesced
// StridedSpace<2>, stride 0 on stretched dims) and keep its last dim, so the
// partner of an element sits half a row away in x and in sin alike.
// rotary_grad (from dy): dx = dy * cos - rotate_half(dy * sin). A thread per
// element, products in double as in the CPU twin; or, when the half row is a
// whole number of packs, the tables are contiguous along the innermost dim
// and every tensor is 16-byte aligned, a thread per pack of L elements (16
// bytes of the narrowest of x, the tables and y: 4 f32, 2 f64, 8 when bf16
// takes part; each tensor moved as 16-byte loads and stores, one offset
// computation a pack), with the same arithmetic per element. With `bshd` x
// lies as [B, S, H, D]: the tables' strides are those of x's [B, H, S, D]
// form with dims 1 and 2 swapped (rotaryTableStrides), so the same kernels
// read them in place. There, when the tables do not vary over the heads, a
// thread takes a pack of the low half and its partner pack of the high half
// of one (b, s) position's rows for every head (rotaryHeadsKernel): it widens
// its table values to double once for all heads and each x element once for
// both results that read it. The double arithmetic is what bounds these
// kernels on bf16 operands (a conversion to or from f64 issues at a quarter
// of the f32 rate: five an element in the pack kernel, two here).
// Element types (rotaryTypes): all f32, all f64, or x and y each f32 or
// bf16 with f32 tables (--precision bf16). A bf16 x is read exactly; a bf16
// y is the f32 result rounded to nearest even (cast's floatToBf16Bits), so it
// is bit for bit the cast of what the f32-result kernel writes: for f32 or
// bf16 x and f32 tables every product is exact in double, so the one rounded
// sum does not depend on how the compiler contracts it.
#include <cstdint>
#include <initializer_list>

#include "DeviceMath.cuh"
#include "ElementMath.cuh"

namespace megatrain::runtime::cuda {
namespace {

// BF16's element: the upper 16 bits of an f32.
struct Bf16 {
  uint16_t bits;
};

__device__ __forceinline__ double widen(float v) { return v; }
__device__ __forceinline__ double widen(double v) { return v; }
__device__ __forceinline__ double widen(Bf16 v) { return bf16BitsToFloat(v.bits); }

// A result computed in double, stored as Y: bf16 rounds to f32 first, as the
// cast of the f32 result would.
template <typename Y>
__device__ __forceinline__ Y narrow(double v) {
  if constexpr (std::is_same_v<Y, Bf16>) return Bf16{floatToBf16Bits(static_cast<float>(v))};
  else return static_cast<Y>(v);
}

// Elements a pack: 16 bytes of the narrowest element type.
template <typename X, typename T, typename Y>
__host__ __device__ constexpr int packLanes() {
  constexpr size_t kXt = sizeof(X) < sizeof(T) ? sizeof(X) : sizeof(T);
  return static_cast<int>(16 / (kXt < sizeof(Y) ? kXt : sizeof(Y)));
}

// L elements of T from 16-byte aligned p, as 16-byte loads.
template <int L, typename T>
__device__ __forceinline__ void loadLanes(const T* __restrict__ p, T (&out)[L]) {
  constexpr int kPer = 16 / sizeof(T);
  static_assert(L % kPer == 0, "a pack is whole 16-byte accesses of every tensor");
#pragma unroll
  for (int c = 0; c < L / kPer; ++c) {
    const Pack<T> v = reinterpret_cast<const Pack<T>*>(p)[c];
#pragma unroll
    for (int l = 0; l < kPer; ++l) out[c * kPer + l] = v.v[l];
  }
}

template <int L, typename T>
__device__ __forceinline__ void storeLanes(T* __restrict__ p, const T (&in)[L]) {
  constexpr int kPer = 16 / sizeof(T);
#pragma unroll
  for (int c = 0; c < L / kPer; ++c) {
    Pack<T> v;
#pragma unroll
    for (int l = 0; l < kPer; ++l) v.v[l] = in[c * kPer + l];
    reinterpret_cast<Pack<T>*>(p)[c] = v;
  }
}

// ---- kernels ----

// out [n] over space (tables: cos, sin); d = x's last dim.
template <typename X, typename T, typename Y, bool Grad>
__global__ void rotaryKernel(const X* __restrict__ x, const T* __restrict__ cos, const T* __restrict__ sin,
                             Y* __restrict__ out, int64_t n, int64_t d, StridedSpace<2> space) {
  const int64_t half = d / 2;
  for (int64_t i = globalThread(); i < n; i += gridThreads()) {
    int64_t at[2];
    stridedOffsets(space, i, at);
    const int64_t column = i < space.narrowBelow ? static_cast<uint32_t>(i) % static_cast<uint32_t>(d) : i % d;
    const bool low = column < half;
    const int64_t partner = low ? i + half : i - half;
    const double sign = low ? -1.0 : 1.0;
    double rotated;
    if (!Grad) rotated = sign * widen(x[partner]) * widen(sin[at[1]]);
    else rotated = -sign * widen(x[partner]) * widen(sin[low ? at[1] + half : at[1] - half]);
    out[i] = narrow<Y>(widen(x[i]) * widen(cos[at[0]]) + rotated);
  }
}

// rotaryKernel a pack at a time: out packs [n / L]; pack p starts at element
// p * L, inside one half of its row (half % L == 0), its table offsets
// contiguous (innermost table strides 1, innermost dim % L == 0).
template <typename X, typename T, typename Y, bool Grad>
__global__ void rotaryPackKernel(const X* __restrict__ x, const T* __restrict__ cos, const T* __restrict__ sin,
                                 Y* __restrict__ out, int64_t packs, int64_t d, StridedSpace<2> space) {
  constexpr int kLanes = packLanes<X, T, Y>();
  const int64_t half = d / 2;
  for (int64_t p = globalThread(); p < packs; p += gridThreads()) {
    const int64_t i = p * kLanes;
    int64_t at[2];
    stridedOffsets(space, i, at);
    const int64_t column = i < space.narrowBelow ? static_cast<uint32_t>(i) % static_cast<uint32_t>(d) : i % d;
    const bool low = column < half;
    const int64_t partner = low ? i + half : i - half;
    const double sign = low ? -1.0 : 1.0;
    X xs[kLanes], xp[kLanes];
    T c[kLanes], sn[kLanes];
    loadLanes(x + i, xs);
    loadLanes(x + partner, xp);
    loadLanes(cos + at[0], c);
    loadLanes(sin + (Grad ? (low ? at[1] + half : at[1] - half) : at[1]), sn);
    Y y[kLanes];
#pragma unroll
    for (int l = 0; l < kLanes; ++l) {
      const double rotated = (Grad ? -sign : sign) * widen(xp[l]) * widen(sn[l]);
      y[l] = narrow<Y>(widen(xs[l]) * widen(c[l]) + rotated);
    }
    storeLanes(out + i, y);
  }
}

// rotaryPackKernel over x [B, S, H, D] (`bshd`) with tables that do not vary
// over H: item (b, s, j) takes the L elements [j, j + L) of the low half and
// [half + j, half + j + L) of the high half of every head's row at (b, s),
// each result computed as rotaryPackKernel computes it (the same operands,
// the same operations, so the same bits). Tables at tableB * b + tableS * s.
template <typename X, typename T, typename Y, bool Grad>
__global__ void rotaryHeadsKernel(const X* __restrict__ x, const T* __restrict__ cos, const T* __restrict__ sin,
                                  Y* __restrict__ out, int64_t positions, int64_t seq, int64_t heads, int64_t d,
                                  int64_t tableB, int64_t tableS) {
  constexpr int kLanes = packLanes<X, T, Y>();
  const int64_t half = d / 2, halfPacks = half / kLanes, items = positions * halfPacks;
  for (int64_t item = globalThread(); item < items; item += gridThreads()) {
    const int64_t position = item / halfPacks, j = (item - position * halfPacks) * kLanes;
    const int64_t table = (position / seq) * tableB + (position % seq) * tableS + j;
    T lanes[kLanes];
    double cosLow[kLanes], sinLow[kLanes], cosHigh[kLanes], sinHigh[kLanes];
    loadLanes(cos + table, lanes);
#pragma unroll
    for (int l = 0; l < kLanes; ++l) cosLow[l] = widen(lanes[l]);
    loadLanes(sin + table, lanes);
#pragma unroll
    for (int l = 0; l < kLanes; ++l) sinLow[l] = widen(lanes[l]);
    loadLanes(cos + table + half, lanes);
#pragma unroll
    for (int l = 0; l < kLanes; ++l) cosHigh[l] = widen(lanes[l]);
    loadLanes(sin + table + half, lanes);
#pragma unroll
    for (int l = 0; l < kLanes; ++l) sinHigh[l] = widen(lanes[l]);
#pragma unroll 2
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t row = (position * heads + h) * d;
      X low[kLanes], high[kLanes];
      loadLanes(x + row + j, low);
      loadLanes(x + row + half + j, high);
      Y yLow[kLanes], yHigh[kLanes];
#pragma unroll
      for (int l = 0; l < kLanes; ++l) {
        const double a = widen(low[l]), b = widen(high[l]);
        // rotaryPackKernel's (sign) * x[partner] * sin[...]: the low element's
        // partner is b, sign -1 (its gradient reads the high sin, sign +1);
        // the high element's partner is a, sign +1 (gradient: low sin, -1).
        const double rotatedLow = Grad ? 1.0 * b * sinHigh[l] : -1.0 * b * sinLow[l];
        const double rotatedHigh = Grad ? -1.0 * a * sinLow[l] : 1.0 * a * sinHigh[l];
        yLow[l] = narrow<Y>(a * cosLow[l] + rotatedLow);
        yHigh[l] = narrow<Y>(b * cosHigh[l] + rotatedHigh);
      }
      storeLanes(out + row + j, yLow);
      storeLanes(out + row + half + j, yHigh);
    }
  }
}

bool aligned16(std::initializer_list<const void*> tensors) {
  for (const void* tensor : tensors)
    if (reinterpret_cast<uintptr_t>(tensor) % 16 != 0) return false;
  return true;
}

// x [B, S, H, D] (`bshd`) whose tables (the same strides for cos and sin)
// do not vary over H and are contiguous along D: rotaryHeadsKernel's case.
struct HeadsLayout {
  bool fits = false;
  int64_t positions = 0, seq = 0, count = 0, tableB = 0, tableS = 0;
};

HeadsLayout headsLayout(const Launch& launch, const Shape& s, const StridedSpace<2>& space) {
  HeadsLayout h;
  if (launch.attrs.getInt("bshd", 0) == 0 || s.rank != 4) return h;
  for (int k = 0; k < 4; ++k)
    if (space.strides[0][k] != space.strides[1][k]) return h;
  const int64_t* t = space.strides[0];
  if (t[2] != 0 || t[3] != 1) return h;
  h.fits = true;
  h.positions = s[0] * s[1];
  h.seq = s[1];
  h.count = s[2];
  h.tableB = t[0];
  h.tableS = t[1];
  return h;
}

// Whether rotaryHeadsKernel covers this launch for packs of `lanes` elements.
bool headsPackable(const HeadsLayout& heads, int64_t d, int64_t lanes, std::initializer_list<const void*> tensors) {
  return heads.fits && (d / 2) % lanes == 0 && heads.tableB % lanes == 0 && heads.tableS % lanes == 0 &&
         aligned16(tensors);
}

// Whether rotaryPackKernel covers this launch for packs of `lanes` elements.
bool packable(const StridedSpace<2>& space, int64_t d, int64_t lanes, std::initializer_list<const void*> tensors) {
  if (space.rank == 0 || (d / 2) % lanes != 0 || space.dims[space.rank - 1] % lanes != 0) return false;
  if (space.strides[0][space.rank - 1] != 1 || space.strides[1][space.rank - 1] != 1) return false;
  for (int t = 0; t < 2; ++t)
    for (int k = 0; k + 1 < space.rank; ++k)
      if (space.strides[t][k] % lanes != 0) return false;
  return aligned16(tensors);
}

// ---- launcher ----

// Calls f(tag) with a float or a Bf16 for an F32 or a BF16 operand.
template <typename F>
void dispatchF32OrBf16(DType dtype, F&& f) {
  if (dtype == DType::BF16) f(Bf16{});
  else f(float{});
}

template <bool Grad>
void rotary(const Launch& launch) {
  const RotaryTypes types = rotaryTypes(launch);
  const Operand &x = launch.in[0], &cos = launch.in[1], &sin = launch.in[2], &y = launch.out[0];
  const Shape& s = x.shape;
  const int64_t n = s.elements();
  if (n == 0) return;
  StridedSpace<2> space;
  space.rank = s.rank;
  for (int d = 0; d < s.rank; ++d) space.dims[d] = s[d];
  rotaryTableStrides(launch, cos.shape, space.strides[0]);
  rotaryTableStrides(launch, sin.shape, space.strides[1]);
  const HeadsLayout heads = headsLayout(launch, s, space);
  coalesce(space);
  const int64_t d = s[s.rank - 1];
  const cudaStream_t stream = launch.device->stream;
  auto run = [&](auto xTag, auto tTag, auto yTag) {
    using X = decltype(xTag);
    using T = decltype(tTag);
    using Y = decltype(yTag);
    constexpr int64_t kLanes = packLanes<X, T, Y>();
    if (headsPackable(heads, d, kLanes, {x.data, cos.data, sin.data, y.data})) {
      const int64_t items = heads.positions * (d / 2 / kLanes);
      rotaryHeadsKernel<X, T, Y, Grad><<<gridFor(launch, items, kThreads), kThreads, 0, stream>>>(
          x.as<const X>(), cos.as<const T>(), sin.as<const T>(), y.as<Y>(), heads.positions, heads.seq, heads.count,
          d, heads.tableB, heads.tableS);
    } else if (packable(space, d, kLanes, {x.data, cos.data, sin.data, y.data})) {
      const int64_t packs = n / kLanes;
      rotaryPackKernel<X, T, Y, Grad><<<gridFor(launch, packs, kThreads), kThreads, 0, stream>>>(
          x.as<const X>(), cos.as<const T>(), sin.as<const T>(), y.as<Y>(), packs, d, space);
    } else {
      rotaryKernel<X, T, Y, Grad><<<gridFor(launch, n, kThreads), kThreads, 0, stream>>>(
          x.as<const X>(), cos.as<const T>(), sin.as<const T>(), y.as<Y>(), n, d, space);
    }
  };
  if (types.tables == DType::F64) {
    run(double{}, double{}, double{});
  } else {
    dispatchF32OrBf16(types.x, [&](auto xTag) { dispatchF32OrBf16(types.result, [&](auto yTag) { run(xTag, float{}, yTag); }); });
  }
  MT_CHECK_LAUNCH(launch);
}

}  // namespace

void addRotaryKernels(CudaKernelRegistry& registry) {
  registry.add("rotary", {rotary<false>});
  registry.add("rotary_grad", {rotary<true>});
}

}  // namespace megatrain::runtime::cuda
