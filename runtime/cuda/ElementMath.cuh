// ElementMath.cuh - device element functions shared by the kernels that must agree to the bit:
// the activations (activation.cu), the bf16 rounding (cast.cu) and the pointwise programs that
// stand for both (pointwise.cu, and the kernels PointwiseJit.cpp compiles at run time with NVRTC,
// which reads this very text). T arithmetic, the CPU twins' expressions in the same order.
// Includes only <cstdint> and MathConstants.h, both of which NVRTC is given.
#ifndef MEGATRAIN_RUNTIME_CUDA_ELEMENTMATH_CUH
#define MEGATRAIN_RUNTIME_CUDA_ELEMENTMATH_CUH

#include <cstdint>

#include "megatrain/kernels/MathConstants.h"

namespace megatrain::runtime::cuda {

__device__ __forceinline__ float expOf(float x) { return expf(x); }
__device__ __forceinline__ double expOf(double x) { return exp(x); }
__device__ __forceinline__ float erfcOf(float x) { return erfcf(x); }
__device__ __forceinline__ double erfcOf(double x) { return erfc(x); }
__device__ __forceinline__ float log1pOf(float x) { return log1pf(x); }
__device__ __forceinline__ double log1pOf(double x) { return log1p(x); }

template <typename T>
__device__ __forceinline__ T sigmoidOf(T x) {
  // The CPU twin's two branches, 1 / (1 + exp(-x)) for x >= 0 and e / (1 + e)
  // with e = exp(x) otherwise (exp's argument never positive, so neither
  // overflows), as one exp and one division: a warp runs both sides of a
  // branch, so the branches cost two of each. The same operations on the same
  // values, so the same bits.
  const bool positive = x >= T(0);
  const T e = expOf(positive ? -x : x);
  return (positive ? T(1) : e) / (T(1) + e);
}

template <typename T>
__device__ __forceinline__ T siluOf(T x) { return x * sigmoidOf(x); }

// d silu / dx = s (1 + x (1 - s)).
template <typename T>
__device__ __forceinline__ T siluSlope(T x) {
  const T s = sigmoidOf(x);
  return s * (T(1) + x * (T(1) - s));
}

template <typename T>
__device__ __forceinline__ T geluErfCdf(T x) { return T(0.5) * erfcOf(-x * T(::megatrain::kernels::kInvSqrt2)); }
template <typename T>
__device__ __forceinline__ T geluTanhInner(T x) { return T(::megatrain::kernels::kSqrt2OverPi) * (x + T(::megatrain::kernels::kGeluCubic) * x * x * x); }

// s + x * 2 s (1 - s) du/dx with s = sigmoid(2u) (the CPU twin's form).
template <typename T>
__device__ __forceinline__ T geluTanhSlope(T x) {
  const T s = sigmoidOf(T(2) * geluTanhInner(x));
  const T dInner = T(::megatrain::kernels::kSqrt2OverPi) * (T(1) + T(3 * ::megatrain::kernels::kGeluCubic) * x * x);
  return s + x * T(2) * s * (T(1) - s) * dInner;
}

// floatToBf16 (megatrain/plan/Bf16.h) on the device: round to nearest even, a NaN stays a
// quiet NaN with its sign.
__device__ __forceinline__ uint16_t floatToBf16Bits(float value) {
  uint32_t word = __float_as_uint(value);
  if ((word & 0x7F800000u) == 0x7F800000u && (word & 0x007FFFFFu) != 0)
    return static_cast<uint16_t>((word >> 16) | 0x0040u);
  word += 0x7FFFu + ((word >> 16) & 1u);
  return static_cast<uint16_t>(word >> 16);
}
__device__ __forceinline__ float bf16BitsToFloat(uint16_t bits) {
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

}  // namespace megatrain::runtime::cuda

#endif  // MEGATRAIN_RUNTIME_CUDA_ELEMENTMATH_CUH
