// elementwise.cu - fill, broadcasting binary ops, scale, activations, math functions and their gradients on the GPU.
//
// Every kernel is a grid-stride loop over the output. Binary ops read their
// operands through a coalesced StridedSpace<2> (numpy broadcasting as stride-0
// dims), so equal shapes and a broadcast scalar both run at rank 1. Unary ops,
// and binary ops on equal shapes, move a 16-byte pack a thread (4 f32, 2 f64)
// when the count is whole packs and every pointer is aligned. Pointers are not
// __restrict__: the planner may give y the bytes of a dying input (a thread
// reads its pack before it writes it).
#include <cstdint>
#include <initializer_list>

#include "DeviceMath.cuh"
#include "megatrain/kernels/MathConstants.h"

namespace megatrain::runtime::cuda {
namespace {

// ---- element functions (T arithmetic, as the CPU twin computes it) ----

__device__ __forceinline__ float expOf(float x) { return expf(x); }
__device__ __forceinline__ double expOf(double x) { return exp(x); }
__device__ __forceinline__ float tanhOf(float x) { return tanhf(x); }
__device__ __forceinline__ double tanhOf(double x) { return tanh(x); }
__device__ __forceinline__ float sqrtOf(float x) { return sqrtf(x); }
__device__ __forceinline__ double sqrtOf(double x) { return sqrt(x); }
__device__ __forceinline__ float logOf(float x) { return logf(x); }
__device__ __forceinline__ double logOf(double x) { return log(x); }
__device__ __forceinline__ float erfOf(float x) { return erff(x); }
__device__ __forceinline__ double erfOf(double x) { return erf(x); }
__device__ __forceinline__ float cosOf(float x) { return cosf(x); }
__device__ __forceinline__ double cosOf(double x) { return cos(x); }
__device__ __forceinline__ float sinOf(float x) { return sinf(x); }
__device__ __forceinline__ double sinOf(double x) { return sin(x); }
__device__ __forceinline__ float powOf(float x, float e) { return powf(x, e); }
__device__ __forceinline__ double powOf(double x, double e) { return pow(x, e); }

struct Add { template <typename T> __device__ T operator()(T a, T b) const { return a + b; } };
struct Sub { template <typename T> __device__ T operator()(T a, T b) const { return a - b; } };
struct Mul { template <typename T> __device__ T operator()(T a, T b) const { return a * b; } };
struct Div { template <typename T> __device__ T operator()(T a, T b) const { return a / b; } };
// max and min propagate NaN and pick a on ties, where max_grad/min_grad send dy.
struct PicksLhsOfMax { template <typename T> __device__ bool operator()(T a, T b) const { return a >= b || a != a; } };
struct PicksLhsOfMin { template <typename T> __device__ bool operator()(T a, T b) const { return a <= b || a != a; } };
template <typename Pick>
struct Choose { template <typename T> __device__ T operator()(T a, T b) const { return Pick{}(a, b) ? a : b; } };

// relu and relu_grad keep a NaN (x or dy) a NaN, as their CPU twins; -0 still maps to +0.
struct Relu { template <typename T> __device__ T operator()(T x) const { return x > T(0) || x != x ? x : T(0); } };
struct Tanh { template <typename T> __device__ T operator()(T x) const { return tanhOf(x); } };
struct Sigmoid {
  // Both branches keep exp's argument non-positive, so neither overflows.
  template <typename T>
  __device__ T operator()(T x) const {
    if (x >= T(0)) return T(1) / (T(1) + expOf(-x));
    const T e = expOf(x);
    return e / (T(1) + e);
  }
};
// max(x, 0) + log1p(e^-|x|), as the CPU twin: e^x never overflows, and a NaN stays NaN.
struct Softplus {
  template <typename T>
  __device__ T operator()(T x) const {
    const T tail = expOf(x > T(0) ? -x : x);
    if constexpr (sizeof(T) == 4) return (x > T(0) ? x : T(0)) + log1pf(tail);
    else return (x > T(0) ? x : T(0)) + log1p(tail);
  }
};
struct Scale {
  double alpha;
  template <typename T> __device__ T operator()(T x) const { return static_cast<T>(alpha * x); }
};
struct Neg { template <typename T> __device__ T operator()(T x) const { return -x; } };
struct Sqrt { template <typename T> __device__ T operator()(T x) const { return sqrtOf(x); } };
struct Reciprocal { template <typename T> __device__ T operator()(T x) const { return T(1) / x; } };
struct Exp { template <typename T> __device__ T operator()(T x) const { return expOf(x); } };
struct Log { template <typename T> __device__ T operator()(T x) const { return logOf(x); } };
struct Erf { template <typename T> __device__ T operator()(T x) const { return erfOf(x); } };
struct Cos { template <typename T> __device__ T operator()(T x) const { return cosOf(x); } };
struct Sin { template <typename T> __device__ T operator()(T x) const { return sinOf(x); } };
struct Pow {
  double exponent;
  template <typename T> __device__ T operator()(T x) const { return powOf(x, static_cast<T>(exponent)); }
};

// Gradients: op(v, dy) with v the forward input (relu) or output (tanh, sigmoid).
struct ReluGrad {
  template <typename T>
  __device__ T operator()(T x, T dy) const {
    return x > T(0) ? dy : x != x || dy != dy ? T(x + dy) : T(0);
  }
};
struct TanhGrad { template <typename T> __device__ T operator()(T y, T dy) const { return dy * (T(1) - y * y); } };
struct SigmoidGrad { template <typename T> __device__ T operator()(T y, T dy) const { return dy * y * (T(1) - y); } };
struct ErfGrad {
  template <typename T> __device__ T operator()(T x, T dy) const { return dy * (T(kTwoOverSqrtPi) * expOf(-(x * x))); }
};

// ---- kernels ----

// y[i] = value; y [n].
template <typename T>
__global__ void fillKernel(T* y, int64_t n, T value) {
  for (int64_t i = globalThread(); i < n; i += gridThreads()) y[i] = value;
}

// y[i] = op(x[i]); x, y [n].
template <typename T, typename Op>
__global__ void unaryKernel(const T* x, T* y, int64_t n, Op op) {
  for (int64_t i = globalThread(); i < n; i += gridThreads()) y[i] = op(x[i]);
}

// y = op(x) over 16-byte packs: x, y [packs x 16 / sizeof(T)], 16-byte aligned.
template <typename T, typename Op>
__global__ void unaryPackKernel(const Pack<T>* x, Pack<T>* y, int64_t packs, Op op) {
  for (int64_t i = globalThread(); i < packs; i += gridThreads()) {
    Pack<T> v = x[i];
#pragma unroll
    for (int k = 0; k < 16 / static_cast<int>(sizeof(T)); ++k) v.v[k] = op(v.v[k]);
    y[i] = v;
  }
}

// y = op(a, b) over 16-byte packs of operands of one shape (no broadcast).
template <typename T, typename Op>
__global__ void binaryPackKernel(const Pack<T>* a, const Pack<T>* b, Pack<T>* y, int64_t packs, Op op) {
  for (int64_t i = globalThread(); i < packs; i += gridThreads()) {
    const Pack<T> u = a[i], w = b[i];
    Pack<T> v;
#pragma unroll
    for (int k = 0; k < 16 / static_cast<int>(sizeof(T)); ++k) v.v[k] = op(u.v[k], w.v[k]);
    y[i] = v;
  }
}

// True when n elements of T at every pointer can move as whole 16-byte packs.
template <typename T>
bool packable(int64_t n, std::initializer_list<const void*> pointers) {
  if (n % static_cast<int64_t>(16 / sizeof(T)) != 0) return false;
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// y[i] = op(a[offset_a(i)], b[offset_b(i)]); y [n] row-major over space.
template <typename T, typename Op>
__global__ void binaryKernel(const T* a, const T* b, T* y, int64_t n, StridedSpace<2> space, Op op) {
  for (int64_t i = globalThread(); i < n; i += gridThreads()) {
    int64_t at[2];
    stridedOffsets(space, i, at);
    y[i] = op(a[at[0]], b[at[1]]);
  }
}

// da[i] = dy[i] where pick(a, b) chose a, else 0; db[i] the rest. dy, da, db
// [n] row-major over space, a and b read through it.
template <typename T, typename Pick>
__global__ void minMaxGradKernel(const T* a, const T* b, const T* dy, T* da, T* db, int64_t n,
                                 StridedSpace<2> space, Pick pick) {
  for (int64_t i = globalThread(); i < n; i += gridThreads()) {
    int64_t at[2];
    stridedOffsets(space, i, at);
    const bool lhs = pick(a[at[0]], b[at[1]]);
    const T g = dy[i];
    da[i] = lhs ? g : T(0);
    db[i] = lhs ? T(0) : g;
  }
}

// y[i] = 1 if x[i] is NaN, else 0; x, y [n].
template <typename T>
__global__ void isnanKernel(const T* x, uint8_t* y, int64_t n) {
  for (int64_t i = globalThread(); i < n; i += gridThreads()) y[i] = x[i] != x[i] ? 1 : 0;
}

// ---- launchers ----

void fill(const Launch& launch) {
  const DType dtype = cudaFloatingType(launch, outMask(0));
  const double value = launch.attrs.getFloat("value");
  const Operand& y = launch.out[0];
  const int64_t n = y.shape.elements();
  if (n == 0) return;
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    fillKernel<T><<<gridFor(launch, n, kThreads), kThreads, 0, launch.device->stream>>>(
        y.as<T>(), n, static_cast<T>(value));
  });
  MT_CHECK_LAUNCH(launch);
}

// Launches binaryKernel over out[0] with the two inputs read through `space`.
template <typename Op>
void launchBinary(const Launch& launch, DType dtype, StridedSpace<2> space, Op op) {
  const int64_t n = launch.out[0].shape.elements();
  if (n == 0) return;
  coalesce(space);
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *a = launch.in[0].as<const T>(), *b = launch.in[1].as<const T>();
    T* y = launch.out[0].as<T>();
    // Equal shapes (one contiguous dim, unit strides): a thread a 16-byte pack.
    if (space.rank == 1 && space.strides[0][0] == 1 && space.strides[1][0] == 1 && packable<T>(n, {a, b, y})) {
      const int64_t packs = n / static_cast<int64_t>(16 / sizeof(T));
      binaryPackKernel<T, Op><<<gridFor(launch, packs, kThreads), kThreads, 0, launch.device->stream>>>(
          reinterpret_cast<const Pack<T>*>(a), reinterpret_cast<const Pack<T>*>(b), reinterpret_cast<Pack<T>*>(y),
          packs, op);
      return;
    }
    binaryKernel<T, Op><<<gridFor(launch, n, kThreads), kThreads, 0, launch.device->stream>>>(a, b, y, n, space, op);
  });
  MT_CHECK_LAUNCH(launch);
}

