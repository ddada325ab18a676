// PointwiseOps.cuh - each pointwise opcode's element expression, the one text both the interpreter (pointwise.cu) and the run-time compiled kernels (PointwiseJit.cpp) use.
//
// pointwiseOp<Op>(a, b, c, k) is instruction Op on one element in T (f32 or
// f64), with k its constant (Scale, Powf); unused operands are ignored. Each
// is the expression of the unfused CUDA kernel it stands for (elementwise.cu,
// activation.cu, cast.cu), through ElementMath.cuh, so the two paths give the
// same bits: nvcc compiles this file into pointwise.cu, NVRTC reads its text
// (embedded at build time, runtime/cuda/CMakeLists.txt) into every kernel it
// compiles, both with no multiply-add contraction. Includes only headers NVRTC
// is given.
#ifndef MEGATRAIN_RUNTIME_CUDA_POINTWISEOPS_CUH
#define MEGATRAIN_RUNTIME_CUDA_POINTWISEOPS_CUH

#include "ElementMath.cuh"
#include "megatrain/kernels/MathConstants.h"
#include "megatrain/plan/PointwiseOpcodes.h"

namespace megatrain::runtime::cuda {

template <int Op, typename T>
__device__ __forceinline__ T pointwiseOp(T x, T y, T z, double k) {
  namespace pw = ::megatrain::pointwise;
  using ::megatrain::kernels::kInvSqrt2Pi;
  using ::megatrain::kernels::kTwoOverSqrtPi;
  if constexpr (Op == pw::Add) return x + y;
  else if constexpr (Op == pw::Sub) return x - y;
  else if constexpr (Op == pw::Mul) return x * y;
  else if constexpr (Op == pw::Div) return x / y;
  else if constexpr (Op == pw::Max) return x >= y || x != x ? x : y;
  else if constexpr (Op == pw::Min) return x <= y || x != x ? x : y;
  else if constexpr (Op == pw::Neg) return -x;
  else if constexpr (Op == pw::Sqrt) return sqrt(x);
  else if constexpr (Op == pw::Reciprocal) return T(1) / x;
  else if constexpr (Op == pw::Exp) return expOf(x);
  else if constexpr (Op == pw::Log) return log(x);
  else if constexpr (Op == pw::Erf) return erf(x);
  else if constexpr (Op == pw::Cos) return cos(x);
  else if constexpr (Op == pw::Sin) return sin(x);
  else if constexpr (Op == pw::Tanh) return tanh(x);
  else if constexpr (Op == pw::Sigmoid) return sigmoidOf(x);
  else if constexpr (Op == pw::Relu) return x > T(0) || x != x ? x : T(0);
  else if constexpr (Op == pw::Softplus) return (x > T(0) ? x : T(0)) + log1pOf(expOf(x > T(0) ? -x : x));
  else if constexpr (Op == pw::Silu) return siluOf(x);
  else if constexpr (Op == pw::Scale) return static_cast<T>(k * x);
  else if constexpr (Op == pw::Powf) return pow(x, static_cast<T>(k));
  else if constexpr (Op == pw::RoundBf16) return static_cast<T>(bf16BitsToFloat(floatToBf16Bits(static_cast<float>(x))));
  else if constexpr (Op == pw::Swiglu) return siluOf(x) * y;
  else if constexpr (Op == pw::SiluGrad) return y * siluSlope(x);
  else if constexpr (Op == pw::SwigluGradGate) return z * y * siluSlope(x);
  else if constexpr (Op == pw::SwigluGradUp) return z * siluOf(x);
  else if constexpr (Op == pw::ReluGrad) return x > T(0) ? y : x != x || y != y ? T(x + y) : T(0);
  else if constexpr (Op == pw::TanhGrad) return y * (T(1) - x * x);
  else if constexpr (Op == pw::SigmoidGrad) return y * x * (T(1) - x);
  else if constexpr (Op == pw::ErfGrad) return y * (T(kTwoOverSqrtPi) * expOf(-(x * x)));
  else if constexpr (Op == pw::GeluErf) return x * geluErfCdf(x);
  else if constexpr (Op == pw::GeluTanh) return x * sigmoidOf(T(2) * geluTanhInner(x));
  else if constexpr (Op == pw::GeluErfGrad) return y * (geluErfCdf(x) + x * T(kInvSqrt2Pi) * expOf(T(-0.5) * x * x));
  else if constexpr (Op == pw::GeluTanhGrad) return y * geluTanhSlope(x);
  else return x;  // unreachable: pointwiseRule checked every opcode
}

}  // namespace megatrain::runtime::cuda

#endif  // MEGATRAIN_RUNTIME_CUDA_POINTWISEOPS_CUH
