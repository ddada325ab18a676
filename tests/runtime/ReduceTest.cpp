// ReduceTest.cpp - reduce_sum and reduce_mean over chosen axes, with and without keepdims.
#include <gtest/gtest.h>

#include "TestUtil.h"

namespace megatrain::runtime::testing {
namespace {

class ReduceTest : public ::testing::TestWithParam<plan::DType> {};

TEST_P(ReduceTest, SumAndMeanOverAxesZeroAndTwo) {
  std::mt19937 rng(11);
  const plan::DType dtype = GetParam();
  const HostTensor x = randomTensor({3, 4, 5}, dtype, rng);
  std::vector<double> sums(4, 0.0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 5; ++k) sums[j] += x.values[(i * 4 + j) * 5 + k];
  std::vector<double> means = sums;
  for (double& m : means) m /= 15;

  const auto axes = intsAttr("axes", {0, 2});
  const HostTensor sum = runKernel("reduce_sum", {x}, {{{4}, dtype}}, {axes, intAttr("keepdims", 0)})[0];
  const HostTensor kept = runKernel("reduce_sum", {x}, {{{1, 4, 1}, dtype}}, {axes, intAttr("keepdims", 1)})[0];
  const HostTensor mean = runKernel("reduce_mean", {x}, {{{4}, dtype}}, {axes, intAttr("keepdims", 0)})[0];
  expectAllNear(sum.values, sums, tolerance(dtype));
  expectAllNear(kept.values, sums, tolerance(dtype));
  expectAllNear(mean.values, means, tolerance(dtype));
}

TEST_P(ReduceTest, EmptyAxesReduceEverything) {
  std::mt19937 rng(12);
  const plan::DType dtype = GetParam();
  const HostTensor x = randomTensor({2, 3}, dtype, rng);
  double total = 0;
  for (double v : x.values) total += v;
  const HostTensor mean = runKernel("reduce_mean", {x}, {{{}, dtype}}, {intAttr("keepdims", 0)})[0];
  EXPECT_NEAR(mean.values[0], total / 6, tolerance(dtype));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ReduceTest, ::testing::Values(plan::F32, plan::F64),
                         [](const auto& info) { return info.param == plan::F32 ? "f32" : "f64"; });

TEST(ReduceErrors, BadAxesAndShapesAreNamed) {
  std::mt19937 rng(13);
  const HostTensor x = randomTensor({3, 4}, plan::F32, rng);
  EXPECT_EQ(kernelError("reduce_sum", {x}, {{{3}, plan::F32}}, {intsAttr("axes", {2}), intAttr("keepdims", 0)}),
            "reduce_sum: axis 2 is outside input [3, 4]");
  EXPECT_EQ(kernelError("reduce_sum", {x}, {{{3}, plan::F32}}, {intsAttr("axes", {1}), intAttr("keepdims", 1)}),
            "reduce_sum: output 'out0' has shape [3], expected [3, 1]");
}

}  // namespace
}  // namespace megatrain::runtime::testing
