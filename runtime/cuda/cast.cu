// cast.cu - cast: element type conversion among f32, f64, i64 and bool, and between bf16 and f32/f64, on the GPU.
//
// The conversions are the CPU twin's (cpu/cast.cpp), spelled out so that
// neither backend relies on what C++ leaves undefined: float to i64 truncates
// toward zero, saturates, and takes NaN to 0; anything to bool is x != 0 (NaN
// is true); a nonzero bool byte reads as 1.
//
// bf16 is the upper half of an f32. f32 -> bf16 rounds to nearest, ties to
// even, and keeps a NaN a quiet NaN with its sign: bit for bit floatToBf16 of
// megatrain/plan/Bf16.h. f64 -> bf16 rounds to f32 first, then as above
// (floatToBf16(float(x))). bf16 -> f32 and -> f64 are exact. bf16 casts only
// to and from f32, f64 and bf16 itself. f32 <-> bf16, the casts of every
// bf16 step, move 8 elements a thread in 16-byte loads and stores.
#include <algorithm>
#include <cstdint>

#include "DeviceMath.cuh"
#include "ElementMath.cuh"

namespace megatrain::runtime::cuda {
namespace {

// BOOL's element: one byte.
struct Bool {
  uint8_t byte;
};

// BF16's element: the upper 16 bits of an f32.
struct Bf16 {
  uint16_t bits;
};

// floatToBf16 (megatrain/plan/Bf16.h), on the device (ElementMath.cuh).
__device__ __forceinline__ Bf16 floatToBf16(float value) { return Bf16{floatToBf16Bits(value)}; }

__device__ __forceinline__ float bf16ToFloat(Bf16 value) { return bf16BitsToFloat(value.bits); }

template <typename To, typename From>
__device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same_v<From, Bf16> && std::is_same_v<To, Bf16>) {
    return v;
  } else if constexpr (std::is_same_v<From, Bf16>) {
    return static_cast<To>(bf16ToFloat(v));  // f32 or f64 (castable checks)
  } else if constexpr (std::is_same_v<To, Bf16>) {
    return floatToBf16(static_cast<float>(v));  // from f32 or f64
  } else if constexpr (std::is_same_v<From, Bool>) {
    return convert<To>(static_cast<int64_t>(v.byte != 0));
  } else if constexpr (std::is_same_v<To, Bool>) {
    return Bool{static_cast<uint8_t>(v != From(0) ? 1 : 0)};
  } else if constexpr (std::is_same_v<To, int64_t> && std::is_floating_point_v<From>) {
    if (v != v) return 0;
    // 2^63 is exact in float and double; anything at or past it saturates.
    constexpr From kLimit = static_cast<From>(9223372036854775808.0);
    if (v >= kLimit) return INT64_MAX;
    if (v <= -kLimit) return INT64_MIN;
    return static_cast<int64_t>(v);
  } else {
    return static_cast<To>(v);
  }
}

// ---- kernel ----

// y[i] = convert(x[i]); x, y [n].
template <typename From, typename To>
__global__ void castKernel(const From* x, To* y, int64_t n) {
  for (int64_t i = globalThread(); i < n; i += gridThreads()) y[i] = convert<To>(x[i]);
}

// The bf16 <-> f32 casts, 8 elements a thread: 32 bytes of f32 and 16 of
// bf16 as 16-byte loads and stores (x and y 16-byte aligned); the last
// n % 8 elements, one a thread, by the first threads of the grid.
__device__ __forceinline__ uint32_t packBf16(float lo, float hi) {
  return static_cast<uint32_t>(floatToBf16(lo).bits) | (static_cast<uint32_t>(floatToBf16(hi).bits) << 16);
}

__global__ void f32ToBf16Vector(const float* __restrict__ x, uint16_t* __restrict__ y, int64_t n) {
  const int64_t groups = n / 8;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  uint4* y4 = reinterpret_cast<uint4*>(y);
  for (int64_t g = globalThread(); g < groups; g += gridThreads()) {
    const float4 a = x4[2 * g], b = x4[2 * g + 1];
    y4[g] = make_uint4(packBf16(a.x, a.y), packBf16(a.z, a.w), packBf16(b.x, b.y), packBf16(b.z, b.w));
  }
  const int64_t tail = groups * 8 + globalThread();
  if (tail < n) y[tail] = floatToBf16(x[tail]).bits;
}

__device__ __forceinline__ float lowBf16(uint32_t word) { return __uint_as_float(word << 16); }
__device__ __forceinline__ float highBf16(uint32_t word) { return __uint_as_float(word & 0xFFFF0000u); }