// add, sub, mul, div: a, b broadcast to y.
template <typename Op>
void binary(const Launch& launch) {
  const DType dtype = cudaFloatingType(launch, inMask(0) | inMask(1) | outMask(0));
  const Operand &a = launch.in[0], &b = launch.in[1], &y = launch.out[0];
  StridedSpace<2> space;
  space.rank = y.shape.rank;
  for (int d = 0; d < y.shape.rank; ++d) space.dims[d] = y.shape[d];
  broadcastStrides(a.shape, y.shape, space.strides[0]);
  broadcastStrides(b.shape, y.shape, space.strides[1]);
  launchBinary(launch, dtype, space, Op{});
}

template <typename Op>
void launchUnary(const Launch& launch, Op op) {
  const DType dtype = cudaFloatingType(launch, inMask(0) | outMask(0));
  const int64_t n = launch.out[0].shape.elements();
  if (n == 0) return;
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = launch.in[0].as<const T>();
    T* y = launch.out[0].as<T>();
    if (packable<T>(n, {x, y})) {
      const int64_t packs = n / static_cast<int64_t>(16 / sizeof(T));
      unaryPackKernel<T, Op><<<gridFor(launch, packs, kThreads), kThreads, 0, launch.device->stream>>>(
          reinterpret_cast<const Pack<T>*>(x), reinterpret_cast<Pack<T>*>(y), packs, op);
      return;
    }
    unaryKernel<T, Op><<<gridFor(launch, n, kThreads), kThreads, 0, launch.device->stream>>>(x, y, n, op);
  });
  MT_CHECK_LAUNCH(launch);
}

