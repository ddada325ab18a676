// MathConstants.h - the constants both backends' kernels compute with, so CPU and CUDA round alike.
#pragma once

namespace megatrain::kernels {

constexpr double kInvSqrt2 = 0.70710678118654752440;       // 1 / sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;     // 1 / sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;    // sqrt(2 / pi)
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;  // 2 / sqrt(pi): erf's slope at 0
constexpr double kGeluCubic = 0.044715;                    // the tanh form's cubic coefficient

}  // namespace megatrain::kernels
