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

#include "cpu/AdamWPaths.h"
#include "megatrain/runtime/AdamW.h"
#include "megatrain/runtime/Error.h"
#include "megatrain/runtime/HostThreads.h"

namespace megatrain::runtime::testing {
namespace {

// A copy of the host AdamW's scalar loop as it was before the vector and
// threaded paths: each element in double, m and v rounded to T before the
// parameter update reads them.
template <typename T>
void referenceAdamW(T* param, const T* grad, T* m, T* v, size_t count, const plan::AdamW& h, int64_t t) {
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
template <typename T>
void checkPath(AdamWIsa isa, unsigned chunks, size_t count, const plan::AdamW& h, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<T> param = randomValues<T>(count, rng, false);
  std::vector<T> m = randomValues<T>(count, rng, false);
  std::vector<T> v = randomValues<T>(count, rng, true);
  std::vector<T> refParam = param, refM = m, refV = v;
  const T firstParam = count > 0 ? param[0] : T(0);
  for (int64_t t = 1; t <= 4; ++t) {
    const std::vector<T> grad = randomValues<T>(count, rng, false);
    adamwUpdateWith(isa, chunks, dtypeOf<T>(), param.data(), grad.data(), m.data(), v.data(), count, h, t);
    referenceAdamW(refParam.data(), grad.data(), refM.data(), refV.data(), count, h, t);
    const std::string where = std::string(adamwIsaName(isa)) + ", " + std::to_string(chunks) + " chunks, " +
                              std::to_string(count) + " elements, t " + std::to_string(t);
    expectBitwiseEqual(param, refParam, "param", where);
    expectBitwiseEqual(m, refM, "m", where);
    expectBitwiseEqual(v, refV, "v", where);
  }
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
      checkPath<T>(isa, chunks, count, hyperB(), ++seed);
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
  const plan::AdamW h = hyperA();
  for (int64_t t = 1; t <= 3; ++t) {
    const std::vector<T> grad = randomValues<T>(count, rng, false);
    adamwUpdate(dtypeOf<T>(), param.data(), grad.data(), m.data(), v.data(), count, h, t);
    referenceAdamW(refParam.data(), grad.data(), refM.data(), refV.data(), count, h, t);
    const std::string where = "adamwUpdate, " + std::to_string(count) + " elements, t " + std::to_string(t);
    expectBitwiseEqual(param, refParam, "param", where);
    expectBitwiseEqual(m, refM, "m", where);
    expectBitwiseEqual(v, refV, "v", where);
  }
}

TEST(AdamWPaths, EntryPointF32) {
  checkEntryPoint<float>(kAdamWParallelMin * 3 + 13, 7);
  checkEntryPoint<float>(kAdamWParallelMin - 1, 8);
}
TEST(AdamWPaths, EntryPointF64) { checkEntryPoint<double>(kAdamWParallelMin * 2 + 5, 9); }

TEST(AdamWPaths, DefaultChunks) {
  EXPECT_EQ(adamwDefaultChunks(0), 1u);
  EXPECT_EQ(adamwDefaultChunks(kAdamWParallelMin - 1), 1u);
  EXPECT_EQ(adamwDefaultChunks(kAdamWParallelMin), std::min(2u, hostThreadCount()));
  EXPECT_EQ(adamwDefaultChunks(size_t(1) << 30), hostThreadCount());
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
