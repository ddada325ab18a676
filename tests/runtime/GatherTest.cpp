// GatherTest.cpp - gather with negative indices on several axes, and gather_grad as its adjoint.
#include <gtest/gtest.h>

#include "TestUtil.h"

namespace megatrain::runtime::testing {
namespace {

TEST(GatherKernels, AxisZeroWithNegativeIndices) {
  std::mt19937 rng(31);
  const HostTensor data = randomTensor({5, 3}, plan::F32, rng);
  // indices [2, 2]: -1 is row 4, -5 is row 0.
  const HostTensor indices = intTensor({2, 2}, {-1, 0, 3, -5});
  const HostTensor y = runKernel("gather", {data, indices}, {{{2, 2, 3}, plan::F32}}, {intAttr("axis", 0)})[0];
  const int rows[4] = {4, 0, 3, 0};
  for (int p = 0; p < 4; ++p)
    for (int q = 0; q < 3; ++q) EXPECT_EQ(y.values[p * 3 + q], data.values[rows[p] * 3 + q]);
}

TEST(GatherKernels, InnerAxis) {
  std::mt19937 rng(32);
  const HostTensor data = randomTensor({2, 4, 3}, plan::F64, rng);
  const HostTensor indices = intTensor({3}, {3, -4, 1});
  const HostTensor y = runKernel("gather", {data, indices}, {{{2, 3, 3}, plan::F64}}, {intAttr("axis", 1)})[0];
  const int rows[3] = {3, 0, 1};
  for (int o = 0; o < 2; ++o)
    for (int p = 0; p < 3; ++p)
      for (int q = 0; q < 3; ++q)
        EXPECT_EQ(y.values[(o * 3 + p) * 3 + q], data.values[(o * 4 + rows[p]) * 3 + q]);
}

TEST(GatherKernels, OutOfRangeIndexIsNamed) {
  std::mt19937 rng(33);
  const HostTensor data = randomTensor({5, 3}, plan::F32, rng);
  EXPECT_EQ(kernelError("gather", {data, intTensor({2}, {1, 5})}, {{{2, 3}, plan::F32}}, {intAttr("axis", 0)}),
            "gather: index 5 at position 1 is outside [-5, 5)");
  EXPECT_EQ(kernelError("gather", {data, intTensor({2}, {1, 2})}, {{{2, 4}, plan::F32}}, {intAttr("axis", 0)}),
            "gather: output 'out0' has shape [2, 4], expected [2, 3]");
}

// Repeated indices accumulate: ddata[r] = sum of dy rows gathered from r.
TEST(GatherKernels, GradScatterAddsRepeatedIndices) {
  std::mt19937 rng(34);
  const HostTensor indices = intTensor({2, 3}, {1, -1, 1, 0, 3, 1});  // -1 is row 3
  const HostTensor dy = randomTensor({2, 3, 2}, plan::F64, rng);
  const HostTensor ddata = runKernel("gather_grad", {indices, dy}, {{{4, 2}, plan::F64}}, {intAttr("axis", 0)})[0];
  std::vector<double> expected(8, 0.0);
  const int rows[6] = {1, 3, 1, 0, 3, 1};
  for (int p = 0; p < 6; ++p)
    for (int q = 0; q < 2; ++q) expected[rows[p] * 2 + q] += dy.values[p * 2 + q];
  expectAllNear(ddata.values, expected, 1e-12);
}

// <gather(data), dy> == <data, gather_grad(dy)> for gathers along axis 1.
TEST(GatherKernels, GradIsTheAdjointOfGather) {
  std::mt19937 rng(35);
  for (plan::DType dtype : {plan::F32, plan::F64}) {
    const HostTensor data = randomTensor({3, 5, 2}, dtype, rng);
    const HostTensor indices = intTensor({2, 2}, {4, -2, 0, 4});
    const HostTensor dy = randomTensor({3, 2, 2, 2}, dtype, rng);
    const auto axis = intAttr("axis", 1);
    const HostTensor y = runKernel("gather", {data, indices}, {{{3, 2, 2, 2}, dtype}}, {axis})[0];
    const HostTensor ddata = runKernel("gather_grad", {indices, dy}, {{{3, 5, 2}, dtype}}, {axis})[0];
    double left = 0, right = 0;
    for (size_t i = 0; i < y.values.size(); ++i) left += y.values[i] * dy.values[i];
    for (size_t i = 0; i < data.values.size(); ++i) right += data.values[i] * ddata.values[i];
    EXPECT_NEAR(left, right, 10 * tolerance(dtype));
  }
}

}  // namespace
}  // namespace megatrain::runtime::testing
