// elementwise.cpp - fill, broadcasting binary ops, scale, activations, math functions and their gradients.
#include <cmath>

#include "CpuKernel.h"
#include "megatrain/kernels/MathConstants.h"

namespace megatrain::runtime::cpu {
namespace {

// ---- kernels ----

template <typename T>
void fillImpl(const KernelArgs& args) {
  const T value = static_cast<T>(args.attrs.getFloat("value"));
  T* y = args.out[0].as<T>();
  const int64_t n = args.out[0].shape.elements();
  for (int64_t i = 0; i < n; ++i) y[i] = value;
}

// y = op(a, b), numpy broadcasting; y.shape = broadcast(a.shape, b.shape).
template <typename T, typename Op>
void binaryImpl(const KernelArgs& args, Op op) {
  const Operand &a = args.in[0], &b = args.in[1], &y = args.out[0];
  const T* pa = a.as<const T>();
  const T* pb = b.as<const T>();
  T* py = y.as<T>();
  if (a.shape == y.shape && b.shape == y.shape) {
    const int64_t n = y.shape.elements();
    for (int64_t i = 0; i < n; ++i) py[i] = op(pa[i], pb[i]);
    return;
  }
  int64_t sa[kMaxRank], sb[kMaxRank];
  broadcastStrides(a.shape, y.shape, sa);
  broadcastStrides(b.shape, y.shape, sb);
  walk(y.shape, sa, sb, [&](int64_t i, int64_t ia, int64_t ib) { py[i] = op(pa[ia], pb[ib]); });
}

template <typename T>
T sigmoidOf(T x) {
  // Both branches keep exp's argument non-positive, so neither overflows.
  if (x >= 0) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

// y = op(x), same shape.
template <typename T, typename Op>
void unaryImpl(const KernelArgs& args, Op op) {
  const T* x = args.in[0].as<const T>();
  T* y = args.out[0].as<T>();
  const int64_t n = args.out[0].shape.elements();
  for (int64_t i = 0; i < n; ++i) y[i] = op(x[i]);
}

// dx = op(v, dy) with v the forward input or output; all the same shape.
template <typename T, typename Op>
void unaryGradImpl(const KernelArgs& args, Op op) {
  const T* v = args.in[0].as<const T>();
  const T* dy = args.in[1].as<const T>();
  T* dx = args.out[0].as<T>();
  const int64_t n = args.out[0].shape.elements();
  for (int64_t i = 0; i < n; ++i) dx[i] = op(v[i], dy[i]);
}

// max and min propagate NaN, and pick a on ties (where their gradients send dy).
template <typename T>
bool picksLhsOfMax(T a, T b) { return a >= b || std::isnan(a); }
template <typename T>
bool picksLhsOfMin(T a, T b) { return a <= b || std::isnan(a); }

// da = dy where the forward op picked a, else 0; db the rest. dy, da, db have
// the broadcast shape of a and b.
template <typename T, typename Pick>
void minMaxGradImpl(const KernelArgs& args, Pick picksLhs) {
  const Operand &a = args.in[0], &b = args.in[1], &dy = args.in[2];
  const T* pa = a.as<const T>();
  const T* pb = b.as<const T>();
  const T* g = dy.as<const T>();
  T* da = args.out[0].as<T>();
  T* db = args.out[1].as<T>();
  int64_t sa[kMaxRank], sb[kMaxRank];
  broadcastStrides(a.shape, dy.shape, sa);
  broadcastStrides(b.shape, dy.shape, sb);
  walk(dy.shape, sa, sb, [&](int64_t i, int64_t ia, int64_t ib) {
    const bool lhs = picksLhs(pa[ia], pb[ib]);
    da[i] = lhs ? g[i] : T(0);
    db[i] = lhs ? T(0) : g[i];
  });
}

// ---- launchers: check shapes and dtypes, then dispatch on the element type ----

void fill(const KernelArgs& args) {
  dispatchFloating(cpuFloatingType(args, outMask(0)), [&](auto tag) { fillImpl<decltype(tag)>(args); });
}

template <typename Op>
void binary(const KernelArgs& args, Op op) {
  const DType dtype = cpuFloatingType(args, inMask(0) | inMask(1) | outMask(0));
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    binaryImpl<T>(args, [op](T a, T b) { return static_cast<T>(op(a, b)); });
  });
}

void add(const KernelArgs& args) { binary(args, [](auto a, auto b) { return a + b; }); }
void sub(const KernelArgs& args) { binary(args, [](auto a, auto b) { return a - b; }); }
void mul(const KernelArgs& args) { binary(args, [](auto a, auto b) { return a * b; }); }
void div(const KernelArgs& args) { binary(args, [](auto a, auto b) { return a / b; }); }
void maxKernel(const KernelArgs& args) { binary(args, [](auto a, auto b) { return picksLhsOfMax(a, b) ? a : b; }); }
void minKernel(const KernelArgs& args) { binary(args, [](auto a, auto b) { return picksLhsOfMin(a, b) ? a : b; }); }

// Checks the floating operands (`operands`) and dispatches on their dtype.
template <typename F>
void dispatchOperands(const KernelArgs& args, unsigned operands, F&& body) {
  dispatchFloating(cpuFloatingType(args, operands), body);
}

void scale(const KernelArgs& args) {
  const double alpha = args.attrs.getFloat("alpha");
  dispatchOperands(args, inMask(0) | outMask(0), [&](auto tag) {
    using T = decltype(tag);
    unaryImpl<T>(args, [alpha](T x) { return static_cast<T>(alpha * x); });
  });
}

// relu and relu_grad keep a NaN (x or dy) a NaN: `x > 0 ? x : 0` alone maps
// NaN to 0, which lets NaN weights train to finite losses and hides the CPU
// backend's poisoning of dead tensors. -0 still maps to +0, as before.
void relu(const KernelArgs& args) {
  dispatchOperands(args, inMask(0) | outMask(0), [&](auto tag) {
    using T = decltype(tag);
    unaryImpl<T>(args, [](T x) { return x > 0 || x != x ? x : T(0); });
  });
}

void tanhKernel(const KernelArgs& args) {
  dispatchOperands(args, inMask(0) | outMask(0), [&](auto tag) {
    using T = decltype(tag);
    unaryImpl<T>(args, [](T x) { return std::tanh(x); });
  });
}

void sigmoid(const KernelArgs& args) {
  dispatchOperands(args, inMask(0) | outMask(0), [&](auto tag) {
    using T = decltype(tag);
    unaryImpl<T>(args, [](T x) { return sigmoidOf(x); });
  });
}

// log(1 + e^x) as max(x, 0) + log1p(e^-|x|): e^x never overflows, and a NaN stays NaN.
void softplus(const KernelArgs& args) {
  dispatchOperands(args, inMask(0) | outMask(0), [&](auto tag) {
    using T = decltype(tag);
    unaryImpl<T>(args, [](T x) { return (x > 0 ? x : T(0)) + std::log1p(std::exp(-std::fabs(x))); });
  });
}

void reluGrad(const KernelArgs& args) {
  dispatchOperands(args, inMask(0) | inMask(1) | outMask(0), [&](auto tag) {
    using T = decltype(tag);
    unaryGradImpl<T>(args, [](T x, T dy) { return x > 0 ? dy : x != x || dy != dy ? x + dy : T(0); });
  });
}

void tanhGrad(const KernelArgs& args) {
  dispatchOperands(args, inMask(0) | inMask(1) | outMask(0), [&](auto tag) {
    using T = decltype(tag);
    unaryGradImpl<T>(args, [](T y, T dy) { return dy * (T(1) - y * y); });
  });
}

void sigmoidGrad(const KernelArgs& args) {
  dispatchOperands(args, inMask(0) | inMask(1) | outMask(0), [&](auto tag) {
    using T = decltype(tag);
    unaryGradImpl<T>(args, [](T y, T dy) { return dy * y * (T(1) - y); });
  });
}

// ---- math functions of exported LLMs ----

// y = op(x) elementwise, op written once for float and double.
template <typename Op>
void math(const KernelArgs& args, Op op) {
  dispatchOperands(args, inMask(0) | outMask(0), [&](auto tag) {
    using T = decltype(tag);
    unaryImpl<T>(args, [op](T x) { return static_cast<T>(op(x)); });
  });
}

void neg(const KernelArgs& args) { math(args, [](auto x) { return -x; }); }
void sqrtKernel(const KernelArgs& args) { math(args, [](auto x) { return std::sqrt(x); }); }
void reciprocal(const KernelArgs& args) { math(args, [](auto x) { return decltype(x)(1) / x; }); }
void expKernel(const KernelArgs& args) { math(args, [](auto x) { return std::exp(x); }); }
void logKernel(const KernelArgs& args) { math(args, [](auto x) { return std::log(x); }); }
void erfKernel(const KernelArgs& args) { math(args, [](auto x) { return std::erf(x); }); }
void cosKernel(const KernelArgs& args) { math(args, [](auto x) { return std::cos(x); }); }
void sinKernel(const KernelArgs& args) { math(args, [](auto x) { return std::sin(x); }); }

void powfKernel(const KernelArgs& args) {
  const double exponent = args.attrs.getFloat("exponent");
  math(args, [exponent](auto x) { return std::pow(x, static_cast<decltype(x)>(exponent)); });
}

void erfGrad(const KernelArgs& args) {
  dispatchOperands(args, inMask(0) | inMask(1) | outMask(0), [&](auto tag) {
    using T = decltype(tag);
    unaryGradImpl<T>(args, [](T x, T dy) { return dy * (T(kTwoOverSqrtPi) * std::exp(-(x * x))); });
  });
}

// max_grad, min_grad: (a, b, dy) -> (da, db), all three floating, dy the broadcast shape.
template <bool kMax>
void minMaxGrad(const KernelArgs& args) {
  const DType dtype =
      cpuFloatingType(args, inMask(0) | inMask(1) | inMask(2) | outMask(0) | outMask(1));
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kMax) minMaxGradImpl<T>(args, [](T a, T b) { return picksLhsOfMax(a, b); });
    else minMaxGradImpl<T>(args, [](T a, T b) { return picksLhsOfMin(a, b); });
  });
}