template <typename Op>
void unary(const Launch& launch) { launchUnary(launch, Op{}); }

void scale(const Launch& launch) { launchUnary(launch, Scale{launch.attrs.getFloat("alpha")}); }

// relu_grad, tanh_grad, sigmoid_grad: (v, dy) -> dx, all one shape.
template <typename Op>
void unaryGrad(const Launch& launch) {
  const DType dtype = cudaFloatingType(launch, inMask(0) | inMask(1) | outMask(0));
  StridedSpace<2> space;
  space.rank = 1;
  space.dims[0] = launch.out[0].shape.elements();
  space.strides[0][0] = space.strides[1][0] = 1;
  launchBinary(launch, dtype, space, Op{});
}

// max_grad, min_grad: (a, b, dy) -> (da, db) at dy's shape, the broadcast of a and b.
template <typename Pick>
void minMaxGrad(const Launch& launch) {
  const DType dtype = cudaFloatingType(launch, inMask(0) | inMask(1) | inMask(2) | outMask(0) | outMask(1));
  const Operand &a = launch.in[0], &b = launch.in[1], &dy = launch.in[2];
  const Shape& expected = dy.shape;  // the broadcast of a and b (minMaxGradRule)
  const int64_t n = expected.elements();
  if (n == 0) return;
  StridedSpace<2> space;
  space.rank = expected.rank;
  for (int d = 0; d < expected.rank; ++d) space.dims[d] = expected[d];
  broadcastStrides(a.shape, expected, space.strides[0]);
  broadcastStrides(b.shape, expected, space.strides[1]);
  coalesce(space);
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    minMaxGradKernel<T, Pick><<<gridFor(launch, n, kThreads), kThreads, 0, launch.device->stream>>>(
        a.as<const T>(), b.as<const T>(), dy.as<const T>(), launch.out[0].as<T>(), launch.out[1].as<T>(), n,
        space, Pick{});
  });
  MT_CHECK_LAUNCH(launch);
}

