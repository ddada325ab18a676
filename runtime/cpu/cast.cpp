// cast.cpp - cast: element type conversion among f32, f64, i64 and bool, and
// between bf16 and f32 or f64.
//
// Conversions are spelled out rather than left to static_cast where C++
// leaves them undefined: a float becomes i64 by truncation toward zero,
// saturated to the i64 range, with NaN giving 0; anything becomes bool as
// x != 0 (NaN is true); a bool byte reads as 1 when nonzero. The CUDA twin
// (cast.cu) computes the same.
//
// bf16 converts only to and from f32 and f64. To bf16 rounds to nearest, ties
// to even (floatToBf16, megatrain/plan/Bf16.h); an f64 is first rounded to f32, so f64 ->
// bf16 can round twice (the CUDA twin does the same). From bf16 is exact.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "CpuKernel.h"
#include "megatrain/plan/Bf16.h"

namespace megatrain::runtime::cpu {
namespace {

// BOOL's element: one byte, 0 or 1 when written by a kernel.
struct Bool {
  uint8_t byte;
};

template <typename To, typename From>
To convert(From v) {
  if constexpr (std::is_same_v<From, Bool>) {
    return convert<To>(static_cast<int64_t>(v.byte != 0));
  } else if constexpr (std::is_same_v<To, Bool>) {
    return Bool{static_cast<uint8_t>(v != 0 ? 1 : 0)};
  } else if constexpr (std::is_same_v<To, int64_t> && std::is_floating_point_v<From>) {
    if (std::isnan(v)) return 0;
    // 2^63 is exact in float and double; anything at or past it saturates.
    constexpr From kLimit = static_cast<From>(9223372036854775808.0);
    if (v >= kLimit) return std::numeric_limits<int64_t>::max();
    if (v <= -kLimit) return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(v);
  } else {
    return static_cast<To>(v);
  }
}

// Calls f(tag) with a value of the element type of `dtype` (f32, f64, i64 or bool).
template <typename F>
void dispatchCastable(const KernelArgs& args, DType dtype, F&& f) {
  switch (dtype) {
    case DType::F32: f(float{}); break;
    case DType::F64: f(double{}); break;
    case DType::I64: f(int64_t{}); break;
    case DType::Bool: f(Bool{}); break;
    default: fail(args, std::string("cannot cast ") + dtypeLabel(dtype) + " (f32, f64, i64 or bool)");
  }
}

// y = x converted between bf16 (raw bits) and f32 or f64; false when neither
// side is bf16.
bool castBf16(const KernelArgs& args, const Operand& x, const Operand& y, int64_t n) {
  if (x.dtype != DType::BF16 && y.dtype != DType::BF16) return false;
  const DType other = x.dtype == DType::BF16 ? y.dtype : x.dtype;
  if (other != DType::F32 && other != DType::F64 && other != DType::BF16)
    fail(args, std::string("bf16 casts only to and from f32 and f64, not ") + dtypeLabel(other));
  if (x.dtype == DType::BF16 && y.dtype == DType::BF16) {
    std::memcpy(y.data, x.data, static_cast<size_t>(n) * 2);
  } else if (x.dtype == DType::BF16) {
    const uint16_t* src = x.as<const uint16_t>();
    if (y.dtype == DType::F32)
      for (int64_t i = 0; i < n; ++i) y.as<float>()[i] = bf16ToFloat(src[i]);
    else
      for (int64_t i = 0; i < n; ++i) y.as<double>()[i] = static_cast<double>(bf16ToFloat(src[i]));
  } else {
    uint16_t* dst = y.as<uint16_t>();
    if (x.dtype == DType::F32)
      for (int64_t i = 0; i < n; ++i) dst[i] = floatToBf16(x.as<const float>()[i]);
    else
      for (int64_t i = 0; i < n; ++i) dst[i] = floatToBf16(static_cast<float>(x.as<const double>()[i]));
  }
  return true;
}

// y = x converted to y's dtype; same shape.
void cast(const KernelArgs& args) {
  const Operand &x = args.in[0], &y = args.out[0];
  const int64_t n = x.shape.elements();
  if (castBf16(args, x, y, n)) return;
  dispatchCastable(args, x.dtype, [&](auto fromTag) {
    using From = decltype(fromTag);
    dispatchCastable(args, y.dtype, [&](auto toTag) {
      using To = decltype(toTag);
      const From* src = x.as<const From>();
      To* dst = y.as<To>();
      for (int64_t i = 0; i < n; ++i) dst[i] = convert<To>(src[i]);
    });
  });
}

}  // namespace

void addCastKernels(CpuKernelRegistry& registry) { registry.add("cast", {cast}); }

}  // namespace megatrain::runtime::cpu
