// Bf16KernelTest.cpp - the CPU kernels of --precision bf16: cast to and from bf16
// (round to nearest even) and matmul of two bf16 operands into an f32 result
// (a bf16 result: MatmulTest.cpp).
#include <cmath>
#include <cstring>
#include <limits>

#include <gtest/gtest.h>

#include "TestUtil.h"
#include "megatrain/plan/DType.h"

namespace megatrain::runtime::testing {
namespace {

HostTensor tensor(plan::DType dtype, std::vector<double> values) {
  return HostTensor{{static_cast<int64_t>(values.size())}, dtype, std::move(values)};
}

std::vector<double> cast(const HostTensor& x, plan::DType to) {
  return runKernel("cast", {x}, {{x.shape, to}})[0].values;
}

float fromBits(uint32_t word) {
  float f;
  std::memcpy(&f, &word, 4);
  return f;
}

// The bf16 neighbour of an f32 by an independent route: the nearest of the
// two bf16 values that bracket it, ties to the even mantissa.
double nearestBf16(float x) {
  uint32_t word;
  std::memcpy(&word, &x, 4);
  const float down = fromBits(word & 0xFFFF0000u);
  const float up = fromBits((word & 0xFFFF0000u) + 0x10000u);
  const double dDown = std::abs(static_cast<double>(x) - down), dUp = std::abs(static_cast<double>(up) - x);
  if (dDown < dUp) return down;
  if (dUp < dDown) return up;
  return ((word >> 16) & 1u) ? up : down;
}

TEST(Bf16Cast, F32RoundsToNearestEven) {
  std::mt19937 rng(7);
  HostTensor x = randomTensor({257}, plan::F32, rng, -100.0, 100.0);
  // Exact ties: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 (rounds to 1,
  // even); 1 + 3 * 2^-8 between 1 + 2^-7 and 1 + 2^-6 (rounds up, even).
  x.values.push_back(1.0 + std::ldexp(1.0, -8));
  x.values.push_back(1.0 + 3 * std::ldexp(1.0, -8));
  x.shape = {static_cast<int64_t>(x.values.size())};
  const std::vector<double> y = cast(x, plan::BF16);
  for (size_t i = 0; i < y.size(); ++i)
    ASSERT_EQ(y[i], nearestBf16(static_cast<float>(x.values[i]))) << "at element " << i;
  EXPECT_EQ(y[y.size() - 2], 1.0);
  EXPECT_EQ(y[y.size() - 1], 1.0 + std::ldexp(1.0, -6));
}

TEST(Bf16Cast, F64RoundsThroughF32AndWidensExactly) {
  std::mt19937 rng(8);
  const HostTensor x = randomTensor({64}, plan::F64, rng, -3.0, 3.0);
  const std::vector<double> y = cast(x, plan::BF16);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i], nearestBf16(static_cast<float>(x.values[i])));
  // Widening is exact, to f32 and to f64.
  EXPECT_EQ(cast(tensor(plan::BF16, y), plan::F32), y);
  EXPECT_EQ(cast(tensor(plan::BF16, y), plan::F64), y);
  EXPECT_EQ(cast(tensor(plan::BF16, y), plan::BF16), y);
}

TEST(Bf16Cast, SpecialValuesSurvive) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> y =
      cast(tensor(plan::F32, {inf, -inf, std::numeric_limits<double>::quiet_NaN(), -0.0, 3.4e38}), plan::BF16);
  EXPECT_EQ(y[0], inf);
  EXPECT_EQ(y[1], -inf);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(y[3], 0.0);
  EXPECT_TRUE(std::signbit(y[3]));
  EXPECT_EQ(y[4], inf);  // past the largest bf16, rounds to infinity
}

TEST(Bf16Cast, OtherTypesAreRefused) {
  EXPECT_EQ(kernelError("cast", {intTensor({2}, {1, 2})}, {{{2}, plan::BF16}}),
            "cast: bf16 casts only to and from f32 and f64, not i64");
}

// Two bf16 operands, f32 result: the triple loop over the bf16 values in double.
TEST(Bf16Matmul, MatchesTripleLoopOverBf16Values) {
  std::mt19937 rng(11);
  for (bool transB : {false, true}) {
    const int64_t M = 5, K = 33, N = 7;
    const HostTensor a = randomTensor({2, M, K}, plan::BF16, rng);
    const HostTensor b = randomTensor(transB ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N},
                                      plan::BF16, rng);
    const HostTensor y = runKernel("matmul", {a, b}, {{{2, M, N}, plan::F32}},
                                   {intAttr("transpose_b", transB), stringAttr("precision", "bf16")})[0];
    std::vector<double> expected;
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double sum = 0;
          for (int64_t k = 0; k < K; ++k)
            sum += a.values[(i * M + m) * K + k] * (transB ? b.values[n * K + k] : b.values[k * N + n]);
          expected.push_back(static_cast<float>(sum));
        }
    EXPECT_EQ(y.values, expected) << "transpose_b " << transB;
  }
}

TEST(Bf16Matmul, Tf32AttributeIsExactOnCpu) {
  std::mt19937 rng(12);
  const HostTensor a = randomTensor({6, 9}, plan::F32, rng);
  const HostTensor b = randomTensor({9, 4}, plan::F32, rng);
  const HostTensor plain = runKernel("matmul", {a, b}, {{{6, 4}, plan::F32}})[0];
  const HostTensor tf32 = runKernel("matmul", {a, b}, {{{6, 4}, plan::F32}}, {stringAttr("precision", "tf32")})[0];
  EXPECT_EQ(plain.values, tf32.values);
}

TEST(Bf16Matmul, MixedOperandsAndBadPrecisionAreRefused) {
  std::mt19937 rng(13);
  const HostTensor a = randomTensor({2, 3}, plan::BF16, rng);
  const HostTensor f = randomTensor({3, 2}, plan::F32, rng);
  const HostTensor b = randomTensor({3, 2}, plan::BF16, rng);
  EXPECT_EQ(kernelError("matmul", {a, f}, {{{2, 2}, plan::F32}}),
            "matmul: b 'in1' is f32, expected bf16");
  EXPECT_EQ(kernelError("matmul", {a, b}, {{{2, 2}, plan::F64}}),
            "matmul: output 'out0' is f64, expected f32");
  EXPECT_EQ(kernelError("matmul", {f, f}, {{{3, 3}, plan::F32}}, {stringAttr("precision", "fp16")}),
            "matmul: precision must be fp32, tf32 or bf16, got 'fp16'");
}

}  // namespace
}  // namespace megatrain::runtime::testing