// x (floating) -> bool, same shape: 1 where x is NaN.
void isnanKernel(const KernelArgs& args) {
  const DType dtype = cpuFloatingType(args, inMask(0));
  requireDType(args, args.out[0], DType::Bool, "output");
  uint8_t* y = args.out[0].as<uint8_t>();
  const int64_t n = args.out[0].shape.elements();
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = args.in[0].as<const T>();
    for (int64_t i = 0; i < n; ++i) y[i] = std::isnan(x[i]) ? 1 : 0;
  });
}

}  // namespace

void addElementwiseKernels(CpuKernelRegistry& registry) {
  registry.add("fill", {fill});
  registry.add("add", {add});
  registry.add("sub", {sub});
  registry.add("mul", {mul});
  registry.add("div", {div});
  registry.add("scale", {scale});
  registry.add("relu", {relu});
  registry.add("tanh", {tanhKernel});
  registry.add("sigmoid", {sigmoid});
  registry.add("softplus", {softplus});
  registry.add("relu_grad", {reluGrad});
  registry.add("tanh_grad", {tanhGrad});
  registry.add("sigmoid_grad", {sigmoidGrad});
  registry.add("max", {maxKernel});
  registry.add("min", {minKernel});
  registry.add("max_grad", {minMaxGrad<true>});
  registry.add("min_grad", {minMaxGrad<false>});
  registry.add("neg", {neg});
  registry.add("sqrt", {sqrtKernel});
  registry.add("reciprocal", {reciprocal});
  registry.add("exp", {expKernel});
  registry.add("log", {logKernel});
  registry.add("erf", {erfKernel});
  registry.add("cos", {cosKernel});
  registry.add("sin", {sinKernel});
  registry.add("powf", {powfKernel});
  registry.add("erf_grad", {erfGrad});
  registry.add("isnan", {isnanKernel});
}

}  // namespace megatrain::runtime::cpu