__global__ void bf16ToF32Vector(const uint16_t* __restrict__ x, float* __restrict__ y, int64_t n) {
  const int64_t groups = n / 8;
  const uint4* x4 = reinterpret_cast<const uint4*>(x);
  float4* y4 = reinterpret_cast<float4*>(y);
  for (int64_t g = globalThread(); g < groups; g += gridThreads()) {
    const uint4 w = x4[g];
    y4[2 * g] = make_float4(lowBf16(w.x), highBf16(w.x), lowBf16(w.y), highBf16(w.y));
    y4[2 * g + 1] = make_float4(lowBf16(w.z), highBf16(w.z), lowBf16(w.w), highBf16(w.w));
  }
  const int64_t tail = groups * 8 + globalThread();
  if (tail < n) y[tail] = bf16ToFloat(Bf16{x[tail]});
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Launches the vector kernel for f32 <-> bf16 when both ends are 16-byte
// aligned; false otherwise (the element-wise kernel takes it).
template <typename From, typename To>
bool castVector(const Launch& launch, const void* x, void* y, int64_t n) {
  constexpr bool down = std::is_same_v<From, float> && std::is_same_v<To, Bf16>;
  constexpr bool up = std::is_same_v<From, Bf16> && std::is_same_v<To, float>;
  if constexpr (!down && !up) {
    return false;
  } else {
    if (!aligned16(x) || !aligned16(y)) return false;
    // Enough threads for the groups and for the tail (under 8).
    const unsigned grid = gridFor(launch, std::max<int64_t>(n / 8, 8), kThreads);
    if constexpr (down)
      f32ToBf16Vector<<<grid, kThreads, 0, launch.device->stream>>>(static_cast<const float*>(x),
                                                                     static_cast<uint16_t*>(y), n);
    else
      bf16ToF32Vector<<<grid, kThreads, 0, launch.device->stream>>>(static_cast<const uint16_t*>(x),
                                                                     static_cast<float*>(y), n);
    MT_CHECK_LAUNCH(launch);
    return true;
  }
}

// ---- launcher ----

// Calls f(tag) with a value of the element type of `dtype` (f32, f64, i64, bool or bf16).
template <typename F>
void dispatchCastable(const Launch& launch, DType dtype, F&& f) {
  switch (dtype) {
    case DType::F32: f(float{}); break;
    case DType::F64: f(double{}); break;
    case DType::I64: f(int64_t{}); break;
    case DType::Bool: f(Bool{}); break;
    case DType::BF16: f(Bf16{}); break;
    default: fail(launch, std::string("cannot cast ") + dtypeLabel(dtype) + " (f32, f64, i64, bool or bf16)");
  }
}

bool isFloat(DType dtype) { return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::BF16; }

void cast(const Launch& launch) {
  const Operand &x = launch.in[0], &y = launch.out[0];
  if ((x.dtype == DType::BF16 || y.dtype == DType::BF16) && !(isFloat(x.dtype) && isFloat(y.dtype)))
    fail(launch, std::string("cannot cast ") + dtypeLabel(x.dtype) + " to " + dtypeLabel(y.dtype) +
                     " (bf16 casts to and from f32 and f64 only)");
  const int64_t n = x.shape.elements();
  dispatchCastable(launch, x.dtype, [&](auto fromTag) {
    using From = decltype(fromTag);
    dispatchCastable(launch, y.dtype, [&](auto toTag) {
      using To = decltype(toTag);
      // bf16 pairs with the float types only (checked above); the others are never instantiated.
      constexpr bool bf16Pair = std::is_same_v<From, Bf16> || std::is_same_v<To, Bf16>;
      constexpr bool floats = !std::is_same_v<From, int64_t> && !std::is_same_v<From, Bool> &&
                              !std::is_same_v<To, int64_t> && !std::is_same_v<To, Bool>;
      if constexpr (bf16Pair && !floats) {
        return;
      } else {
        if (n == 0) return;
        if (castVector<From, To>(launch, x.data, y.data, n)) return;
        castKernel<From, To><<<gridFor(launch, n, kThreads), kThreads, 0, launch.device->stream>>>(
            x.as<const From>(), y.as<To>(), n);
        MT_CHECK_LAUNCH(launch);
      }
    });
  });
}

// Both directions of convertF32Bf16: the vector kernel when both ends are aligned, else one a thread.
template <typename From, typename To>
void convertContiguous(const Launch& launch, const void* x, void* y, int64_t n) {
  if (n <= 0 || castVector<From, To>(launch, x, y, n)) return;
  castKernel<From, To><<<gridFor(launch, n, kThreads), kThreads, 0, launch.device->stream>>>(
      static_cast<const From*>(x), static_cast<To*>(y), n);
  MT_CHECK_LAUNCH(launch);
}

}  // namespace

void convertF32ToBf16(const Launch& launch, const float* x, uint16_t* y, int64_t n) {
  convertContiguous<float, Bf16>(launch, x, y, n);
}

void convertBf16ToF32(const Launch& launch, const uint16_t* x, float* y, int64_t n) {
  convertContiguous<Bf16, float>(launch, x, y, n);
}

void addCastKernels(CudaKernelRegistry& registry) { registry.add("cast", {cast}); }

}  // namespace megatrain::runtime::cuda
