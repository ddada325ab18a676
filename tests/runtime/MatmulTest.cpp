// MatmulTest.cpp - matmul with transpose flags and broadcast batch dims against a triple loop.
#include <gtest/gtest.h>

#include "TestUtil.h"

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

}  // namespace
}  // namespace megatrain::runtime::testing
