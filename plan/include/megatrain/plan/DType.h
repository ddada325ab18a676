// DType.h - sizes, names and shape arithmetic for the plan's element types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "megatrain/plan/plan.pb.h"

namespace megatrain {

// Bytes per element; 0 for DTYPE_UNSPECIFIED.
size_t dtypeSize(plan::DType dtype);

// Lower-case short name: "f32", "i64", ...
const char* dtypeName(plan::DType dtype);

bool isFloating(plan::DType dtype);

// Product of the dimensions (1 for a scalar); -1 if a dimension is negative or
// the product overflows.
int64_t elementCount(const google::protobuf::RepeatedField<int64_t>& shape);

// "[4, 3]"; "[]" for a scalar.
std::string formatShape(const google::protobuf::RepeatedField<int64_t>& shape);

const char* roleName(plan::Role role);

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
const char* tierName(plan::Tier tier);

}  // namespace megatrain
