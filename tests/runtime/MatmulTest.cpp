// MatmulTest.cpp - matmul with transpose flags and broadcast batch dims against a triple loop, and its bf16 result as the cast of the f32 one.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "TestUtil.h"
#include "megatrain/plan/Bf16.h"

namespace megatrain::runtime::testing {
namespace {

struct MatmulCase {
  plan::DType dtype;
  bool transA, transB;
};

class MatmulTest : public ::testing::TestWithParam<MatmulCase> {};

// Element (m, k) of a [batchA..., rows, cols] tensor stored plain or transposed.
double at(const HostTensor& t, int64_t batch, int64_t r, int64_t c, bool transposed) {
  const int64_t rows = t.shape[t.shape.size() - 2], cols = t.shape[t.shape.size() - 1];
  const int64_t matrix = rows * cols;
  return transposed ? t.values[batch * matrix + c * cols + r] : t.values[batch * matrix + r * cols + c];
}

TEST_P(MatmulTest, BatchBroadcastMatchesTripleLoop) {
  const MatmulCase p = GetParam();
  std::mt19937 rng(42);
  const int64_t M = 3, K = 5, N = 4;
  // a [2, 1, M, K] and b [3, K, N] (each maybe transposed) give y [2, 3, M, N].
  const HostTensor a = randomTensor(p.transA ? std::vector<int64_t>{2, 1, K, M}
                                             : std::vector<int64_t>{2, 1, M, K}, p.dtype, rng);
  const HostTensor b = randomTensor(p.transB ? std::vector<int64_t>{3, N, K}
                                             : std::vector<int64_t>{3, K, N}, p.dtype, rng);
  const HostTensor y = runKernel("matmul", {a, b}, {{{2, 3, M, N}, p.dtype}},
                                 {intAttr("transpose_a", p.transA), intAttr("transpose_b", p.transB)})[0];
  std::vector<double> expected;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double sum = 0;
          for (int64_t k = 0; k < K; ++k) sum += at(a, i, m, k, p.transA) * at(b, j, k, n, p.transB);
          expected.push_back(sum);
        }
  expectAllNear(y.values, expected, tolerance(p.dtype));
}

TEST_P(MatmulTest, RankTwoWeightAgainstBatchedInput) {
  const MatmulCase p = GetParam();
  std::mt19937 rng(43);
  // x [2, 3, K] times W [K, N] (or W^T stored [N, K]): the usual linear layer.
  const int64_t K = 6, N = 2;
  const HostTensor x = randomTensor({2, 3, K}, p.dtype, rng);
  const HostTensor w = randomTensor(p.transB ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N},
                                    p.dtype, rng);
  const HostTensor y =
      runKernel("matmul", {x, w}, {{{2, 3, N}, p.dtype}}, {intAttr("transpose_b", p.transB)})[0];
  std::vector<double> expected;
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t n = 0; n < N; ++n) {
      double sum = 0;
      for (int64_t k = 0; k < K; ++k) sum += x.values[r * K + k] * at(w, 0, k, n, p.transB);
      expected.push_back(sum);
    }
  expectAllNear(y.values, expected, tolerance(p.dtype));
}

TEST_P(MatmulTest, SameInputsGiveBitwiseSameOutputs) {
  const MatmulCase p = GetParam();
  std::mt19937 rng(44);
  // Square operands are valid under every flag combination.
  const HostTensor a = randomTensor({9, 9}, p.dtype, rng);
  const HostTensor b = randomTensor({9, 9}, p.dtype, rng);
  const std::vector<plan::Attribute> attrs = {intAttr("transpose_a", p.transA),
                                              intAttr("transpose_b", p.transB)};
  const HostTensor first = runKernel("matmul", {a, b}, {{{9, 9}, p.dtype}}, attrs)[0];
  const HostTensor second = runKernel("matmul", {a, b}, {{{9, 9}, p.dtype}}, attrs)[0];
  EXPECT_EQ(first.values, second.values);
}

