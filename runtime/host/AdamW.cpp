// AdamW.cpp - the host AdamW update: f32 tensors in f32 lanes, f64 tensors in double.
//
// torch.optim.AdamW (decoupled weight decay, bias correction), per element:
//
//   m     = beta1 * m + (1 - beta1) * grad
//   v     = beta2 * v + (1 - beta2) * grad^2
//   param = param * (1 - lr * weight_decay)
//           - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
//
// f32 tensors are computed in f32, as torch's fused CPU AdamW computes f32
// parameters: the per-call constants (1 - lr * wd, lr / (1 - beta1^t),
// 1 / sqrt(1 - beta2^t), ...) are computed once in double and rounded to f32,
// so each element costs one square root and one division. f64 tensors keep the
// double loop of the first version (three divisions and a square root).
//
// Three paths compute each: a scalar loop, AVX2 and AVX-512F, picked at run
// time by what the CPU supports. The vector paths do the scalar loop's
// operations in the same order on each lane (add, sub, mul, div and sqrt are
// correctly rounded in both, and the runtime is built with -ffp-contract=off),
// so every path gives bitwise the scalar result. The optional bf16 compute copy
// of an f32 parameter is written in the same pass, rounded to nearest even with
// integer operations that match floatToBf16 (DType.h) bit for bit, NaN
// included, with non-temporal stores (the copy is only written, never read
// here). Large tensors are split into contiguous chunks over the host thread
// pool (HostThreads.h).
//
// The update streams seven arrays (four read, three written) and is bound by
// host memory bandwidth, not arithmetic. The vector paths prefetch the four
// input streams kAdamWPrefetchBytes ahead: the hardware prefetcher stops at
// each 4 KiB page and restarts on the next, and software prefetch keeps every
// stream's next lines in flight across those boundaries (measured on the H200
// host: bench/RESULTS.md).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "host/AdamWPaths.h"
#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/AdamW.h"
#include "megatrain/runtime/HostThreads.h"

namespace megatrain::runtime {
namespace {

// ---- f64: every constant the loops use, computed once per call exactly as
// the per-element expressions would compute it ----
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

// ---- f32: the per-call constants, computed in double and rounded once ----
struct CoefficientsF32 {
  float beta1, oneMinusBeta1;  // beta1, 1 - beta1
  float beta2, oneMinusBeta2;  // beta2, 1 - beta2
  float decay;                 // 1 - lr * weight_decay
  float stepSize;              // lr / (1 - beta1^t)
  float invSqrtCorrection2;    // 1 / sqrt(1 - beta2^t)
  float eps;
};

CoefficientsF32 coefficientsF32(const Coefficients& c, double weightDecay) {
  CoefficientsF32 f;
  f.beta1 = static_cast<float>(c.beta1);
  f.oneMinusBeta1 = static_cast<float>(c.oneMinusBeta1);
  f.beta2 = static_cast<float>(c.beta2);
  f.oneMinusBeta2 = static_cast<float>(c.oneMinusBeta2);
  f.decay = static_cast<float>(1.0 - c.lr * weightDecay);
  f.stepSize = static_cast<float>(c.lr / c.correction1);
  f.invSqrtCorrection2 = static_cast<float>(1.0 / std::sqrt(c.correction2));
  f.eps = static_cast<float>(c.eps);
  return f;
}

// The f64 reference: each element in double.
void adamwScalar(double* param, const double* grad, double* m, double* v, size_t count, const Coefficients& c) {
  for (size_t i = 0; i < count; ++i) {
    const double g = grad[i];
    m[i] = c.beta1 * m[i] + c.oneMinusBeta1 * g;
    v[i] = c.beta2 * v[i] + c.oneMinusBeta2 * g * g;
    const double mHat = m[i] / c.correction1;
    const double vHat = v[i] / c.correction2;
    double p = param[i];
    p = p - c.lrWeightDecay * p;
    param[i] = p - c.lr * mHat / (std::sqrt(vHat) + c.eps);
  }
}

// The f32 reference: each element in f32, in this order of operations. The
// vector paths follow it lane by lane.
void adamwScalarF32(float* param, const float* grad, float* m, float* v, size_t count, const CoefficientsF32& c,
                    uint16_t* copy) {
  for (size_t i = 0; i < count; ++i) {
    const float g = grad[i];
    const float mNew = c.beta1 * m[i] + c.oneMinusBeta1 * g;
    const float vNew = c.beta2 * v[i] + (c.oneMinusBeta2 * g) * g;
    m[i] = mNew;
    v[i] = vNew;
    const float denominator = std::sqrt(vNew) * c.invSqrtCorrection2 + c.eps;
    const float p = param[i] * c.decay - (c.stepSize * mNew) / denominator;
    param[i] = p;
    if (copy) copy[i] = floatToBf16(p);
  }
}

// How many leading elements to run through the scalar loop so that copy + that
// is `bytes`-aligned (for non-temporal stores); 0 when it never can be (an odd
// address) or there is no copy.
size_t copyPeel(const uint16_t* copy, size_t count, size_t bytes) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(copy);
  if (copy == nullptr || address % 2 != 0) return 0;
  return std::min(count, (bytes - address % bytes) % bytes / 2);
}

// Prefetches the line kAdamWPrefetchBytes past element i of each input
// stream (a prefetch never faults, so past the end is harmless).
template <typename T>
inline void prefetchAhead(const T* param, const T* grad, const T* m, const T* v, size_t i) {
  constexpr size_t kAhead = kAdamWPrefetchBytes / sizeof(T);
  _mm_prefetch(reinterpret_cast<const char*>(grad + i + kAhead), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(m + i + kAhead), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(v + i + kAhead), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(param + i + kAhead), _MM_HINT_T0);
}

// ---- AVX2: 8 f32 lanes, or 4 double lanes ----

// floatToBf16 on 8 lanes: the rounded upper halves, packed to 8 uint16.
__attribute__((target("avx2"))) inline __m128i bf16Avx2(__m256 x) {
  const __m256i word = _mm256_castps_si256(x);
  const __m256i upper = _mm256_srli_epi32(word, 16);
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(word, _mm256_set1_epi32(0x7FFF)),
                                         _mm256_and_si256(upper, _mm256_set1_epi32(1))),
                        16);
  // A NaN: exponent all ones and a nonzero mantissa, i.e. |word| > 0x7F800000
  // (a signed compare is right: |word| < 2^31).
  const __m256i magnitude = _mm256_and_si256(word, _mm256_set1_epi32(0x7FFFFFFF));
  const __m256i isNan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7F800000));
  const __m256i quiet = _mm256_or_si256(upper, _mm256_set1_epi32(0x0040));
  const __m256i bits = _mm256_blendv_epi8(rounded, quiet, isNan);
  // Every lane is below 0x10000, so the unsigned saturation never applies.
  return _mm_packus_epi32(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1));
}

