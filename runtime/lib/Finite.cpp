// Finite.cpp - finds the first NaN or infinity in a tensor's bytes, for the checks on loaded and saved weights.
#include "megatrain/runtime/Finite.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "megatrain/plan/DType.h"
#include "megatrain/runtime/HostThreads.h"

namespace megatrain::runtime {
namespace {

// Every float type by its bits: an all-ones exponent is NaN or infinity. A
// block is checked without a branch per element, so the scan runs at memory
// speed; only a block with a hit is searched for its first.
template <typename Bits, Bits kExponent>
int64_t firstAllOnesExponent(const void* bytes, size_t count) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  constexpr size_t kBlock = 64;
  for (size_t start = 0; start < count; start += kBlock) {
    const size_t end = std::min(count, start + kBlock);
    bool any = false;
    for (size_t i = start; i < end; ++i) {
      Bits bits;
      std::memcpy(&bits, p + sizeof(Bits) * i, sizeof(Bits));
      any |= (bits & kExponent) == kExponent;
    }
    if (!any) continue;
    for (size_t i = start; i < end; ++i) {
      Bits bits;
      std::memcpy(&bits, p + sizeof(Bits) * i, sizeof(Bits));
      if ((bits & kExponent) == kExponent) return static_cast<int64_t>(i);
    }
  }
  return -1;
}

int64_t firstNonFiniteSerial(const void* bytes, size_t count, plan::DType dtype) {
  switch (dtype) {
    case plan::F32: return firstAllOnesExponent<uint32_t, 0x7F800000u>(bytes, count);
    case plan::F64: return firstAllOnesExponent<uint64_t, 0x7FF0000000000000ull>(bytes, count);
    case plan::BF16: return firstAllOnesExponent<uint16_t, 0x7F80>(bytes, count);
    case plan::F16: return firstAllOnesExponent<uint16_t, 0x7C00>(bytes, count);
    default: return -1;
  }
}

}  // namespace

int64_t firstNonFinite(const void* bytes, size_t count, plan::DType dtype) {
  // Large tensors (a 7B model's loaded weights) are scanned by the host
  // threads; the first index over all ranges is the answer either way.
  constexpr size_t kParallelFrom = size_t{1} << 20;
  const size_t width = dtypeSize(dtype);
  if (count < kParallelFrom || width == 0 || hostThreadCount() == 1) return firstNonFiniteSerial(bytes, count, dtype);
  std::atomic<int64_t> first{-1};
  const auto* p = static_cast<const unsigned char*>(bytes);
  hostParallelRanges(count, hostThreadCount(), [&](size_t begin, size_t end) {
    const int64_t found = firstNonFiniteSerial(p + begin * width, end - begin, dtype);
    if (found < 0) return;
    const int64_t index = static_cast<int64_t>(begin) + found;
    int64_t seen = first.load();
    while ((seen < 0 || index < seen) && !first.compare_exchange_weak(seen, index)) {
    }
  });
  return first.load();
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