INSTANTIATE_TEST_SUITE_P(
    Flags, MatmulTest,
    ::testing::Values(MatmulCase{plan::F32, false, false}, MatmulCase{plan::F32, true, false},
                      MatmulCase{plan::F32, false, true}, MatmulCase{plan::F32, true, true},
                      MatmulCase{plan::F64, false, false}, MatmulCase{plan::F64, true, true}),
    [](const auto& info) {
      return std::string(info.param.dtype == plan::F32 ? "f32" : "f64") +
             (info.param.transA ? "_ta" : "") + (info.param.transB ? "_tb" : "");
    });

TEST(MatmulErrors, InnerDimensionMismatchIsNamed) {
  std::mt19937 rng(1);
  const HostTensor a = randomTensor({4, 3}, plan::F32, rng);
  const HostTensor b = randomTensor({2, 5}, plan::F32, rng);
  EXPECT_EQ(kernelError("matmul", {a, b}, {{{4, 5}, plan::F32}}),
            "matmul: inner dimensions differ: a [4, 3], b [2, 5]");
  EXPECT_EQ(kernelError("matmul", {a, randomTensor({3, 5}, plan::F32, rng)}, {{{4, 4}, plan::F32}}),
            "matmul: output 'out0' has shape [4, 4], expected [4, 5]");
}

// ---- a bf16 result: the f32 result rounded as cast rounds it ----

struct Product {
  std::vector<int64_t> a, b, y;
  bool transA, transB;
};

std::string describe(const Product& p) {
  auto dims = [](const std::vector<int64_t>& shape) {
    std::string text = "[";
    for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
    return text + "]";
  };
  return dims(p.a) + (p.transA ? "^T" : "") + " x " + dims(p.b) + (p.transB ? "^T" : "");
}

// The bits cast f32 -> bf16 gives for each value of an f32 result, and the
// bits of a bf16 result (its values are exact in double).
std::vector<uint16_t> bf16Bits(const std::vector<double>& values) {
  std::vector<uint16_t> bits;
  for (double v : values) bits.push_back(floatToBf16(static_cast<float>(v)));
  return bits;
}

// Runs the product with an f32 and with a bf16 result; the bf16 one must be
// floatToBf16 of the f32 one, element for element, bit for bit.
void expectBf16IsCastOfF32(const Product& p, const HostTensor& a, const HostTensor& b) {
  const std::vector<plan::Attribute> attrs = {intAttr("transpose_a", p.transA), intAttr("transpose_b", p.transB),
                                              stringAttr("precision", "bf16")};
  const HostTensor wide = runKernel("matmul", {a, b}, {{p.y, plan::F32}}, attrs)[0];
  const HostTensor narrow = runKernel("matmul", {a, b}, {{p.y, plan::BF16}}, attrs)[0];
  ASSERT_EQ(narrow.values.size(), wide.values.size()) << describe(p);
  const std::vector<uint16_t> expected = bf16Bits(wide.values), actual = bf16Bits(narrow.values);
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_EQ(actual[i], expected[i]) << describe(p) << " element " << i << ": f32 result " << wide.values[i]
                                      << ", bf16 result " << narrow.values[i];
}