template <bool kCopy>
__attribute__((target("avx2"))) void adamwAvx2F32(float* param, const float* grad, float* m, float* v, size_t count,
                                                  const CoefficientsF32& c, uint16_t* copy) {
  const size_t peel = kCopy ? copyPeel(copy, count, 16) : 0;
  adamwScalarF32(param, grad, m, v, peel, c, kCopy ? copy : nullptr);
  const bool stream = kCopy && reinterpret_cast<uintptr_t>(copy + peel) % 16 == 0;
  const __m256 beta1 = _mm256_set1_ps(c.beta1), oneMinusBeta1 = _mm256_set1_ps(c.oneMinusBeta1);
  const __m256 beta2 = _mm256_set1_ps(c.beta2), oneMinusBeta2 = _mm256_set1_ps(c.oneMinusBeta2);
  const __m256 decay = _mm256_set1_ps(c.decay), stepSize = _mm256_set1_ps(c.stepSize);
  const __m256 invSqrtCorrection2 = _mm256_set1_ps(c.invSqrtCorrection2), eps = _mm256_set1_ps(c.eps);
  const size_t vectorEnd = peel + (count - peel) / 8 * 8;
  for (size_t i = peel; i < vectorEnd; i += 8) {
    if (i % 16 == peel % 16) prefetchAhead(param, grad, m, v, i);  // once per 64-byte line
    const __m256 g = _mm256_loadu_ps(grad + i);
    const __m256 mNew = _mm256_add_ps(_mm256_mul_ps(beta1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(oneMinusBeta1, g));
    const __m256 vNew =
        _mm256_add_ps(_mm256_mul_ps(beta2, _mm256_loadu_ps(v + i)), _mm256_mul_ps(_mm256_mul_ps(oneMinusBeta2, g), g));
    _mm256_storeu_ps(m + i, mNew);
    _mm256_storeu_ps(v + i, vNew);
    const __m256 denominator = _mm256_add_ps(_mm256_mul_ps(_mm256_sqrt_ps(vNew), invSqrtCorrection2), eps);
    const __m256 p = _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(param + i), decay),
                                   _mm256_div_ps(_mm256_mul_ps(stepSize, mNew), denominator));
    _mm256_storeu_ps(param + i, p);
    if constexpr (kCopy) {
      const __m128i bits = bf16Avx2(p);
      if (stream)
        _mm_stream_si128(reinterpret_cast<__m128i*>(copy + i), bits);
      else
        _mm_storeu_si128(reinterpret_cast<__m128i*>(copy + i), bits);
    }
  }
  if (stream) _mm_sfence();  // the streamed copy is visible before the task counts as done
  adamwScalarF32(param + vectorEnd, grad + vectorEnd, m + vectorEnd, v + vectorEnd, count - vectorEnd, c,
                 kCopy ? copy + vectorEnd : nullptr);
}

