// activation.cu - the fused activations SiLU, SwiGLU and GELU (erf and tanh forms) and their gradients on the GPU.
//
// Grid-stride loops over operands of one shape, in T arithmetic, with the
// expressions of the CPU twin (runtime/cpu/activation.cpp) in the same order.
// Pointers are not __restrict__: the planner may give an output the bytes of
// a dying input.
#include <string>

#include "DeviceMath.cuh"

namespace megatrain::runtime::cuda {
namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;     // 1 / sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1 / sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kGeluCubic = 0.044715;

// ---- element functions ----

__device__ __forceinline__ float expOf(float x) { return expf(x); }
__device__ __forceinline__ double expOf(double x) { return exp(x); }
__device__ __forceinline__ float erfcOf(float x) { return erfcf(x); }
__device__ __forceinline__ double erfcOf(double x) { return erfc(x); }

template <typename T>
__device__ __forceinline__ T sigmoidOf(T x) {
  // Both branches keep exp's argument non-positive, so neither overflows.
  if (x >= T(0)) return T(1) / (T(1) + expOf(-x));
  const T e = expOf(x);
  return e / (T(1) + e);
}

template <typename T>
__device__ __forceinline__ T siluOf(T x) { return x * sigmoidOf(x); }

// d silu / dx = s (1 + x (1 - s)).
template <typename T>
__device__ __forceinline__ T siluSlope(T x) {
  const T s = sigmoidOf(x);
  return s * (T(1) + x * (T(1) - s));
}

struct Silu { template <typename T> __device__ T operator()(T x) const { return siluOf(x); } };
struct SiluSlope { template <typename T> __device__ T operator()(T x) const { return siluSlope(x); } };

// The CPU twin's forms (runtime/cpu/activation.cpp): 1 + erf(z) = erfc(-z) and
// 0.5 (1 + tanh(u)) = sigmoid(2u), free of cancellation for negative x.
template <typename T>
__device__ __forceinline__ T geluErfCdf(T x) { return T(0.5) * erfcOf(-x * T(kInvSqrt2)); }
template <typename T>
__device__ __forceinline__ T geluTanhInner(T x) { return T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x); }

struct GeluErf {
  template <typename T> __device__ T operator()(T x) const { return x * geluErfCdf(x); }
};
// Phi(x) + x phi(x).
struct GeluErfSlope {
  template <typename T>
  __device__ T operator()(T x) const {
    return geluErfCdf(x) + x * T(kInvSqrt2Pi) * expOf(T(-0.5) * x * x);
  }
};
struct GeluTanh {
  template <typename T>
  __device__ T operator()(T x) const { return x * sigmoidOf(T(2) * geluTanhInner(x)); }
};
// s + x * 2 s (1 - s) du/dx with s = sigmoid(2u) (the CPU twin's form).
struct GeluTanhSlope {
  template <typename T>
  __device__ T operator()(T x) const {
    const T s = sigmoidOf(T(2) * geluTanhInner(x));
    const T dInner = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x * x);
    return s + x * T(2) * s * (T(1) - s) * dInner;
  }
};

// ---- kernels ----

// y = op(x); x, y [n].
template <typename T, typename Op>
__global__ void mapKernel(const T* x, T* y, int64_t n, Op op) {
  for (int64_t i = globalThread(); i < n; i += gridThreads()) y[i] = op(x[i]);
}

// dx = dy * slope(x); x, dy, dx [n].
template <typename T, typename Slope>
__global__ void slopeKernel(const T* x, const T* dy, T* dx, int64_t n, Slope slope) {
  for (int64_t i = globalThread(); i < n; i += gridThreads()) dx[i] = dy[i] * slope(x[i]);
}

// y = silu(gate) * up; gate, up, y [n].
template <typename T>
__global__ void swigluKernel(const T* gate, const T* up, T* y, int64_t n) {
  for (int64_t i = globalThread(); i < n; i += gridThreads()) y[i] = siluOf(gate[i]) * up[i];
}

