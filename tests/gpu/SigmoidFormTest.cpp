// SigmoidFormTest.cpp - the device sigmoid (ElementMath.cuh: one exp and one division, as every
// activation kernel and pointwise program computes it) gives, bit for bit, what the CPU twin's
// two-branch form gives on the device: over every 256th f32 bit pattern (both signs, every
// exponent, the infinities and NaNs among them), zeros, and random f64 values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "SigmoidForm.h"

namespace megatrain::runtime::cuda::test {
namespace {

template <typename T, typename Bits>
size_t differing(const std::vector<T>& x, const std::vector<T>& a, const std::vector<T>& b, std::string& first) {
  size_t count = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    Bits p, q;
    std::memcpy(&p, &a[i], sizeof p);
    std::memcpy(&q, &b[i], sizeof q);
    if (p == q) continue;
    if (count++ == 0)
      first = "x = " + std::to_string(x[i]) + ": " + std::to_string(a[i]) + " against " + std::to_string(b[i]);
  }
  return count;
}

TEST(SigmoidForm, OneExpGivesTheTwoBranchBitsF32) {
  std::vector<float> x;
  for (uint64_t bits = 0; bits < (1ull << 32); bits += 256) {
    float v;
    const uint32_t b = static_cast<uint32_t>(bits);
    std::memcpy(&v, &b, sizeof v);
    x.push_back(v);
  }
  x.insert(x.end(), {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                     std::numeric_limits<float>::quiet_NaN(), 88.7f, -88.7f, 103.9f, -103.9f});
  std::vector<float> oneExp, twoBranch;
  ASSERT_EQ(sigmoidForms(x, oneExp, twoBranch), "");
  std::string first;
  EXPECT_EQ((differing<float, uint32_t>(x, oneExp, twoBranch, first)), 0u) << first;
  // Not vacuous: the forms computed something across the range.
  EXPECT_EQ(oneExp[1 << 20], twoBranch[1 << 20]);
  EXPECT_GT(x.size(), 16u << 20);
}

TEST(SigmoidForm, OneExpGivesTheTwoBranchBitsF64) {
  std::mt19937_64 rng(12);
  std::uniform_real_distribution<double> wide(-800.0, 800.0), narrow(-8.0, 8.0);
  std::vector<double> x;
  for (int i = 0; i < (1 << 22); ++i) x.push_back(i % 2 ? wide(rng) : narrow(rng));
  x.insert(x.end(), {0.0, -0.0, std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()});
  std::vector<double> oneExp, twoBranch;
  ASSERT_EQ(sigmoidForms(x, oneExp, twoBranch), "");
  std::string first;
  EXPECT_EQ((differing<double, uint64_t>(x, oneExp, twoBranch, first)), 0u) << first;
  EXPECT_DOUBLE_EQ(oneExp[x.size() - 5], 0.5);
}

}  // namespace
}  // namespace megatrain::runtime::cuda::test