__attribute__((target("avx2"))) void adamwAvx2F64(double* param, const double* grad, double* m, double* v,
                                                  size_t count, const Coefficients& c) {
  const __m256d beta1 = _mm256_set1_pd(c.beta1), beta2 = _mm256_set1_pd(c.beta2);
  const __m256d oneMinusBeta1 = _mm256_set1_pd(c.oneMinusBeta1);
  const __m256d oneMinusBeta2 = _mm256_set1_pd(c.oneMinusBeta2);
  const __m256d correction1 = _mm256_set1_pd(c.correction1);
  const __m256d correction2 = _mm256_set1_pd(c.correction2);
  const __m256d lrWeightDecay = _mm256_set1_pd(c.lrWeightDecay);
  const __m256d lr = _mm256_set1_pd(c.lr), eps = _mm256_set1_pd(c.eps);
  const size_t vectorEnd = count - count % 4;
  for (size_t i = 0; i < vectorEnd; i += 4) {
    if (i % 8 == 0) prefetchAhead(param, grad, m, v, i);
    const __m256d g = _mm256_loadu_pd(grad + i);
    const __m256d mNew =
        _mm256_add_pd(_mm256_mul_pd(beta1, _mm256_loadu_pd(m + i)), _mm256_mul_pd(oneMinusBeta1, g));
    const __m256d vNew = _mm256_add_pd(_mm256_mul_pd(beta2, _mm256_loadu_pd(v + i)),
                                       _mm256_mul_pd(_mm256_mul_pd(oneMinusBeta2, g), g));
    _mm256_storeu_pd(m + i, mNew);
    _mm256_storeu_pd(v + i, vNew);
    const __m256d mHat = _mm256_div_pd(mNew, correction1);
    const __m256d vHat = _mm256_div_pd(vNew, correction2);
    __m256d p = _mm256_loadu_pd(param + i);
    p = _mm256_sub_pd(p, _mm256_mul_pd(lrWeightDecay, p));
    const __m256d step = _mm256_div_pd(_mm256_mul_pd(lr, mHat), _mm256_add_pd(_mm256_sqrt_pd(vHat), eps));
    _mm256_storeu_pd(param + i, _mm256_sub_pd(p, step));
  }
  adamwScalar(param + vectorEnd, grad + vectorEnd, m + vectorEnd, v + vectorEnd, count - vectorEnd, c);
}

// ---- AVX-512F: 16 f32 lanes, or 8 double lanes ----

// GCC 12's conversion intrinsics start from _mm512_undefined_*(), which it
// then reports as maybe uninitialized; the values are fully written.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// floatToBf16 on 16 lanes, packed to 16 uint16 (vpmovdw truncates; every lane
// is below 0x10000).
__attribute__((target("avx512f"))) inline __m256i bf16Avx512(__m512 x) {
  const __m512i word = _mm512_castps_si512(x);
  const __m512i upper = _mm512_srli_epi32(word, 16);
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(word, _mm512_set1_epi32(0x7FFF)),
                                         _mm512_and_si512(upper, _mm512_set1_epi32(1))),
                        16);
  const __m512i magnitude = _mm512_and_si512(word, _mm512_set1_epi32(0x7FFFFFFF));
  const __mmask16 isNan = _mm512_cmpgt_epu32_mask(magnitude, _mm512_set1_epi32(0x7F800000));
  const __m512i bits = _mm512_mask_or_epi32(rounded, isNan, upper, _mm512_set1_epi32(0x0040));
  return _mm512_cvtepi32_epi16(bits);
}

