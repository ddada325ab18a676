// activation.cu - the fused activations SiLU, SwiGLU and GELU (erf and tanh forms) and their gradients on the GPU.
//
// Grid-stride loops over operands of one shape, in T arithmetic, with the
// expressions of the CPU twin (runtime/cpu/activation.cpp) in the same order:
// a thread per 16-byte pack of every operand (4 f32 or 2 f64 elements) when
// all are 16-byte aligned and the count is a whole number of packs, else a
// thread per element.
// Pointers are not __restrict__: the planner may give an output the bytes of
// a dying input.
#include <cstdint>
#include <string>

#include "DeviceMath.cuh"
#include "ElementMath.cuh"
#include "megatrain/kernels/MathConstants.h"

namespace megatrain::runtime::cuda {
namespace {

// ---- element functions (ElementMath.cuh) ----

struct Silu { template <typename T> __device__ T operator()(T x) const { return siluOf(x); } };
struct SiluSlope { template <typename T> __device__ T operator()(T x) const { return siluSlope(x); } };

// The CPU twin's forms (runtime/cpu/activation.cpp): 1 + erf(z) = erfc(-z) and
// 0.5 (1 + tanh(u)) = sigmoid(2u), free of cancellation for negative x.
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
struct GeluTanhSlope {
  template <typename T> __device__ T operator()(T x) const { return geluTanhSlope(x); }
};

// ---- kernels ----

// The element functions of the launches, on an element's inputs x[In] into its outputs y[Out].
template <typename Op>
struct MapOf {  // y = op(x)
  template <typename T>
  __device__ void operator()(const T (&x)[1], T (&y)[1]) const { y[0] = Op{}(x[0]); }
};
template <typename Slope>
struct SlopeOf {  // dx = dy * slope(x); inputs x, dy
  template <typename T>
  __device__ void operator()(const T (&x)[2], T (&y)[1]) const { y[0] = x[1] * Slope{}(x[0]); }
};
struct SwigluOf {  // y = silu(gate) * up; inputs gate, up
  template <typename T>
  __device__ void operator()(const T (&x)[2], T (&y)[1]) const { y[0] = siluOf(x[0]) * x[1]; }
};
struct SwigluGradOf {  // dgate = dy * up * silu'(gate), dup = dy * silu(gate); inputs gate, up, dy
  template <typename T>
  __device__ void operator()(const T (&x)[3], T (&y)[2]) const {
    y[0] = x[2] * x[1] * siluSlope(x[0]);
    y[1] = x[2] * siluOf(x[0]);
  }
};

// An operand pointer per input and per output.
template <typename T, int In, int Out>
struct Operands {
  const T* in[In];
  T* out[Out];
};

// f on each of the n elements, a thread per element.
template <typename T, int In, int Out, typename F>
__global__ void elementsKernel(Operands<T, In, Out> a, int64_t n, F f) {
  for (int64_t i = globalThread(); i < n; i += gridThreads()) {
    T x[In], y[Out];
#pragma unroll
    for (int k = 0; k < In; ++k) x[k] = a.in[k][i];
    f(x, y);
#pragma unroll
    for (int k = 0; k < Out; ++k) a.out[k][i] = y[k];
  }
}

// The same a thread per 16-byte pack: every operand 16-byte aligned, n a
// whole number of packs. A pack's inputs are all read before its outputs are
// written, so an output on an input's bytes stays right.
template <typename T, int In, int Out, typename F>
__global__ void packsKernel(Operands<T, In, Out> a, int64_t packs, F f) {
  constexpr int kLanes = 16 / sizeof(T);
  for (int64_t p = globalThread(); p < packs; p += gridThreads()) {
    Pack<T> xs[In], ys[Out];
#pragma unroll
    for (int k = 0; k < In; ++k) xs[k] = reinterpret_cast<const Pack<T>*>(a.in[k])[p];
#pragma unroll
    for (int l = 0; l < kLanes; ++l) {
      T x[In], y[Out];
#pragma unroll
      for (int k = 0; k < In; ++k) x[k] = xs[k].v[l];
      f(x, y);
#pragma unroll
      for (int k = 0; k < Out; ++k) ys[k].v[l] = y[k];
    }
#pragma unroll
    for (int k = 0; k < Out; ++k) reinterpret_cast<Pack<T>*>(a.out[k])[p] = ys[k];
  }
}

// ---- launchers ----

// Every operand floating and of one dtype (the shape rule made them one shape); returns the dtype.
DType allFloating(const Launch& launch) {
  unsigned mask = 0;
  for (int i = 0; i < launch.numIn; ++i) mask |= inMask(i);
  for (int i = 0; i < launch.numOut; ++i) mask |= outMask(i);
  return cudaFloatingType(launch, mask);
}

// Runs f over every element of the launch's In inputs and Out outputs (one
// shape, checked), as packs when every operand allows it.
template <int In, int Out, typename F>
void launchElements(const Launch& launch, F f) {
  const DType dtype = allFloating(launch);
  const int64_t n = launch.in[0].shape.elements();
  if (n == 0) return;
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    Operands<T, In, Out> a;
    bool aligned = true;
    for (int k = 0; k < In; ++k) {
      a.in[k] = launch.in[k].as<const T>();
      aligned = aligned && reinterpret_cast<uintptr_t>(a.in[k]) % 16 == 0;
    }
    for (int k = 0; k < Out; ++k) {
      a.out[k] = launch.out[k].as<T>();
      aligned = aligned && reinterpret_cast<uintptr_t>(a.out[k]) % 16 == 0;
    }
    const int64_t lanes = static_cast<int64_t>(16 / sizeof(T));
    const cudaStream_t stream = launch.device->stream;
    if (aligned && n % lanes == 0)
      packsKernel<T, In, Out, F><<<gridFor(launch, n / lanes, kThreads), kThreads, 0, stream>>>(a, n / lanes, f);
    else
      elementsKernel<T, In, Out, F><<<gridFor(launch, n, kThreads), kThreads, 0, stream>>>(a, n, f);
  });
  MT_CHECK_LAUNCH(launch);
}