TEST(MatmulBf16Result, IsTheCastOfTheF32ResultBitForBit) {
  const Product products[] = {
      {{5, 7}, {7, 3}, {5, 3}, false, false},
      {{7, 5}, {7, 3}, {5, 3}, true, false},
      {{5, 7}, {3, 7}, {5, 3}, false, true},
      {{7, 5}, {3, 7}, {5, 3}, true, true},
      {{33, 65}, {17, 65}, {33, 17}, false, true},             // odd sizes, x W^T
      {{2, 4, 9, 64}, {48, 64}, {2, 4, 9, 48}, false, true},  // a batch against one weight
      {{2, 1, 5, 7}, {1, 3, 7, 4}, {2, 3, 5, 4}, false, false},  // both batches broadcast
      {{3, 6, 5}, {3, 6, 2}, {3, 5, 2}, true, false},          // equal batches, a^T (a dW shape)
      {{3, 0}, {0, 4}, {3, 4}, false, false},                  // an empty sum: +0
  };
  for (uint32_t seed : {51u, 52u, 53u}) {
    std::mt19937 rng(seed);
    for (const Product& p : products) {
      // A scale that keeps the sums away from any one range of exponents.
      const double scale = std::ldexp(1.0, static_cast<int>(rng() % 40) - 20);
      const HostTensor a = randomTensor(p.a, plan::BF16, rng, -scale, scale);
      const HostTensor b = randomTensor(p.b, plan::BF16, rng, -1, 1);
      expectBf16IsCastOfF32(p, a, b);
    }
  }
}

// Sums that land on a bf16 tie round to the even neighbour, an f32 sum past
// bf16's largest finite rounds to infinity, an infinite operand stays
// infinite and inf * 0 gives NaN, as cast gives them.
TEST(MatmulBf16Result, TiesOverflowInfinityAndNaNRoundAsCastDoes) {
  const double inf = std::numeric_limits<double>::infinity();
  const double ulp = std::ldexp(1.0, -7);  // bf16's spacing in [1, 2)
  const double big = std::ldexp(255.0 / 128.0, 127);  // bf16's largest finite, 0x7F7F
  // Row i of a times b = [1, 1]: y[i] = a[i, 0] + a[i, 1].
  const HostTensor a{{6, 2}, plan::BF16,
                     {1.0, ulp / 2,            // 1 + ulp/2: a tie, to even 1
                      1.0 + ulp, ulp / 2,      // 1 + 3 ulp/2: a tie, to even 1 + 2 ulp
                      big, big,                // past f32's range: inf
                      big, std::ldexp(1.0, 119),  // f32-exact, rounds past bf16's largest: inf
                      -inf, 1.0,               // -inf
                      inf, -inf}};             // NaN
  const HostTensor b{{2, 1}, plan::BF16, {1.0, 1.0}};
  const Product p{{6, 2}, {2, 1}, {6, 1}, false, false};
  expectBf16IsCastOfF32(p, a, b);
  const HostTensor y = runKernel("matmul", {a, b}, {{{6, 1}, plan::BF16}})[0];
  EXPECT_EQ(y.values[0], 1.0);
  EXPECT_EQ(y.values[1], 1.0 + 2 * ulp);
  EXPECT_EQ(y.values[2], inf);
  EXPECT_EQ(y.values[3], inf);
  EXPECT_EQ(y.values[4], -inf);
  EXPECT_TRUE(std::isnan(y.values[5]));
}

TEST(MatmulBf16Result, MatmulAddAndF32OperandsAreRefused) {
  std::mt19937 rng(54);
  const HostTensor a = randomTensor({4, 3}, plan::BF16, rng), b = randomTensor({3, 5}, plan::BF16, rng);
  const std::string refused =
      "matmul_add: the output is bf16; matmul_add writes f32 or f64 (only matmul rounds its product to bf16)";
  EXPECT_EQ(kernelError("matmul_add", {a, b, randomTensor({4, 5}, plan::BF16, rng)}, {{{4, 5}, plan::BF16}}),
            refused);
  EXPECT_EQ(kernelError("matmul_add", {a, b, randomTensor({5}, plan::F32, rng)}, {{{4, 5}, plan::BF16}}), refused);
  const HostTensor f = randomTensor({4, 3}, plan::F32, rng), g = randomTensor({3, 5}, plan::F32, rng);
  EXPECT_EQ(kernelError("matmul", {f, g}, {{{4, 5}, plan::BF16}}),
            "matmul: operand 'out0' is bf16, the CPU backend computes in f32 or f64");
}

}  // namespace
}  // namespace megatrain::runtime::testing