template <bool kCopy>
__attribute__((target("avx512f"))) void adamwAvx512F32(float* param, const float* grad, float* m, float* v,
                                                       size_t count, const CoefficientsF32& c, uint16_t* copy) {
  const size_t peel = kCopy ? copyPeel(copy, count, 32) : 0;
  adamwScalarF32(param, grad, m, v, peel, c, kCopy ? copy : nullptr);
  const bool stream = kCopy && reinterpret_cast<uintptr_t>(copy + peel) % 32 == 0;
  const __m512 beta1 = _mm512_set1_ps(c.beta1), oneMinusBeta1 = _mm512_set1_ps(c.oneMinusBeta1);
  const __m512 beta2 = _mm512_set1_ps(c.beta2), oneMinusBeta2 = _mm512_set1_ps(c.oneMinusBeta2);
  const __m512 decay = _mm512_set1_ps(c.decay), stepSize = _mm512_set1_ps(c.stepSize);
  const __m512 invSqrtCorrection2 = _mm512_set1_ps(c.invSqrtCorrection2), eps = _mm512_set1_ps(c.eps);
  const size_t vectorEnd = peel + (count - peel) / 16 * 16;
  for (size_t i = peel; i < vectorEnd; i += 16) {
    prefetchAhead(param, grad, m, v, i);
    const __m512 g = _mm512_loadu_ps(grad + i);
    const __m512 mNew = _mm512_add_ps(_mm512_mul_ps(beta1, _mm512_loadu_ps(m + i)), _mm512_mul_ps(oneMinusBeta1, g));
    const __m512 vNew =
        _mm512_add_ps(_mm512_mul_ps(beta2, _mm512_loadu_ps(v + i)), _mm512_mul_ps(_mm512_mul_ps(oneMinusBeta2, g), g));
    _mm512_storeu_ps(m + i, mNew);
    _mm512_storeu_ps(v + i, vNew);
    const __m512 denominator = _mm512_add_ps(_mm512_mul_ps(_mm512_sqrt_ps(vNew), invSqrtCorrection2), eps);
    const __m512 p = _mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(param + i), decay),
                                   _mm512_div_ps(_mm512_mul_ps(stepSize, mNew), denominator));
    _mm512_storeu_ps(param + i, p);
    if constexpr (kCopy) {
      const __m256i bits = bf16Avx512(p);
      if (stream)
        _mm256_stream_si256(reinterpret_cast<__m256i*>(copy + i), bits);
      else
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(copy + i), bits);
    }
  }
  if (stream) _mm_sfence();
  adamwScalarF32(param + vectorEnd, grad + vectorEnd, m + vectorEnd, v + vectorEnd, count - vectorEnd, c,
                 kCopy ? copy + vectorEnd : nullptr);
}

__attribute__((target("avx512f"))) void adamwAvx512F64(double* param, const double* grad, double* m, double* v,
                                                       size_t count, const Coefficients& c) {
  const __m512d beta1 = _mm512_set1_pd(c.beta1), beta2 = _mm512_set1_pd(c.beta2);
  const __m512d oneMinusBeta1 = _mm512_set1_pd(c.oneMinusBeta1);
  const __m512d oneMinusBeta2 = _mm512_set1_pd(c.oneMinusBeta2);
  const __m512d correction1 = _mm512_set1_pd(c.correction1);
  const __m512d correction2 = _mm512_set1_pd(c.correction2);
  const __m512d lrWeightDecay = _mm512_set1_pd(c.lrWeightDecay);
  const __m512d lr = _mm512_set1_pd(c.lr), eps = _mm512_set1_pd(c.eps);
  const size_t vectorEnd = count - count % 8;
  for (size_t i = 0; i < vectorEnd; i += 8) {
    prefetchAhead(param, grad, m, v, i);
    const __m512d g = _mm512_loadu_pd(grad + i);
    const __m512d mNew =
        _mm512_add_pd(_mm512_mul_pd(beta1, _mm512_loadu_pd(m + i)), _mm512_mul_pd(oneMinusBeta1, g));
    const __m512d vNew = _mm512_add_pd(_mm512_mul_pd(beta2, _mm512_loadu_pd(v + i)),
                                       _mm512_mul_pd(_mm512_mul_pd(oneMinusBeta2, g), g));
    _mm512_storeu_pd(m + i, mNew);
    _mm512_storeu_pd(v + i, vNew);
    const __m512d mHat = _mm512_div_pd(mNew, correction1);
    const __m512d vHat = _mm512_div_pd(vNew, correction2);
    __m512d p = _mm512_loadu_pd(param + i);
    p = _mm512_sub_pd(p, _mm512_mul_pd(lrWeightDecay, p));
    const __m512d step = _mm512_div_pd(_mm512_mul_pd(lr, mHat), _mm512_add_pd(_mm512_sqrt_pd(vHat), eps));
    _mm512_storeu_pd(param + i, _mm512_sub_pd(p, step));
  }
  adamwScalar(param + vectorEnd, grad + vectorEnd, m + vectorEnd, v + vectorEnd, count - vectorEnd, c);
}

#pragma GCC diagnostic pop