// dgate = dy * up * silu'(gate), dup = dy * silu(gate); all [n].
template <typename T>
__global__ void swigluGradKernel(const T* gate, const T* up, const T* dy, T* dgate, T* dup, int64_t n) {
  for (int64_t i = globalThread(); i < n; i += gridThreads()) {
    const T g = gate[i], u = up[i], d = dy[i];
    dgate[i] = d * u * siluSlope(g);
    dup[i] = d * siluOf(g);
  }
}

// ---- launchers ----

// Every operand floating, of one dtype and in[0]'s shape; returns the dtype.
DType requireSameShapes(const Launch& launch) {
  unsigned mask = 0;
  for (int i = 0; i < launch.numIn; ++i) mask |= inMask(i);
  for (int i = 0; i < launch.numOut; ++i) mask |= outMask(i);
  const DType dtype = floatingType(launch, mask);
  const Shape& shape = launch.in[0].shape;
  for (int i = 1; i < launch.numIn; ++i) requireShape(launch, launch.in[i], shape, "input");
  for (int i = 0; i < launch.numOut; ++i) requireShape(launch, launch.out[i], shape, "output");
  return dtype;
}

// "none" -> false, "tanh" -> true; anything else is an error.
bool tanhForm(const Launch& launch) {
  const std::string_view form = launch.attrs.getString("approximate", "");
  if (form == "tanh") return true;
  if (form != "none") fail(launch, "approximate must be \"none\" or \"tanh\", got \"" + std::string(form) + "\"");
  return false;
}

template <typename Op>
void map(const Launch& launch) {
  const DType dtype = requireSameShapes(launch);
  const int64_t n = launch.in[0].shape.elements();
  if (n == 0) return;
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    mapKernel<T, Op><<<gridFor(launch, n, kThreads), kThreads, 0, launch.device->stream>>>(
        launch.in[0].as<const T>(), launch.out[0].as<T>(), n, Op{});
  });
  MT_CHECK_LAUNCH(launch);
}

template <typename Slope>
void slope(const Launch& launch) {
  const DType dtype = requireSameShapes(launch);
  const int64_t n = launch.in[0].shape.elements();
  if (n == 0) return;
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    slopeKernel<T, Slope><<<gridFor(launch, n, kThreads), kThreads, 0, launch.device->stream>>>(
        launch.in[0].as<const T>(), launch.in[1].as<const T>(), launch.out[0].as<T>(), n, Slope{});
  });
  MT_CHECK_LAUNCH(launch);
}

void gelu(const Launch& launch) {
  if (tanhForm(launch)) map<GeluTanh>(launch);
  else map<GeluErf>(launch);
}

void geluGrad(const Launch& launch) {
  if (tanhForm(launch)) slope<GeluTanhSlope>(launch);
  else slope<GeluErfSlope>(launch);
}

void swiglu(const Launch& launch) {
  const DType dtype = requireSameShapes(launch);
  const int64_t n = launch.in[0].shape.elements();
  if (n == 0) return;
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    swigluKernel<T><<<gridFor(launch, n, kThreads), kThreads, 0, launch.device->stream>>>(
        launch.in[0].as<const T>(), launch.in[1].as<const T>(), launch.out[0].as<T>(), n);
  });
  MT_CHECK_LAUNCH(launch);
}

void swigluGrad(const Launch& launch) {
  const DType dtype = requireSameShapes(launch);
  const int64_t n = launch.in[0].shape.elements();
  if (n == 0) return;
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    swigluGradKernel<T><<<gridFor(launch, n, kThreads), kThreads, 0, launch.device->stream>>>(
        launch.in[0].as<const T>(), launch.in[1].as<const T>(), launch.in[2].as<const T>(), launch.out[0].as<T>(),
        launch.out[1].as<T>(), n);
  });
  MT_CHECK_LAUNCH(launch);
}

}  // namespace

void addActivationKernels(KernelTable& table) {
  table.add("silu", 1, 1, map<Silu>);
  table.add("silu_grad", 2, 1, slope<SiluSlope>);
  table.add("swiglu", 2, 1, swiglu);
  table.add("swiglu_grad", 3, 2, swigluGrad);
  table.add("gelu", 1, 1, gelu);
  table.add("gelu_grad", 2, 1, geluGrad);
}

}  // namespace megatrain::runtime::cuda
