// activation.cpp - the fused activations SiLU, SwiGLU and GELU (erf and tanh forms) and their gradients.
//
// Elementwise over operands of one shape, in T arithmetic; the CUDA twin
// (runtime/cuda/activation.cu) evaluates the same expressions in the same order.
#include <cmath>
#include <string>

#include "ActivationMath.h"
#include "CpuKernel.h"
#include "megatrain/kernels/MathConstants.h"

namespace megatrain::runtime::cpu {
namespace {

unsigned allOperands(const KernelArgs& args) {
  unsigned mask = 0;
  for (int i = 0; i < args.numIn; ++i) mask |= inMask(i);
  for (int i = 0; i < args.numOut; ++i) mask |= outMask(i);
  return mask;
}

// f(i) for every element index i; operands share one shape.
template <typename F>
void forEach(const KernelArgs& args, F&& f) {
  const int64_t n = args.in[0].shape.elements();
  for (int64_t i = 0; i < n; ++i) f(i);
}

void silu(const KernelArgs& args) {
  const DType dtype = cpuFloatingType(args, allOperands(args));
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = args.in[0].as<const T>();
    T* y = args.out[0].as<T>();
    forEach(args, [&](int64_t i) { y[i] = siluOf(x[i]); });
  });
}

void siluGrad(const KernelArgs& args) {
  const DType dtype = cpuFloatingType(args, allOperands(args));
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = args.in[0].as<const T>();
    const T* dy = args.in[1].as<const T>();
    T* dx = args.out[0].as<T>();
    forEach(args, [&](int64_t i) { dx[i] = dy[i] * siluSlope(x[i]); });
  });
}

void swiglu(const KernelArgs& args) {
  const DType dtype = cpuFloatingType(args, allOperands(args));
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* gate = args.in[0].as<const T>();
    const T* up = args.in[1].as<const T>();
    T* y = args.out[0].as<T>();
    forEach(args, [&](int64_t i) { y[i] = siluOf(gate[i]) * up[i]; });
  });
}

// dgate = dy * up * silu'(gate), dup = dy * silu(gate).
void swigluGrad(const KernelArgs& args) {
  const DType dtype = cpuFloatingType(args, allOperands(args));
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* gate = args.in[0].as<const T>();
    const T* up = args.in[1].as<const T>();
    const T* dy = args.in[2].as<const T>();
    T* dgate = args.out[0].as<T>();
    T* dup = args.out[1].as<T>();
    forEach(args, [&](int64_t i) {
      const T g = gate[i], u = up[i], d = dy[i];
      dgate[i] = d * u * siluSlope(g);
      dup[i] = d * siluOf(g);
    });
  });
}

void gelu(const KernelArgs& args) {
  const DType dtype = cpuFloatingType(args, allOperands(args));
  const bool tanh = geluTanhForm(args);
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = args.in[0].as<const T>();
    T* y = args.out[0].as<T>();
    if (tanh) forEach(args, [&](int64_t i) { y[i] = geluTanh(x[i]); });
    else forEach(args, [&](int64_t i) { y[i] = geluErf(x[i]); });
  });
}

void geluGrad(const KernelArgs& args) {
  const DType dtype = cpuFloatingType(args, allOperands(args));
  const bool tanh = geluTanhForm(args);
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = args.in[0].as<const T>();
    const T* dy = args.in[1].as<const T>();
    T* dx = args.out[0].as<T>();
    if (tanh) forEach(args, [&](int64_t i) { dx[i] = dy[i] * geluTanhSlope(x[i]); });
    else forEach(args, [&](int64_t i) { dx[i] = dy[i] * geluErfSlope(x[i]); });
  });
}

}  // namespace

void addActivationKernels(CpuKernelRegistry& registry) {
  registry.add("silu", {silu});
  registry.add("silu_grad", {siluGrad});
  registry.add("swiglu", {swiglu});
  registry.add("swiglu_grad", {swigluGrad});
  registry.add("gelu", {gelu});
  registry.add("gelu_grad", {geluGrad});
}

}  // namespace megatrain::runtime::cpu
