// LayerNormTest.cpp - layer_norm against its formula, layer_norm_grad against finite differences.
#include <cmath>

#include <gtest/gtest.h>

#include "TestUtil.h"

namespace megatrain::runtime::testing {
namespace {

constexpr double kEpsilon = 1e-5;

// x viewed as [rows, d]; scale and bias [d].
std::vector<double> layerNormReference(const std::vector<double>& x, const std::vector<double>& scale,
                                       const std::vector<double>& bias, size_t d) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / d; ++r) {
    double mean = 0, var = 0;
    for (size_t j = 0; j < d; ++j) mean += x[r * d + j] / static_cast<double>(d);
    for (size_t j = 0; j < d; ++j) var += (x[r * d + j] - mean) * (x[r * d + j] - mean) / static_cast<double>(d);
    for (size_t j = 0; j < d; ++j)
      y[r * d + j] = (x[r * d + j] - mean) / std::sqrt(var + kEpsilon) * scale[j] + bias[j];
  }
  return y;
}

class LayerNormTest : public ::testing::TestWithParam<plan::DType> {};

// x [2, 3, 4] normalized over [3, 4] (axis 1).
TEST_P(LayerNormTest, MatchesTheFormula) {
  std::mt19937 rng(41);
  const plan::DType dtype = GetParam();
  const HostTensor x = randomTensor({2, 3, 4}, dtype, rng, -3, 3);
  const HostTensor scale = randomTensor({3, 4}, dtype, rng, 0.5, 1.5);
  const HostTensor bias = randomTensor({3, 4}, dtype, rng);
  const HostTensor y = runKernel("layer_norm", {x, scale, bias}, {{{2, 3, 4}, dtype}},
                                 {intAttr("axis", 1), floatAttr("epsilon", kEpsilon)})[0];
  expectAllNear(y.values, layerNormReference(x.values, scale.values, bias.values, 12), 5 * tolerance(dtype));
}

TEST_P(LayerNormTest, NaNPoisonsItsRowOnly) {
  std::mt19937 rng(42);
  const plan::DType dtype = GetParam();
  HostTensor x = randomTensor({2, 3, 4}, dtype, rng, -3, 3);
  x.values[5] = std::nan("");
  const HostTensor scale = randomTensor({3, 4}, dtype, rng, 0.5, 1.5);
  const HostTensor bias = randomTensor({3, 4}, dtype, rng);
  const HostTensor y = runKernel("layer_norm", {x, scale, bias}, {{{2, 3, 4}, dtype}},
                                 {intAttr("axis", 1), floatAttr("epsilon", kEpsilon)})[0];
  for (int i = 0; i < 12; ++i) EXPECT_TRUE(std::isnan(y.values[i])) << i;
  for (int i = 12; i < 24; ++i) EXPECT_FALSE(std::isnan(y.values[i])) << i;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LayerNormTest, ::testing::Values(plan::F32, plan::F64),
                         [](const auto& info) { return info.param == plan::F32 ? "f32" : "f64"; });

// L = sum(layer_norm(x) * w) so dy = w; every partial derivative is compared
// with a central difference of the reference.
TEST(LayerNormGrad, MatchesFiniteDifferences) {
  std::mt19937 rng(42);
  const HostTensor x = randomTensor({3, 5}, plan::F64, rng, -2, 2);
  const HostTensor scale = randomTensor({5}, plan::F64, rng, 0.5, 1.5);
  const HostTensor bias = randomTensor({5}, plan::F64, rng);
  const HostTensor w = randomTensor({3, 5}, plan::F64, rng);
  const std::vector<plan::Attribute> attrs = {intAttr("axis", 1), floatAttr("epsilon", kEpsilon)};
  const std::vector<HostTensor> grads = runKernel(
      "layer_norm_grad", {x, scale, w}, {{{3, 5}, plan::F64}, {{5}, plan::F64}, {{5}, plan::F64}}, attrs);

  auto loss = [&](const std::vector<double>& xv, const std::vector<double>& sv, const std::vector<double>& bv) {
    const std::vector<double> y = layerNormReference(xv, sv, bv, 5);
    double sum = 0;
    for (size_t i = 0; i < y.size(); ++i) sum += y[i] * w.values[i];
    return sum;
  };
  const double h = 1e-6;
  auto numeric = [&](int which, size_t i) {
    std::vector<double> xv = x.values, sv = scale.values, bv = bias.values;
    std::vector<double>& v = which == 0 ? xv : which == 1 ? sv : bv;
    v[i] += h;
    const double up = loss(xv, sv, bv);
    v[i] -= 2 * h;
    return (up - loss(xv, sv, bv)) / (2 * h);
  };
  for (int which = 0; which < 3; ++which)
    for (size_t i = 0; i < grads[which].values.size(); ++i)
      EXPECT_NEAR(grads[which].values[i], numeric(which, i), 1e-6) << "output " << which << " element " << i;
}

TEST(LayerNormErrors, ScaleShapeIsChecked) {
  std::mt19937 rng(43);
  const HostTensor x = randomTensor({2, 4}, plan::F32, rng);
  const HostTensor scale = randomTensor({3}, plan::F32, rng);
  EXPECT_EQ(kernelError("layer_norm", {x, scale, scale}, {{{2, 4}, plan::F32}}, {intAttr("axis", 1)}),
            "layer_norm: scale 'in1' has shape [3], expected [4]");
}

}  // namespace
}  // namespace megatrain::runtime::testing
