// AdamWPathsTest.cpp - every host AdamW path (scalar, AVX2, AVX-512, chunked over threads) bitwise against the scalar loop.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "host/AdamWPaths.h"
#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/AdamW.h"
#include "megatrain/runtime/HostThreads.h"

namespace megatrain::runtime::testing {
namespace {

// A copy of the host AdamW's f64 scalar loop: each element in double.
void referenceAdamW(double* param, const double* grad, double* m, double* v, size_t count, const plan::AdamW& h,
                    int64_t t) {
  const double lr = h.lr(), beta1 = h.beta1(), beta2 = h.beta2(), eps = h.eps();
  const double weightDecay = h.weight_decay();
  const double correction1 = 1.0 - std::pow(beta1, static_cast<double>(t));
  const double correction2 = 1.0 - std::pow(beta2, static_cast<double>(t));
  for (size_t i = 0; i < count; ++i) {
    const double g = grad[i];
    m[i] = beta1 * m[i] + (1.0 - beta1) * g;
    v[i] = beta2 * v[i] + (1.0 - beta2) * g * g;
    const double mHat = m[i] / correction1;
    const double vHat = v[i] / correction2;
    double p = param[i];
    p = p - lr * weightDecay * p;
    param[i] = p - lr * mHat / (std::sqrt(vHat) + eps);
  }
}

// A copy of the host AdamW's f32 scalar loop: the per-call constants in double
// rounded to f32, then each element in f32, in this order; the copy (when
// given) is floatToBf16 of the updated parameter.
void referenceAdamW(float* param, const float* grad, float* m, float* v, size_t count, const plan::AdamW& h,
                    int64_t t, uint16_t* copy = nullptr) {
  const double correction1 = 1.0 - std::pow(h.beta1(), static_cast<double>(t));
  const double correction2 = 1.0 - std::pow(h.beta2(), static_cast<double>(t));
  const float beta1 = static_cast<float>(h.beta1()), oneMinusBeta1 = static_cast<float>(1.0 - h.beta1());
  const float beta2 = static_cast<float>(h.beta2()), oneMinusBeta2 = static_cast<float>(1.0 - h.beta2());
  const float decay = static_cast<float>(1.0 - h.lr() * h.weight_decay());
  const float stepSize = static_cast<float>(h.lr() / correction1);
  const float invSqrtCorrection2 = static_cast<float>(1.0 / std::sqrt(correction2));
  const float eps = static_cast<float>(h.eps());
  for (size_t i = 0; i < count; ++i) {
    const float g = grad[i];
    m[i] = beta1 * m[i] + oneMinusBeta1 * g;
    v[i] = beta2 * v[i] + (oneMinusBeta2 * g) * g;
    const float denominator = std::sqrt(v[i]) * invSqrtCorrection2 + eps;
    param[i] = param[i] * decay - (stepSize * m[i]) / denominator;
    if (copy) copy[i] = floatToBf16(param[i]);
  }
}

plan::AdamW hyperA() {
  plan::AdamW h;
  h.set_lr(1e-3);
  h.set_beta1(0.9);
  h.set_beta2(0.999);
  h.set_eps(1e-8);
  h.set_weight_decay(0.01);
  return h;
}

plan::AdamW hyperB() {
  plan::AdamW h;
  h.set_lr(0.037);
  h.set_beta1(0.83);
  h.set_beta2(0.95);
  h.set_eps(3e-6);
  h.set_weight_decay(0.1);
  return h;
}

// Values spread over many magnitudes, so that rounding matters in every operation.
template <typename T>
std::vector<T> randomValues(size_t count, std::mt19937& rng, bool positive) {
  std::uniform_real_distribution<double> unit(-1, 1), exponent(-6, 2);
  std::vector<T> values(count);
  for (T& x : values) {
    const double magnitude = std::pow(10.0, exponent(rng));
    const double u = unit(rng);
    x = static_cast<T>((positive ? std::abs(u) : u) * magnitude);
  }
  return values;
}

template <typename T>
plan::DType dtypeOf() {
  return std::is_same_v<T, float> ? plan::F32 : plan::F64;
}

template <typename T>
void expectBitwiseEqual(const std::vector<T>& actual, const std::vector<T>& expected, const char* what,
                        const std::string& where) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    if (std::memcmp(&actual[i], &expected[i], sizeof(T)) != 0) {
      ADD_FAILURE() << what << "[" << i << "] = " << actual[i] << ", scalar loop " << expected[i] << " (" << where
                    << ")";
      return;
    }
}

// Several steps of adamwUpdateWith(isa, chunks) and of the reference on the
// same fresh random data (new gradients each step), compared bitwise after each.
// The tensors start `offset` elements into their buffers (misaligned starts);
// with `withCopy` (f32) the bf16 copy starts `copyOffset` elements into its own,
// and must be floatToBf16 of the updated parameter.
template <typename T>
void checkPath(AdamWIsa isa, unsigned chunks, size_t count, const plan::AdamW& h, uint32_t seed, size_t offset = 0,
               bool withCopy = false, size_t copyOffset = 0) {
  std::mt19937 rng(seed);
  std::vector<T> paramBuffer = randomValues<T>(count + offset, rng, false);
  std::vector<T> mBuffer = randomValues<T>(count + offset, rng, false);
  std::vector<T> vBuffer = randomValues<T>(count + offset, rng, true);
  std::vector<uint16_t> copyBuffer(count + copyOffset, 0xABCD);
  T* param = paramBuffer.data() + offset;
  T* m = mBuffer.data() + offset;
  T* v = vBuffer.data() + offset;
  uint16_t* copy = withCopy ? copyBuffer.data() + copyOffset : nullptr;
  std::vector<T> refParam(param, param + count), refM(m, m + count), refV(v, v + count);
  std::vector<uint16_t> refCopy(count, 0);
  const T firstParam = count > 0 ? param[0] : T(0);
  for (int64_t t = 1; t <= 4; ++t) {
    std::vector<T> gradBuffer = randomValues<T>(count + offset, rng, false);
    const T* grad = gradBuffer.data() + offset;
    adamwUpdateWith(isa, chunks, dtypeOf<T>(), param, grad, m, v, count, h, t, copy);
    if constexpr (std::is_same_v<T, float>)
      referenceAdamW(refParam.data(), grad, refM.data(), refV.data(), count, h, t, withCopy ? refCopy.data() : nullptr);
    else
      referenceAdamW(refParam.data(), grad, refM.data(), refV.data(), count, h, t);
    const std::string where = std::string(adamwIsaName(isa)) + ", " + std::to_string(chunks) + " chunks, " +
                              std::to_string(count) + " elements at offset " + std::to_string(offset) + ", t " +
                              std::to_string(t) +
                              (withCopy ? ", bf16 copy at offset " + std::to_string(copyOffset) : std::string());
    expectBitwiseEqual(std::vector<T>(param, param + count), refParam, "param", where);
    expectBitwiseEqual(std::vector<T>(m, m + count), refM, "m", where);
    expectBitwiseEqual(std::vector<T>(v, v + count), refV, "v", where);
    if (withCopy) {
      expectBitwiseEqual(std::vector<uint16_t>(copy, copy + count), refCopy, "bf16 copy", where);
      for (size_t i = 0; i < count; ++i)
        if (copy[i] != floatToBf16(static_cast<float>(param[i]))) {
          ADD_FAILURE() << "copy[" << i << "] is not floatToBf16(param) (" << where << ")";
          break;
        }
    }
    if (::testing::Test::HasFailure()) return;
  }
  // Nothing outside [0, count) of the copy's buffer was written.
  for (size_t i = 0; i < copyOffset; ++i) EXPECT_EQ(copyBuffer[i], 0xABCD);
  // The update did something: the parameters moved.
  if (count > 0) {
    EXPECT_NE(param[0], firstParam);
  }
}

// Odd sizes around the vector widths (4, 8) and the 16-element chunk
// alignment, and larger ones whose chunks end mid-vector.
const size_t kCounts[] = {0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 127, 1000, 4099, 20011};
const unsigned kChunks[] = {1, 2, 3, 5, 7, 16};

template <typename T>
void checkIsa(AdamWIsa isa) {
  if (!adamwIsaSupported(isa)) {
    GTEST_SKIP() << "this CPU has no " << adamwIsaName(isa);
  }
  uint32_t seed = 100;
  for (size_t count : kCounts)
    for (unsigned chunks : kChunks) {
      checkPath<T>(isa, chunks, count, hyperA(), ++seed);
      checkPath<T>(isa, chunks, count, hyperB(), ++seed, 3);
      if constexpr (std::is_same_v<T, float>) {
        // With the bf16 copy: aligned, and starting mid-vector (the copy's
        // non-temporal stores need a peeled head).
        checkPath<T>(isa, chunks, count, hyperA(), ++seed, 0, true, 0);
        checkPath<T>(isa, chunks, count, hyperB(), ++seed, 1, true, 5);
      }
      if (::testing::Test::HasFailure()) return;
    }
}

TEST(AdamWPaths, ScalarF32) { checkIsa<float>(AdamWIsa::kScalar); }
TEST(AdamWPaths, ScalarF64) { checkIsa<double>(AdamWIsa::kScalar); }
TEST(AdamWPaths, Avx2F32) { checkIsa<float>(AdamWIsa::kAvx2); }
TEST(AdamWPaths, Avx2F64) { checkIsa<double>(AdamWIsa::kAvx2); }
TEST(AdamWPaths, Avx512F32) { checkIsa<float>(AdamWIsa::kAvx512); }
TEST(AdamWPaths, Avx512F64) { checkIsa<double>(AdamWIsa::kAvx512); }

// The entry point as the runtime calls it: the best path and the default
// chunking, on a tensor large enough to be split over the pool.
template <typename T>
void checkEntryPoint(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<T> param = randomValues<T>(count, rng, false), m(count, 0), v(count, 0);
  std::vector<T> refParam = param, refM = m, refV = v;
  std::vector<uint16_t> copy(count), refCopy(count);
  constexpr bool kF32 = std::is_same_v<T, float>;
  const plan::AdamW h = hyperA();
  for (int64_t t = 1; t <= 3; ++t) {
    const std::vector<T> grad = randomValues<T>(count, rng, false);
    adamwUpdate(dtypeOf<T>(), param.data(), grad.data(), m.data(), v.data(), count, h, t,
                kF32 ? copy.data() : nullptr);
    if constexpr (kF32)
      referenceAdamW(refParam.data(), grad.data(), refM.data(), refV.data(), count, h, t, refCopy.data());
    else
      referenceAdamW(refParam.data(), grad.data(), refM.data(), refV.data(), count, h, t);
    const std::string where = "adamwUpdate, " + std::to_string(count) + " elements, t " + std::to_string(t);
    expectBitwiseEqual(param, refParam, "param", where);
    expectBitwiseEqual(m, refM, "m", where);
    expectBitwiseEqual(v, refV, "v", where);
    if (kF32) expectBitwiseEqual(copy, refCopy, "bf16 copy", where);
  }
}

TEST(AdamWPaths, EntryPointF32) {
  checkEntryPoint<float>(kAdamWParallelMin * 3 + 13, 7);
  checkEntryPoint<float>(kAdamWParallelMin - 1, 8);
}
TEST(AdamWPaths, EntryPointF64) { checkEntryPoint<double>(kAdamWParallelMin * 2 + 5, 9); }

TEST(AdamWPaths, DefaultChunks) {
  const unsigned most = hostThreadCount() * kAdamWChunksPerThread;
  EXPECT_EQ(adamwDefaultChunks(0), 1u);
  EXPECT_EQ(adamwDefaultChunks(kAdamWParallelMin - 1), 1u);
  EXPECT_EQ(adamwDefaultChunks(kAdamWParallelMin), std::min(2u, most));
  EXPECT_EQ(adamwDefaultChunks(kAdamWParallelMin * 3), std::min(6u, most));
  EXPECT_EQ(adamwDefaultChunks(size_t(1) << 30), most);
}

// The bf16 copy's rounding on every path, on chosen bit patterns: with no
// weight decay and zero gradient and moments the update leaves each parameter
// as it is (p * 1 - 0 / eps; a signaling NaN comes back quiet), so the copy is
// floatToBf16 of the pattern: ties to even, carries into the exponent, overflow
// to infinity, NaNs of every payload and sign, zeros, subnormals.
TEST(AdamWPaths, Bf16CopyRoundsLikeFloatToBf16) {
  std::vector<uint32_t> patterns = {
      0x00000000u, 0x80000000u, 0x00000001u, 0x80008000u, 0x00018000u, 0x00008000u, 0x3F800000u,
      0x3F808000u, 0x3F818000u, 0x3F808001u, 0x3F807FFFu, 0xBF808000u, 0xBF818000u, 0x3FFF8000u,
      0x7F7F8000u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F800000u, 0xFF800000u, 0x7F800001u, 0x7FBFFFFFu,
      0x7FC00000u, 0xFFC00001u, 0xFF800001u, 0x7FFFFFFFu, 0xFFFFFFFFu, 0x7F80FFFFu, 0x007FFFFFu};
  std::mt19937 rng(23);
  for (int i = 0; i < 4000; ++i) patterns.push_back(static_cast<uint32_t>(rng()));
  // Random low halves under chosen upper halves: every rounding case at many exponents.
  for (int i = 0; i < 2000; ++i)
    patterns.push_back((static_cast<uint32_t>(rng()) & 0xFFFF0000u) | (i % 3 == 0 ? 0x8000u : rng() & 0xFFFFu));
  const size_t count = patterns.size();
  plan::AdamW h = hyperA();
  h.set_weight_decay(0);
  for (AdamWIsa isa : {AdamWIsa::kScalar, AdamWIsa::kAvx2, AdamWIsa::kAvx512}) {
    if (!adamwIsaSupported(isa)) continue;
    for (size_t copyOffset : {0, 3}) {
      std::vector<float> param(count), grad(count, 0), m(count, 0), v(count, 0);
      std::memcpy(param.data(), patterns.data(), count * 4);
      std::vector<uint16_t> copyBuffer(count + copyOffset);
      adamwUpdateWith(isa, 3, plan::F32, param.data(), grad.data(), m.data(), v.data(), count, h, 1,
                      copyBuffer.data() + copyOffset);
      for (size_t i = 0; i < count; ++i) {
        float original;
        std::memcpy(&original, &patterns[i], 4);
        uint32_t after;
        std::memcpy(&after, &param[i], 4);
        // A NaN comes back quiet (its payload otherwise kept); any other value unchanged.
        const bool nan = std::isnan(original);
        ASSERT_EQ(after, nan ? patterns[i] | 0x00400000u : patterns[i]) << adamwIsaName(isa) << " pattern " << i;
        ASSERT_EQ(copyBuffer[copyOffset + i], floatToBf16(param[i]))
            << adamwIsaName(isa) << " pattern 0x" << std::hex << patterns[i];
      }
    }
  }
  // floatToBf16 itself on a few of them: ties to even, overflow, NaN kept.
  EXPECT_EQ(floatToBf16(1.00390625f), 0x3F80);  // 0x3F808000: a tie, to the even 0x3F80
  EXPECT_EQ(floatToBf16(1.01171875f), 0x3F82);  // 0x3F818000: a tie, to the even 0x3F82
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(std::nanf("")))));
}

