// cast.cpp - cast: element type conversion among f32, f64, i64 and bool.
//
// Conversions are spelled out rather than left to static_cast where C++
// leaves them undefined: a float becomes i64 by truncation toward zero,
// saturated to the i64 range, with NaN giving 0; anything becomes bool as
// x != 0 (NaN is true); a bool byte reads as 1 when nonzero. The CUDA twin
// (cast.cu) computes the same.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "CpuKernel.h"
#include "megatrain/runtime/DType.h"

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
void dispatchCastable(const KernelArgs& args, plan::DType dtype, F&& f) {
  switch (dtype) {
    case plan::F32: f(float{}); break;
    case plan::F64: f(double{}); break;
    case plan::I64: f(int64_t{}); break;
    case plan::BOOL: f(Bool{}); break;
    default: fail(args, std::string("cannot cast ") + dtypeName(dtype) + " (f32, f64, i64 or bool)");
  }
}

// y = x converted to y's dtype; same shape.
void cast(const KernelArgs& args) {
  const Operand &x = args.in[0], &y = args.out[0];
  requireShape(args, y, x.shape, "output");
  const int64_t n = x.shape.elements();
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

void addCastKernels(KernelRegistry& registry) { registry.add("cast", 1, 1, cast); }

}  // namespace megatrain::runtime::cpu