void powfKernel(const Launch& launch) { launchUnary(launch, Pow{launch.attrs.getFloat("exponent")}); }

// x (floating) -> bool of the same shape.
void isNan(const Launch& launch) {
  const DType dtype = cudaFloatingType(launch, inMask(0));
  requireDType(launch, launch.out[0], DType::Bool, "output");
  const int64_t n = launch.out[0].shape.elements();
  if (n == 0) return;
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    isnanKernel<T><<<gridFor(launch, n, kThreads), kThreads, 0, launch.device->stream>>>(
        launch.in[0].as<const T>(), launch.out[0].as<uint8_t>(), n);
  });
  MT_CHECK_LAUNCH(launch);
}

}  // namespace

void addElementwiseKernels(CudaKernelRegistry& registry) {
  registry.add("fill", {fill});
  registry.add("add", {binary<Add>});
  registry.add("sub", {binary<Sub>});
  registry.add("mul", {binary<Mul>});
  registry.add("div", {binary<Div>});
  registry.add("scale", {scale});
  registry.add("relu", {unary<Relu>});
  registry.add("tanh", {unary<Tanh>});
  registry.add("sigmoid", {unary<Sigmoid>});
  registry.add("softplus", {unary<Softplus>});
  registry.add("relu_grad", {unaryGrad<ReluGrad>});
  registry.add("tanh_grad", {unaryGrad<TanhGrad>});
  registry.add("sigmoid_grad", {unaryGrad<SigmoidGrad>});
  registry.add("max", {binary<Choose<PicksLhsOfMax>>});
  registry.add("min", {binary<Choose<PicksLhsOfMin>>});
  registry.add("max_grad", {minMaxGrad<PicksLhsOfMax>});
  registry.add("min_grad", {minMaxGrad<PicksLhsOfMin>});
  registry.add("neg", {unary<Neg>});
  registry.add("sqrt", {unary<Sqrt>});
  registry.add("reciprocal", {unary<Reciprocal>});
  registry.add("exp", {unary<Exp>});
  registry.add("log", {unary<Log>});
  registry.add("erf", {unary<Erf>});
  registry.add("cos", {unary<Cos>});
  registry.add("sin", {unary<Sin>});
  registry.add("powf", {powfKernel});
  registry.add("erf_grad", {unaryGrad<ErfGrad>});
  registry.add("isnan", {isNan});
}

}  // namespace megatrain::runtime::cuda
