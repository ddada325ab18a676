// ShapeTest.cpp - reshape, transpose, broadcast_to and sum_to (checked as adjoints).
#include <gtest/gtest.h>

#include "TestUtil.h"

namespace megatrain::runtime::testing {
namespace {

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

TEST(ShapeKernels, ReshapeKeepsBytes) {
  std::mt19937 rng(1);
  const HostTensor x = randomTensor({2, 6}, plan::F32, rng);
  EXPECT_EQ(runKernel("reshape", {x}, {{{3, 2, 2}, plan::F32}})[0].values, x.values);
  const HostTensor ids = intTensor({4}, {7, -1, 3, 0});
  EXPECT_EQ(runKernel("reshape", {ids}, {{{2, 2}, plan::I64}})[0].values, ids.values);
  EXPECT_EQ(kernelError("reshape", {x}, {{{5}, plan::F32}}), "reshape: cannot reshape [2, 6] to [5]");
}

TEST(ShapeKernels, TransposeMovesEveryElement) {
  std::mt19937 rng(2);
  const HostTensor x = randomTensor({2, 3, 4}, plan::F64, rng);
  // perm [2, 0, 1]: y[i, j, k] = x[j, k, i], y.shape = [4, 2, 3].
  const HostTensor y = runKernel("transpose", {x}, {{{4, 2, 3}, plan::F64}}, {intsAttr("perm", {2, 0, 1})})[0];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) EXPECT_EQ(y.values[(i * 2 + j) * 3 + k], x.values[(j * 3 + k) * 4 + i]);
  EXPECT_EQ(kernelError("transpose", {x}, {{{4, 2, 3}, plan::F64}}, {intsAttr("perm", {0, 0, 1})}),
            "transpose: perm is not a permutation");
}

TEST(ShapeKernels, BroadcastToRepeatsAlongStretchedDims) {
  std::mt19937 rng(3);
  const HostTensor x = randomTensor({3, 1}, plan::F32, rng);
  const HostTensor y = runKernel("broadcast_to", {x}, {{{2, 3, 4}, plan::F32}})[0];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) EXPECT_EQ(y.values[(i * 3 + j) * 4 + k], x.values[j]);
  EXPECT_EQ(kernelError("broadcast_to", {x}, {{{2, 4}, plan::F32}}),
            "broadcast_to: [3, 1] does not broadcast to [2, 4]");
}

TEST(ShapeKernels, SumToSumsStretchedDims) {
  std::mt19937 rng(4);
  const HostTensor x = randomTensor({2, 3, 4}, plan::F64, rng);
  const HostTensor y = runKernel("sum_to", {x}, {{{3, 1}, plan::F64}})[0];
  for (int j = 0; j < 3; ++j) {
    double sum = 0;
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 4; ++k) sum += x.values[(i * 3 + j) * 4 + k];
    EXPECT_NEAR(y.values[j], sum, 1e-12);
  }
  EXPECT_EQ(kernelError("sum_to", {x}, {{{5}, plan::F64}}),
            "sum_to: output [5] does not broadcast to input [2, 3, 4]");
}

// <broadcast_to(x), y> == <x, sum_to(y)>: the two are adjoint, which is what
// makes sum_to the gradient of broadcasting.
TEST(ShapeKernels, SumToIsTheAdjointOfBroadcastTo) {
  std::mt19937 rng(5);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{3, 1}, {2, 3, 4}}, {{4}, {2, 3, 4}}, {{1, 1, 1}, {2, 3, 4}}, {{}, {5, 2}}, {{2, 1, 4}, {2, 3, 4}}};
  for (const auto& [small, large] : cases) {
    const HostTensor x = randomTensor(small, plan::F64, rng);
    const HostTensor y = randomTensor(large, plan::F64, rng);
    const HostTensor bx = runKernel("broadcast_to", {x}, {{large, plan::F64}})[0];
    const HostTensor sy = runKernel("sum_to", {y}, {{small, plan::F64}})[0];
    EXPECT_NEAR(dot(bx.values, y.values), dot(x.values, sy.values), 1e-12);
  }
}

}  // namespace
}  // namespace megatrain::runtime::testing
