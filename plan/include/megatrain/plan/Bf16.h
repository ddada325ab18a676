// Bf16.h - bfloat16 bits to and from f32, as every backend, the host optimizer and the weight writers round.
#pragma once

#include <cstdint>

namespace megatrain {

// bfloat16 is the upper half of an IEEE f32. floatToBf16 rounds to nearest,
// ties to even; a NaN stays a (quiet) NaN, infinities stay infinite.
inline float bf16ToFloat(uint16_t bits) {
  const uint32_t word = static_cast<uint32_t>(bits) << 16;
  float value;
  __builtin_memcpy(&value, &word, 4);
  return value;
}

inline uint16_t floatToBf16(float value) {
  uint32_t word;
  __builtin_memcpy(&word, &value, 4);
  if ((word & 0x7F800000u) == 0x7F800000u && (word & 0x007FFFFFu) != 0)
    return static_cast<uint16_t>((word >> 16) | 0x0040u);  // quiet NaN, sign kept
  word += 0x7FFFu + ((word >> 16) & 1u);
  return static_cast<uint16_t>(word >> 16);
}

}  // namespace megatrain
