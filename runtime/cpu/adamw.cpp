// adamw.cpp - the host AdamW update, element by element in double.
//
//   param = param - lr * weight_decay * param
//   m     = beta1 * m + (1 - beta1) * grad
//   v     = beta2 * v + (1 - beta2) * grad^2
//   param = param - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
//
// Three paths compute it: a scalar loop, AVX2 (4 double lanes) and AVX-512F
// (8 double lanes), picked at run time by what the CPU supports. The vector
// paths do the scalar loop's operations in the same order on each lane (f32
// widened to double and rounded back; add, sub, mul, div and sqrt are
// correctly rounded in both, and the runtime is built with -ffp-contract=off),
// so every path gives bitwise the scalar result. Large tensors are split into
// contiguous chunks over the host thread pool (HostThreads.h).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "cpu/AdamWPaths.h"
#include "megatrain/runtime/AdamW.h"
#include "megatrain/runtime/DType.h"
#include "megatrain/runtime/Error.h"
#include "megatrain/runtime/HostThreads.h"

namespace megatrain::runtime {
namespace {

// Every constant the loops use, computed once per call exactly as the
// per-element expressions would compute it.
struct Coefficients {
  double lr, beta1, beta2, eps;
  double oneMinusBeta1, oneMinusBeta2;  // 1.0 - beta1, 1.0 - beta2
  double lrWeightDecay;                 // lr * weight_decay
  double correction1, correction2;      // 1 - beta^t
};

Coefficients coefficients(const plan::AdamW& h, int64_t t) {
  Coefficients c;
  c.lr = h.lr();
  c.beta1 = h.beta1();
  c.beta2 = h.beta2();
  c.eps = h.eps();
  c.oneMinusBeta1 = 1.0 - c.beta1;
  c.oneMinusBeta2 = 1.0 - c.beta2;
  c.lrWeightDecay = c.lr * h.weight_decay();
  c.correction1 = 1.0 - std::pow(c.beta1, static_cast<double>(t));
  c.correction2 = 1.0 - std::pow(c.beta2, static_cast<double>(t));
  return c;
}

// The reference: each element in double, m and v stored in T before the
// parameter update reads them back.
template <typename T>
void adamwScalar(T* param, const T* grad, T* m, T* v, size_t count, const Coefficients& c) {
  for (size_t i = 0; i < count; ++i) {
    const double g = grad[i];
    m[i] = static_cast<T>(c.beta1 * static_cast<double>(m[i]) + c.oneMinusBeta1 * g);
    v[i] = static_cast<T>(c.beta2 * static_cast<double>(v[i]) + c.oneMinusBeta2 * g * g);
    const double mHat = static_cast<double>(m[i]) / c.correction1;
    const double vHat = static_cast<double>(v[i]) / c.correction2;
    double p = static_cast<double>(param[i]);
    p = p - c.lrWeightDecay * p;
    param[i] = static_cast<T>(p - c.lr * mHat / (std::sqrt(vHat) + c.eps));
  }
}

// ---- AVX2: 4 elements per iteration, in double lanes ----

template <typename T>
__attribute__((target("avx2"))) inline __m256d loadAvx2(const T* from) {
  if constexpr (std::is_same_v<T, float>)
    return _mm256_cvtps_pd(_mm_loadu_ps(from));
  else
    return _mm256_loadu_pd(from);
}

// Stores x rounded to T and returns the stored value widened back to double.
template <typename T>
__attribute__((target("avx2"))) inline __m256d storeAvx2(T* to, __m256d x) {
  if constexpr (std::is_same_v<T, float>) {
    const __m128 rounded = _mm256_cvtpd_ps(x);
    _mm_storeu_ps(to, rounded);
    return _mm256_cvtps_pd(rounded);
  } else {
    _mm256_storeu_pd(to, x);
    return x;
  }
}

template <typename T>
__attribute__((target("avx2"))) void adamwAvx2(T* param, const T* grad, T* m, T* v, size_t count,
                                               const Coefficients& c) {
  const __m256d beta1 = _mm256_set1_pd(c.beta1), beta2 = _mm256_set1_pd(c.beta2);
  const __m256d oneMinusBeta1 = _mm256_set1_pd(c.oneMinusBeta1);
  const __m256d oneMinusBeta2 = _mm256_set1_pd(c.oneMinusBeta2);
  const __m256d correction1 = _mm256_set1_pd(c.correction1);
  const __m256d correction2 = _mm256_set1_pd(c.correction2);
  const __m256d lrWeightDecay = _mm256_set1_pd(c.lrWeightDecay);
  const __m256d lr = _mm256_set1_pd(c.lr), eps = _mm256_set1_pd(c.eps);
  const size_t vectorEnd = count - count % 4;
  for (size_t i = 0; i < vectorEnd; i += 4) {
    const __m256d g = loadAvx2(grad + i);
    const __m256d mNew = _mm256_add_pd(_mm256_mul_pd(beta1, loadAvx2(m + i)), _mm256_mul_pd(oneMinusBeta1, g));
    const __m256d vNew =
        _mm256_add_pd(_mm256_mul_pd(beta2, loadAvx2(v + i)), _mm256_mul_pd(_mm256_mul_pd(oneMinusBeta2, g), g));
    const __m256d mHat = _mm256_div_pd(storeAvx2(m + i, mNew), correction1);
    const __m256d vHat = _mm256_div_pd(storeAvx2(v + i, vNew), correction2);
    __m256d p = loadAvx2(param + i);
    p = _mm256_sub_pd(p, _mm256_mul_pd(lrWeightDecay, p));
    const __m256d step = _mm256_div_pd(_mm256_mul_pd(lr, mHat), _mm256_add_pd(_mm256_sqrt_pd(vHat), eps));
    storeAvx2(param + i, _mm256_sub_pd(p, step));
  }
  adamwScalar(param + vectorEnd, grad + vectorEnd, m + vectorEnd, v + vectorEnd, count - vectorEnd, c);
}

// ---- AVX-512F: 8 elements per iteration, in double lanes ----

// GCC 12's conversion intrinsics start from _mm512_undefined_*(), which it
// then reports as maybe uninitialized; the values are fully written.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

template <typename T>
__attribute__((target("avx512f"))) inline __m512d loadAvx512(const T* from) {
  if constexpr (std::is_same_v<T, float>)
    return _mm512_cvtps_pd(_mm256_loadu_ps(from));
  else
    return _mm512_loadu_pd(from);
}

template <typename T>
__attribute__((target("avx512f"))) inline __m512d storeAvx512(T* to, __m512d x) {
  if constexpr (std::is_same_v<T, float>) {
    const __m256 rounded = _mm512_cvtpd_ps(x);
    _mm256_storeu_ps(to, rounded);
    return _mm512_cvtps_pd(rounded);
  } else {
    _mm512_storeu_pd(to, x);
    return x;
  }
}

template <typename T>
__attribute__((target("avx512f"))) void adamwAvx512(T* param, const T* grad, T* m, T* v, size_t count,
                                                    const Coefficients& c) {
  const __m512d beta1 = _mm512_set1_pd(c.beta1), beta2 = _mm512_set1_pd(c.beta2);
  const __m512d oneMinusBeta1 = _mm512_set1_pd(c.oneMinusBeta1);
  const __m512d oneMinusBeta2 = _mm512_set1_pd(c.oneMinusBeta2);
  const __m512d correction1 = _mm512_set1_pd(c.correction1);
  const __m512d correction2 = _mm512_set1_pd(c.correction2);
  const __m512d lrWeightDecay = _mm512_set1_pd(c.lrWeightDecay);
  const __m512d lr = _mm512_set1_pd(c.lr), eps = _mm512_set1_pd(c.eps);
  const size_t vectorEnd = count - count % 8;
  for (size_t i = 0; i < vectorEnd; i += 8) {
    const __m512d g = loadAvx512(grad + i);
    const __m512d mNew = _mm512_add_pd(_mm512_mul_pd(beta1, loadAvx512(m + i)), _mm512_mul_pd(oneMinusBeta1, g));
    const __m512d vNew =
        _mm512_add_pd(_mm512_mul_pd(beta2, loadAvx512(v + i)), _mm512_mul_pd(_mm512_mul_pd(oneMinusBeta2, g), g));
    const __m512d mHat = _mm512_div_pd(storeAvx512(m + i, mNew), correction1);
    const __m512d vHat = _mm512_div_pd(storeAvx512(v + i, vNew), correction2);
    __m512d p = loadAvx512(param + i);
    p = _mm512_sub_pd(p, _mm512_mul_pd(lrWeightDecay, p));
    const __m512d step = _mm512_div_pd(_mm512_mul_pd(lr, mHat), _mm512_add_pd(_mm512_sqrt_pd(vHat), eps));
    storeAvx512(param + i, _mm512_sub_pd(p, step));
  }
  adamwScalar(param + vectorEnd, grad + vectorEnd, m + vectorEnd, v + vectorEnd, count - vectorEnd, c);
}

#pragma GCC diagnostic pop

template <typename T>
void adamwRange(AdamWIsa isa, T* param, const T* grad, T* m, T* v, size_t count, const Coefficients& c) {
  switch (isa) {
    case AdamWIsa::kAvx512: return adamwAvx512(param, grad, m, v, count, c);
    case AdamWIsa::kAvx2: return adamwAvx2(param, grad, m, v, count, c);
    case AdamWIsa::kScalar: return adamwScalar(param, grad, m, v, count, c);
  }
}

// Splits [0, count) into `chunks` contiguous pieces on 16-element boundaries
// and runs each as a host-pool task.
template <typename T>
void adamwChunked(AdamWIsa isa, unsigned chunks, T* param, const T* grad, T* m, T* v, size_t count,
                  const Coefficients& c, uint16_t* bf16Copy) {
  constexpr size_t kAlign = 16;
  const size_t blocks = (count + kAlign - 1) / kAlign;
  hostParallelFor(chunks, [&](unsigned chunk) {
    const size_t begin = std::min(count, blocks * chunk / chunks * kAlign);
    const size_t end = std::min(count, blocks * (chunk + 1) / chunks * kAlign);
    if (begin >= end) return;
    adamwRange(isa, param + begin, grad + begin, m + begin, v + begin, end - begin, c);
    if constexpr (std::is_same_v<T, float>)
      if (bf16Copy)
        for (size_t i = begin; i < end; ++i) bf16Copy[i] = floatToBf16(param[i]);
  });
}

}  // namespace

const char* adamwIsaName(AdamWIsa isa) {
  switch (isa) {
    case AdamWIsa::kScalar: return "scalar";
    case AdamWIsa::kAvx2: return "avx2";
    case AdamWIsa::kAvx512: return "avx512";
  }
  return "unknown";
}

bool adamwIsaSupported(AdamWIsa isa) {
  switch (isa) {
    case AdamWIsa::kScalar: return true;
    case AdamWIsa::kAvx2: return __builtin_cpu_supports("avx2");
    case AdamWIsa::kAvx512: return __builtin_cpu_supports("avx512f");
  }
  return false;
}

AdamWIsa adamwBestIsa() {
  static const AdamWIsa best = adamwIsaSupported(AdamWIsa::kAvx512) ? AdamWIsa::kAvx512
                               : adamwIsaSupported(AdamWIsa::kAvx2) ? AdamWIsa::kAvx2
                                                                    : AdamWIsa::kScalar;
  return best;
}

unsigned adamwDefaultChunks(size_t count) {
  if (count < kAdamWParallelMin) return 1;
  const size_t bySize = count / (kAdamWParallelMin / 2);
  return static_cast<unsigned>(std::min<size_t>(hostThreadCount(), bySize));
}

void adamwUpdateWith(AdamWIsa isa, unsigned chunks, plan::DType dtype, void* param, const void* grad, void* m,
                     void* v, size_t count, const plan::AdamW& hyper, int64_t t, uint16_t* bf16Copy) {
  if (t < 1) throw Error("adamw: step count t must be >= 1, got " + std::to_string(t));
  if (!adamwIsaSupported(isa)) throw Error(std::string("adamw: this CPU has no ") + adamwIsaName(isa));
  if (chunks == 0) throw Error("adamw: chunk count must be >= 1");
  const Coefficients c = coefficients(hyper, t);
  if (bf16Copy && dtype != plan::F32)
    throw Error(std::string("adamw: a bf16 compute copy needs f32 masters, got ") + dtypeName(dtype));
  if (dtype == plan::F32)
    adamwChunked(isa, chunks, static_cast<float*>(param), static_cast<const float*>(grad), static_cast<float*>(m),
                 static_cast<float*>(v), count, c, bf16Copy);
  else if (dtype == plan::F64)
    adamwChunked(isa, chunks, static_cast<double*>(param), static_cast<const double*>(grad),
                 static_cast<double*>(m), static_cast<double*>(v), count, c, nullptr);
  else
    throw Error(std::string("adamw: dtype ") + dtypeName(dtype) + " is not supported (f32 or f64)");
}

void adamwUpdate(plan::DType dtype, void* param, const void* grad, void* m, void* v, size_t count,
                 const plan::AdamW& hyper, int64_t t, uint16_t* bf16Copy) {
  adamwUpdateWith(adamwBestIsa(), adamwDefaultChunks(count), dtype, param, grad, m, v, count, hyper, t,
                  bf16Copy);
}

}  // namespace megatrain::runtime
