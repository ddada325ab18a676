// adamw.cpp - the host AdamW update, element by element in double.
//
//   param = param - lr * weight_decay * param
//   m     = beta1 * m + (1 - beta1) * grad
//   v     = beta2 * v + (1 - beta2) * grad^2
//   param = param - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
#include <cmath>

#include "megatrain/runtime/AdamW.h"
#include "megatrain/runtime/DType.h"
#include "megatrain/runtime/Error.h"

namespace megatrain::runtime {
namespace {

template <typename T>
void adamwImpl(T* param, const T* grad, T* m, T* v, size_t count, const plan::AdamW& h,
               int64_t t) {
  const double lr = h.lr(), beta1 = h.beta1(), beta2 = h.beta2(), eps = h.eps();
  const double weightDecay = h.weight_decay();
  const double correction1 = 1.0 - std::pow(beta1, static_cast<double>(t));
  const double correction2 = 1.0 - std::pow(beta2, static_cast<double>(t));
  for (size_t i = 0; i < count; ++i) {
    const double g = grad[i];
    m[i] = static_cast<T>(beta1 * static_cast<double>(m[i]) + (1.0 - beta1) * g);
    v[i] = static_cast<T>(beta2 * static_cast<double>(v[i]) + (1.0 - beta2) * g * g);
    const double mHat = static_cast<double>(m[i]) / correction1;
    const double vHat = static_cast<double>(v[i]) / correction2;
    double p = static_cast<double>(param[i]);
    p = p - lr * weightDecay * p;
    param[i] = static_cast<T>(p - lr * mHat / (std::sqrt(vHat) + eps));
  }
}

}  // namespace

void adamwUpdate(plan::DType dtype, void* param, const void* grad, void* m, void* v,
                 size_t count, const plan::AdamW& hyper, int64_t t) {
  if (t < 1) throw Error("adamw: step count t must be >= 1, got " + std::to_string(t));
  if (dtype == plan::F32)
    adamwImpl(static_cast<float*>(param), static_cast<const float*>(grad), static_cast<float*>(m),
              static_cast<float*>(v), count, hyper, t);
  else if (dtype == plan::F64)
    adamwImpl(static_cast<double*>(param), static_cast<const double*>(grad),
              static_cast<double*>(m), static_cast<double*>(v), count, hyper, t);
  else
    throw Error(std::string("adamw: dtype ") + dtypeName(dtype) + " is not supported (f32 or f64)");
}

}  // namespace megatrain::runtime