// The f32 scalar loop (which every path matches bitwise) against the formula
// evaluated in double from the same inputs, over one step: each result within
// a few f32 roundings of the exact one. Per element, with u = 2^-24: m within
// 4u of |beta1 m| + |(1 - beta1) g| (two products and a sum, constants rounded
// to f32), v within 6u of v (all terms positive), and the parameter within
// 8u (|p (1 - lr wd)| + |update|) plus what m's error moves the update by.
TEST(AdamWPaths, ScalarF32IsTheFormulaWithinF32Rounding) {
  const double u = std::ldexp(1.0, -24);
  uint32_t seed = 900;
  for (const plan::AdamW& h : {hyperA(), hyperB()})
    for (int64_t t : {1, 2, 7, 1000}) {
      std::mt19937 rng(++seed);
      const size_t count = 5000;
      std::vector<float> param = randomValues<float>(count, rng, false);
      std::vector<float> m = randomValues<float>(count, rng, false);
      std::vector<float> v = randomValues<float>(count, rng, true);
      const std::vector<float> grad = randomValues<float>(count, rng, false);
      const std::vector<float> param0 = param, m0 = m, v0 = v;
      adamwUpdateWith(AdamWIsa::kScalar, 1, plan::F32, param.data(), grad.data(), m.data(), v.data(), count, h, t);
      const double correction1 = 1.0 - std::pow(h.beta1(), static_cast<double>(t));
      const double correction2 = 1.0 - std::pow(h.beta2(), static_cast<double>(t));
      double worst = 0;  // the largest error as a fraction of its bound
      for (size_t i = 0; i < count; ++i) {
        const double g = grad[i], p0 = param0[i];
        const double mExact = h.beta1() * m0[i] + (1.0 - h.beta1()) * g;
        const double vExact = h.beta2() * v0[i] + (1.0 - h.beta2()) * g * g;
        const double denominator = std::sqrt(vExact / correction2) + h.eps();
        const double update = h.lr() * (mExact / correction1) / denominator;
        const double decayed = p0 * (1.0 - h.lr() * h.weight_decay());
        const double pExact = decayed - update;
        const double mBound = 4 * u * (std::abs(h.beta1() * m0[i]) + std::abs((1.0 - h.beta1()) * g));
        const double vBound = 6 * u * vExact;
        const double pBound =
            8 * u * (std::abs(decayed) + std::abs(update)) + h.lr() / correction1 / denominator * mBound;
        ASSERT_LE(std::abs(m[i] - mExact), mBound) << "m[" << i << "], t " << t;
        ASSERT_LE(std::abs(v[i] - vExact), vBound) << "v[" << i << "], t " << t;
        ASSERT_LE(std::abs(param[i] - pExact), pBound) << "param[" << i << "], t " << t;
        worst = std::max(worst, std::abs(param[i] - pExact) / pBound);
      }
      // The bound is not so loose that anything would pass: some element uses a good part of it.
      EXPECT_GT(worst, 0.02) << "t " << t;
    }
}

