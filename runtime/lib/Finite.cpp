// Finite.cpp - finds the first NaN or infinity in a tensor's bytes, for the checks on loaded and saved weights.
#include "megatrain/runtime/Finite.h"

#include <cmath>
#include <cstring>

namespace megatrain::runtime {
namespace {

// bf16 and f16 by their bits: an all-ones exponent is NaN or infinity.
template <uint16_t kExponent>
int64_t firstAllOnesExponent(const void* bytes, size_t count) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  for (size_t i = 0; i < count; ++i) {
    uint16_t bits;
    std::memcpy(&bits, p + 2 * i, 2);
    if ((bits & kExponent) == kExponent) return static_cast<int64_t>(i);
  }
  return -1;
}

template <typename T>
int64_t firstNotFinite(const void* bytes, size_t count) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  for (size_t i = 0; i < count; ++i) {
    T value;
    std::memcpy(&value, p + sizeof(T) * i, sizeof(T));
    if (!std::isfinite(value)) return static_cast<int64_t>(i);
  }
  return -1;
}

}  // namespace

int64_t firstNonFinite(const void* bytes, size_t count, plan::DType dtype) {
  switch (dtype) {
    case plan::F32: return firstNotFinite<float>(bytes, count);
    case plan::F64: return firstNotFinite<double>(bytes, count);
    case plan::BF16: return firstAllOnesExponent<0x7F80>(bytes, count);
    case plan::F16: return firstAllOnesExponent<0x7C00>(bytes, count);
    default: return -1;
  }
}

std::string nonFiniteValueName(const void* bytes, int64_t index, plan::DType dtype) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  bool negative = false, nan = false;
  if (dtype == plan::F32 || dtype == plan::F64) {
    double value;
    if (dtype == plan::F32) {
      float f;
      std::memcpy(&f, p + 4 * index, 4);
      value = f;
    } else {
      std::memcpy(&value, p + 8 * index, 8);
    }
    negative = std::signbit(value);
    nan = std::isnan(value);
  } else if (dtype == plan::BF16 || dtype == plan::F16) {
    uint16_t bits;
    std::memcpy(&bits, p + 2 * index, 2);
    negative = (bits & 0x8000) != 0;
    nan = (bits & (dtype == plan::BF16 ? 0x007F : 0x03FF)) != 0;
  }
  if (nan) return "nan";
  return negative ? "-inf" : "inf";
}

}  // namespace megatrain::runtime
