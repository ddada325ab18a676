// ActivationMath.h - the activations' element functions on the CPU, shared by the fused
// activation kernels (activation.cpp) and the pointwise programs that stand for them
// (pointwise.cpp), so both compute the same expressions in the same order. The CUDA twins are
// in runtime/cuda/ElementMath.cuh.
#pragma once

#include <cmath>

#include "megatrain/kernels/MathConstants.h"

namespace megatrain::runtime::cpu {

template <typename T>
T sigmoidOf(T x) {
  // Both branches keep exp's argument non-positive, so neither overflows.
  if (x >= 0) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

template <typename T>
T siluOf(T x) { return x * sigmoidOf(x); }

// d silu / dx = s (1 + x (1 - s)).
template <typename T>
T siluSlope(T x) {
  const T s = sigmoidOf(x);
  return s * (T(1) + x * (T(1) - s));
}

// 1 + erf(z) and 1 + tanh(u) cancel for very negative arguments, where the
// last-ulp differences between math libraries become large relative errors;
// the forms below have no cancellation: 1 + erf(z) = erfc(-z) and
// 0.5 (1 + tanh(u)) = sigmoid(2u).
template <typename T>
T geluErfCdf(T x) { return T(0.5) * std::erfc(-x * T(::megatrain::kernels::kInvSqrt2)); }

template <typename T>
T geluErf(T x) { return x * geluErfCdf(x); }

// Phi(x) + x phi(x).
template <typename T>
T geluErfSlope(T x) { return geluErfCdf(x) + x * T(::megatrain::kernels::kInvSqrt2Pi) * std::exp(T(-0.5) * x * x); }

template <typename T>
T geluTanhInner(T x) { return T(::megatrain::kernels::kSqrt2OverPi) * (x + T(::megatrain::kernels::kGeluCubic) * x * x * x); }

template <typename T>
T geluTanh(T x) { return x * sigmoidOf(T(2) * geluTanhInner(x)); }

// With s = sigmoid(2u) = 0.5 (1 + tanh u): s + x * 2 s (1 - s) du/dx, since
// 0.5 (1 - tanh^2 u) = 2 s (1 - s); du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
template <typename T>
T geluTanhSlope(T x) {
  const T s = sigmoidOf(T(2) * geluTanhInner(x));
  const T dInner = T(::megatrain::kernels::kSqrt2OverPi) * (T(1) + T(3 * ::megatrain::kernels::kGeluCubic) * x * x);
  return s + x * T(2) * s * (T(1) - s) * dInner;
}

}  // namespace megatrain::runtime::cpu
