// SoftmaxTest.cpp - softmax along an inner axis and its gradient as a Jacobian-vector product.
#include <cmath>

#include <gtest/gtest.h>

#include "TestUtil.h"

namespace megatrain::runtime::testing {
namespace {

class SoftmaxTest : public ::testing::TestWithParam<plan::DType> {};

// x [2, 5, 3], softmax over axis 1: lanes of 5 elements, 3 apart.
TEST_P(SoftmaxTest, MatchesTheFormulaAlongAxisOne) {
  std::mt19937 rng(21);
  const plan::DType dtype = GetParam();
  const HostTensor x = randomTensor({2, 5, 3}, dtype, rng, -5, 5);
  const HostTensor y = runKernel("softmax", {x}, {{{2, 5, 3}, dtype}}, {intAttr("axis", 1)})[0];
  for (int o = 0; o < 2; ++o)
    for (int q = 0; q < 3; ++q) {
      double denominator = 0;
      for (int i = 0; i < 5; ++i) denominator += std::exp(x.values[(o * 5 + i) * 3 + q]);
      for (int i = 0; i < 5; ++i) {
        const int at = (o * 5 + i) * 3 + q;
        EXPECT_NEAR(y.values[at], std::exp(x.values[at]) / denominator, tolerance(dtype));
      }
    }
}

TEST_P(SoftmaxTest, LargeLogitsDoNotOverflow) {
  const plan::DType dtype = GetParam();
  const HostTensor x{{1, 3}, dtype, {1000, 1001, 999}};
  const HostTensor y = runKernel("softmax", {x}, {{{1, 3}, dtype}}, {intAttr("axis", 1)})[0];
  const double e = std::exp(1.0), denominator = 1 + e + 1 / e;
  EXPECT_NEAR(y.values[0], 1 / denominator, tolerance(dtype));
  EXPECT_NEAR(y.values[1], e / denominator, tolerance(dtype));
}

// dx_i = sum_j J_ji dy_j with J_ij = dy_i/dx_j = y_i (delta_ij - y_j).
TEST_P(SoftmaxTest, GradientIsTheJacobianTransposeProduct) {
  std::mt19937 rng(22);
  const plan::DType dtype = GetParam();
  const HostTensor x = randomTensor({4, 6}, dtype, rng, -2, 2);
  const HostTensor dy = randomTensor({4, 6}, dtype, rng);
  const HostTensor y = runKernel("softmax", {x}, {{{4, 6}, dtype}}, {intAttr("axis", 1)})[0];
  const HostTensor dx = runKernel("softmax_grad", {y, dy}, {{{4, 6}, dtype}}, {intAttr("axis", 1)})[0];
  for (int r = 0; r < 4; ++r)
    for (int i = 0; i < 6; ++i) {
      double expected = 0;
      for (int j = 0; j < 6; ++j) {
        const double yi = y.values[r * 6 + i], yj = y.values[r * 6 + j];
        expected += yj * ((i == j ? 1.0 : 0.0) - yi) * dy.values[r * 6 + j];
      }
      EXPECT_NEAR(dx.values[r * 6 + i], expected, tolerance(dtype));
    }
}

// fmax drops a NaN from the row's maximum; exp(NaN - max) must still put it in every output of the row.
TEST_P(SoftmaxTest, NaNPoisonsItsRowOnly) {
  std::mt19937 rng(33);
  const plan::DType dtype = GetParam();
  HostTensor x = randomTensor({2, 4}, dtype, rng, -2, 2);
  x.values[1] = std::nan("");
  const HostTensor y = runKernel("softmax", {x}, {{{2, 4}, dtype}}, {intAttr("axis", 1)})[0];
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(std::isnan(y.values[i])) << i;
  for (int i = 4; i < 8; ++i) EXPECT_FALSE(std::isnan(y.values[i])) << i;
  const HostTensor dy = randomTensor({2, 4}, dtype, rng);
  const HostTensor dx = runKernel("softmax_grad", {y, dy}, {{{2, 4}, dtype}}, {intAttr("axis", 1)})[0];
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(std::isnan(dx.values[i])) << i;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, SoftmaxTest, ::testing::Values(plan::F32, plan::F64),
                         [](const auto& info) { return info.param == plan::F32 ? "f32" : "f64"; });

}  // namespace
}  // namespace megatrain::runtime::testing
