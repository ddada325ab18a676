// F16.h - IEEE half-precision bits to and from f32, as the weight readers and writers convert them.
#pragma once

#include <cstdint>

namespace megatrain {

// Exact: every half is an f32. Subnormals are normalized, NaN payloads keep
// their top bits, infinities stay infinite.
inline float f16ToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1Fu;
  uint32_t mantissa = bits & 0x3FFu;
  uint32_t word;
  if (exponent == 0x1F) {
    word = sign | 0x7F800000u | (mantissa << 13);
  } else if (exponent != 0) {
    word = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    word = sign;
  } else {
    // Subnormal: shift the leading one up to the implicit bit.
    exponent = 113;
    while (!(mantissa & 0x400u)) {
      mantissa <<= 1;
      --exponent;
    }
    word = sign | (exponent << 23) | ((mantissa & 0x3FFu) << 13);
  }
  float value;
  __builtin_memcpy(&value, &word, 4);
  return value;
}

// Rounds to nearest, ties to even (as numpy and torch do); values beyond the
// largest half (65504, after rounding) become infinities, a NaN stays a quiet NaN.
inline uint16_t floatToF16(float value) {
  uint32_t word;
  __builtin_memcpy(&word, &value, 4);
  const auto sign = static_cast<uint16_t>((word >> 16) & 0x8000u);
  const uint32_t magnitude = word & 0x7FFFFFFFu;
  if (magnitude >= 0x7F800000u)
    return sign | (magnitude > 0x7F800000u ? 0x7E00u | ((magnitude >> 13) & 0x3FFu) : 0x7C00u);
  if (magnitude >= 0x477FF000u) return sign | 0x7C00u;  // rounds past 65504
  if (magnitude < 0x38800000u) {                        // below 2^-14: subnormal or zero
    if (magnitude < 0x33000000u) return sign;           // at most 2^-25: rounds to 0 (a tie goes even)
    const uint32_t exponent = magnitude >> 23;
    const uint32_t mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // 14..24: value / 2^-24
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1), midpoint = 1u << (shift - 1);
    if (rest > midpoint || (rest == midpoint && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (magnitude >> 13) - (112u << 10);
  const uint32_t rest = magnitude & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

}  // namespace megatrain