TEST(AdamWPaths, BestIsaIsSupported) {
  const AdamWIsa best = adamwBestIsa();
  EXPECT_TRUE(adamwIsaSupported(best));
  const AdamWIsa expected = adamwIsaSupported(AdamWIsa::kAvx512) ? AdamWIsa::kAvx512
                            : adamwIsaSupported(AdamWIsa::kAvx2)  ? AdamWIsa::kAvx2
                                                                  : AdamWIsa::kScalar;
  EXPECT_EQ(best, expected);
}

TEST(AdamWPaths, Errors) {
  float x = 1, g = 1, m = 0, v = 0;
  const plan::AdamW h = hyperA();
  EXPECT_THROW(adamwUpdateWith(AdamWIsa::kScalar, 0, plan::F32, &x, &g, &m, &v, 1, h, 1), Error);
  EXPECT_THROW(adamwUpdateWith(AdamWIsa::kScalar, 1, plan::F32, &x, &g, &m, &v, 1, h, 0), Error);
  EXPECT_THROW(adamwUpdateWith(AdamWIsa::kScalar, 1, plan::F16, &x, &g, &m, &v, 1, h, 1), Error);
  for (AdamWIsa isa : {AdamWIsa::kAvx2, AdamWIsa::kAvx512})
    if (!adamwIsaSupported(isa)) {
      EXPECT_THROW(adamwUpdateWith(isa, 1, plan::F32, &x, &g, &m, &v, 1, h, 1), Error);
    }
}

// MEGATRAIN_HOST_THREADS sets the pool's size; the entry point with 4 and 5
// threads (more than this machine may have cores) still matches bitwise. Each
// runs in a fresh process, where the pool has not started yet.
TEST(AdamWPathsDeathTest, ThreadCountsFromTheEnvironment) {
#ifdef GTEST_FLAG_SET
  GTEST_FLAG_SET(death_test_style, "threadsafe");
#else
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
#endif
  for (const char* threads : {"1", "4", "5"})
    EXPECT_EXIT(
        {
          setenv("MEGATRAIN_HOST_THREADS", threads, 1);
          if (hostThreadCount() != static_cast<unsigned>(std::atoi(threads))) std::exit(2);
          checkEntryPoint<float>(kAdamWParallelMin * 5 + 3, 11);
          checkEntryPoint<double>(kAdamWParallelMin * 5 + 3, 12);
          std::exit(::testing::Test::HasFailure() ? 1 : 0);
        },
        ::testing::ExitedWithCode(0), "")
        << "MEGATRAIN_HOST_THREADS=" << threads;
}

}  // namespace
}  // namespace megatrain::runtime::testing