template <typename Op>
void map(const Launch& launch) {
  launchElements<1, 1>(launch, MapOf<Op>{});
}

template <typename Slope>
void slope(const Launch& launch) {
  launchElements<2, 1>(launch, SlopeOf<Slope>{});
}

void gelu(const Launch& launch) {
  if (geluTanhForm(launch)) map<GeluTanh>(launch);
  else map<GeluErf>(launch);
}

void geluGrad(const Launch& launch) {
  if (geluTanhForm(launch)) slope<GeluTanhSlope>(launch);
  else slope<GeluErfSlope>(launch);
}

void swiglu(const Launch& launch) { launchElements<2, 1>(launch, SwigluOf{}); }

void swigluGrad(const Launch& launch) { launchElements<3, 2>(launch, SwigluGradOf{}); }

}  // namespace

void launchGeluTanh(const Launch& launch, const float* x, float* y, int64_t n) {
  if (n == 0) return;
  Operands<float, 1, 1> a;
  a.in[0] = x;
  a.out[0] = y;
  const cudaStream_t stream = launch.device->stream;
  const MapOf<GeluTanh> f{};
  if (reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0 && n % 4 == 0)
    packsKernel<float, 1, 1, MapOf<GeluTanh>><<<gridFor(launch, n / 4, kThreads), kThreads, 0, stream>>>(a, n / 4, f);
  else
    elementsKernel<float, 1, 1, MapOf<GeluTanh>><<<gridFor(launch, n, kThreads), kThreads, 0, stream>>>(a, n, f);
  MT_CHECK_LAUNCH(launch);
}

void launchGeluTanhGrad(const Launch& launch, const float* x, const float* dy, float* dx, int64_t n) {
  if (n == 0) return;
  Operands<float, 2, 1> a;
  a.in[0] = x;
  a.in[1] = dy;
  a.out[0] = dx;
  const cudaStream_t stream = launch.device->stream;
  const SlopeOf<GeluTanhSlope> f{};
  const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(dy) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(dx) % 16 == 0;
  // Both kernels read an element's (or pack's) inputs before writing it, so dx may be dy.
  if (aligned && n % 4 == 0)
    packsKernel<float, 2, 1, SlopeOf<GeluTanhSlope>><<<gridFor(launch, n / 4, kThreads), kThreads, 0, stream>>>(
        a, n / 4, f);
  else
    elementsKernel<float, 2, 1, SlopeOf<GeluTanhSlope>><<<gridFor(launch, n, kThreads), kThreads, 0, stream>>>(
        a, n, f);
  MT_CHECK_LAUNCH(launch);
}

void addActivationKernels(CudaKernelRegistry& registry) {
  registry.add("silu", {map<Silu>});
  registry.add("silu_grad", {slope<SiluSlope>});
  registry.add("swiglu", {swiglu});
  registry.add("swiglu_grad", {swigluGrad});
  registry.add("gelu", {gelu});
  registry.add("gelu_grad", {geluGrad});
}

}  // namespace megatrain::runtime::cuda