void adamwRangeF32(AdamWIsa isa, float* param, const float* grad, float* m, float* v, size_t count,
                   const CoefficientsF32& c, uint16_t* copy) {
  switch (isa) {
    case AdamWIsa::kAvx512:
      return copy ? adamwAvx512F32<true>(param, grad, m, v, count, c, copy)
                  : adamwAvx512F32<false>(param, grad, m, v, count, c, nullptr);
    case AdamWIsa::kAvx2:
      return copy ? adamwAvx2F32<true>(param, grad, m, v, count, c, copy)
                  : adamwAvx2F32<false>(param, grad, m, v, count, c, nullptr);
    case AdamWIsa::kScalar: return adamwScalarF32(param, grad, m, v, count, c, copy);
  }
}

void adamwRangeF64(AdamWIsa isa, double* param, const double* grad, double* m, double* v, size_t count,
                   const Coefficients& c) {
  switch (isa) {
    case AdamWIsa::kAvx512: return adamwAvx512F64(param, grad, m, v, count, c);
    case AdamWIsa::kAvx2: return adamwAvx2F64(param, grad, m, v, count, c);
    case AdamWIsa::kScalar: return adamwScalar(param, grad, m, v, count, c);
  }
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
  return static_cast<unsigned>(std::min<size_t>(size_t(hostThreadCount()) * kAdamWChunksPerThread, bySize));
}

void adamwUpdateWith(AdamWIsa isa, unsigned chunks, plan::DType dtype, void* param, const void* grad, void* m,
                     void* v, size_t count, const plan::AdamW& hyper, int64_t t, uint16_t* bf16Copy) {
  if (t < 1) throw Error("adamw: step count t must be >= 1, got " + std::to_string(t));
  if (!adamwIsaSupported(isa)) throw Error(std::string("adamw: this CPU has no ") + adamwIsaName(isa));
  if (chunks == 0) throw Error("adamw: chunk count must be >= 1");
  const Coefficients c = coefficients(hyper, t);
  if (bf16Copy && dtype != plan::F32)
    throw Error(std::string("adamw: a bf16 compute copy needs f32 masters, got ") + dtypeName(dtype));
  if (dtype == plan::F32) {
    const CoefficientsF32 f = coefficientsF32(c, hyper.weight_decay());
    float* p = static_cast<float*>(param);
    const float* g = static_cast<const float*>(grad);
    float* m32 = static_cast<float*>(m);
    float* v32 = static_cast<float*>(v);
    hostParallelRanges(count, chunks, [&](size_t begin, size_t end) {
      adamwRangeF32(isa, p + begin, g + begin, m32 + begin, v32 + begin, end - begin, f,
                    bf16Copy ? bf16Copy + begin : nullptr);
    });
  } else if (dtype == plan::F64) {
    double* p = static_cast<double*>(param);
    const double* g = static_cast<const double*>(grad);
    double* m64 = static_cast<double*>(m);
    double* v64 = static_cast<double*>(v);
    hostParallelRanges(count, chunks, [&](size_t begin, size_t end) {
      adamwRangeF64(isa, p + begin, g + begin, m64 + begin, v64 + begin, end - begin, c);
    });
  } else {
    throw Error(std::string("adamw: dtype ") + dtypeName(dtype) + " is not supported (f32 or f64)");
  }
}

AdamWConstantsF64 adamwConstantsF64(const plan::AdamW& hyper, int64_t t) {
  if (t < 1) throw Error("adamw: step count t must be >= 1, got " + std::to_string(t));
  const Coefficients c = coefficients(hyper, t);
  return {c.lr, c.beta1, c.beta2, c.eps, c.oneMinusBeta1, c.oneMinusBeta2, c.lrWeightDecay, c.correction1,
          c.correction2};
}

AdamWConstantsF32 adamwConstantsF32(const plan::AdamW& hyper, int64_t t) {
  if (t < 1) throw Error("adamw: step count t must be >= 1, got " + std::to_string(t));
  const CoefficientsF32 f = coefficientsF32(coefficients(hyper, t), hyper.weight_decay());
  return {f.beta1, f.oneMinusBeta1, f.beta2, f.oneMinusBeta2, f.decay, f.stepSize, f.invSqrtCorrection2, f.eps};
}

void adamwUpdate(plan::DType dtype, void* param, const void* grad, void* m, void* v, size_t count,
                 const plan::AdamW& hyper, int64_t t, uint16_t* bf16Copy) {
  adamwUpdateWith(adamwBestIsa(), adamwDefaultChunks(count), dtype, param, grad, m, v, count, hyper, t,
                  bf16Copy);
}

}  // namespace megatrain::runtime
