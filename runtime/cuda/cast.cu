// cast.cu - cast: element type conversion among f32, f64, i64 and bool on the GPU.
//
// The conversions are the CPU twin's (cpu/cast.cpp), spelled out so that
// neither backend relies on what C++ leaves undefined: float to i64 truncates
// toward zero, saturates, and takes NaN to 0; anything to bool is x != 0 (NaN
// is true); a nonzero bool byte reads as 1.
#include "DeviceMath.cuh"

namespace megatrain::runtime::cuda {
namespace {

// BOOL's element: one byte.
struct Bool {
  uint8_t byte;
};

template <typename To, typename From>
__device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same_v<From, Bool>) {
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

// ---- launcher ----

// Calls f(tag) with a value of the element type of `dtype` (f32, f64, i64 or bool).
template <typename F>
void dispatchCastable(const Launch& launch, DType dtype, F&& f) {
  switch (dtype) {
    case DType::F32: f(float{}); break;
    case DType::F64: f(double{}); break;
    case DType::I64: f(int64_t{}); break;
    case DType::Bool: f(Bool{}); break;
    default: fail(launch, std::string("cannot cast ") + dtypeLabel(dtype) + " (f32, f64, i64 or bool)");
  }
}

void cast(const Launch& launch) {
  const Operand &x = launch.in[0], &y = launch.out[0];
  requireShape(launch, y, x.shape, "output");
  const int64_t n = x.shape.elements();
  dispatchCastable(launch, x.dtype, [&](auto fromTag) {
    using From = decltype(fromTag);
    dispatchCastable(launch, y.dtype, [&](auto toTag) {
      using To = decltype(toTag);
      if (n == 0) return;
      castKernel<From, To><<<gridFor(launch, n, kThreads), kThreads, 0, launch.device->stream>>>(
          x.as<const From>(), y.as<To>(), n);
      MT_CHECK_LAUNCH(launch);
    });
  });
}

}  // namespace

void addCastKernels(KernelTable& table) { table.add("cast", 1, 1, cast); }

}  // namespace megatrain::runtime::cuda
