// ElementwiseTest.cpp - fill, broadcasting binary ops, scale, activations and their gradients.
#include <cmath>
#include <functional>

#include <gtest/gtest.h>

#include "TestUtil.h"

namespace megatrain::runtime::testing {
namespace {

class ElementwiseTest : public ::testing::TestWithParam<plan::DType> {
 protected:
  plan::DType dtype() const { return GetParam(); }
  std::mt19937 rng{1234};
};

TEST_P(ElementwiseTest, BinaryOpsBroadcastLikeNumpy) {
  // a [2, 1, 4] and b [3, 1] broadcast to [2, 3, 4].
  const HostTensor a = randomTensor({2, 1, 4}, dtype(), rng);
  const HostTensor b = randomTensor({3, 1}, dtype(), rng, 0.5, 1.5);  // no zero divisors
  const std::vector<std::pair<const char*, std::function<double(double, double)>>> ops = {
      {"add", std::plus<double>()},
      {"sub", std::minus<double>()},
      {"mul", std::multiplies<double>()},
      {"div", std::divides<double>()}};
  for (const auto& [name, op] : ops) {
    const HostTensor y = runKernel(name, {a, b}, {{{2, 3, 4}, dtype()}})[0];
    std::vector<double> expected;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 4; ++k) expected.push_back(op(a.values[i * 4 + k], b.values[j]));
    SCOPED_TRACE(name);
    expectAllNear(y.values, expected, tolerance(dtype()));
  }
}

TEST_P(ElementwiseTest, BinarySameShapeAndScalar) {
  const HostTensor a = randomTensor({5, 7}, dtype(), rng);
  const HostTensor b = randomTensor({5, 7}, dtype(), rng);
  const HostTensor s = randomTensor({}, dtype(), rng);
  const HostTensor sum = runKernel("add", {a, b}, {{{5, 7}, dtype()}})[0];
  const HostTensor scaled = runKernel("mul", {s, a}, {{{5, 7}, dtype()}})[0];
  for (size_t i = 0; i < a.values.size(); ++i) {
    EXPECT_NEAR(sum.values[i], a.values[i] + b.values[i], tolerance(dtype()));
    EXPECT_NEAR(scaled.values[i], s.values[0] * a.values[i], tolerance(dtype()));
  }
}

TEST_P(ElementwiseTest, FillAndScale) {
  const HostTensor y = runKernel("fill", {}, {{{3, 2}, dtype()}}, {floatAttr("value", 2.5)})[0];
  for (double v : y.values) EXPECT_EQ(v, 2.5);
  const HostTensor x = randomTensor({4, 3}, dtype(), rng);
  const HostTensor z = runKernel("scale", {x}, {{{4, 3}, dtype()}}, {floatAttr("alpha", -1.5)})[0];
  for (size_t i = 0; i < x.values.size(); ++i)
    EXPECT_NEAR(z.values[i], -1.5 * x.values[i], tolerance(dtype()));
}

TEST_P(ElementwiseTest, ActivationsMatchTheirFormulas) {
  HostTensor x = randomTensor({6, 5}, dtype(), rng, -4, 4);
  x.values[0] = 60;  // sigmoid and tanh must saturate, not overflow
  x.values[1] = -60;
  x.values[2] = 0;
  const HostTensor relu = runKernel("relu", {x}, {{{6, 5}, dtype()}})[0];
  const HostTensor tanh = runKernel("tanh", {x}, {{{6, 5}, dtype()}})[0];
  const HostTensor sigmoid = runKernel("sigmoid", {x}, {{{6, 5}, dtype()}})[0];
  for (size_t i = 0; i < x.values.size(); ++i) {
    const double v = x.values[i];
    EXPECT_EQ(relu.values[i], v > 0 ? v : 0.0);
    EXPECT_NEAR(tanh.values[i], std::tanh(v), tolerance(dtype()));
    EXPECT_NEAR(sigmoid.values[i], 1.0 / (1.0 + std::exp(-v)), tolerance(dtype()));
  }
}

TEST_P(ElementwiseTest, ActivationGradientsMatchTheirDerivatives) {
  const HostTensor x = randomTensor({3, 4}, dtype(), rng, -3, 3);
  const HostTensor dy = randomTensor({3, 4}, dtype(), rng);
  const HostTensor t = runKernel("tanh", {x}, {{{3, 4}, dtype()}})[0];
  const HostTensor s = runKernel("sigmoid", {x}, {{{3, 4}, dtype()}})[0];
  const HostTensor reluGrad = runKernel("relu_grad", {x, dy}, {{{3, 4}, dtype()}})[0];
  const HostTensor tanhGrad = runKernel("tanh_grad", {t, dy}, {{{3, 4}, dtype()}})[0];
  const HostTensor sigmoidGrad = runKernel("sigmoid_grad", {s, dy}, {{{3, 4}, dtype()}})[0];
  for (size_t i = 0; i < x.values.size(); ++i) {
    const double v = x.values[i], g = dy.values[i];
    const double th = std::tanh(v), sg = 1.0 / (1.0 + std::exp(-v));
    EXPECT_EQ(reluGrad.values[i], v > 0 ? g : 0.0);
    EXPECT_NEAR(tanhGrad.values[i], g * (1 - th * th), 10 * tolerance(dtype()));
    EXPECT_NEAR(sigmoidGrad.values[i], g * sg * (1 - sg), 10 * tolerance(dtype()));
  }
}

// A NaN must reach the output: `x > 0 ? x : 0` once mapped it to 0, so NaN
// weights trained to finite losses.
TEST_P(ElementwiseTest, ActivationsPropagateNaN) {
  const double nan = std::nan("");
  HostTensor x = randomTensor({2, 3}, dtype(), rng, -2, 2);
  x.values[1] = nan;
  x.values[4] = nan;
  x.values[0] = -1;  // relu_grad: a NaN dy below zero stays NaN
  HostTensor dy = randomTensor({2, 3}, dtype(), rng);
  dy.values[0] = nan;
  for (const char* name : {"relu", "tanh", "sigmoid", "softplus", "neg", "exp", "sqrt", "scale"}) {
    SCOPED_TRACE(name);
    const std::vector<plan::Attribute> attrs =
        std::string(name) == "scale" ? std::vector<plan::Attribute>{floatAttr("alpha", 2.0)} : std::vector<plan::Attribute>{};
    const HostTensor y = runKernel(name, {x}, {{{2, 3}, dtype()}}, attrs)[0];
    EXPECT_TRUE(std::isnan(y.values[1]));
    EXPECT_TRUE(std::isnan(y.values[4]));
  }
  for (const char* name : {"max", "min", "add", "mul"}) {
    SCOPED_TRACE(name);
    const HostTensor b = randomTensor({2, 3}, dtype(), rng);
    const HostTensor left = runKernel(name, {x, b}, {{{2, 3}, dtype()}})[0];
    const HostTensor right = runKernel(name, {b, x}, {{{2, 3}, dtype()}})[0];
    EXPECT_TRUE(std::isnan(left.values[1]) && std::isnan(right.values[1]));
  }
  const HostTensor reluGrad = runKernel("relu_grad", {x, dy}, {{{2, 3}, dtype()}})[0];
  EXPECT_TRUE(std::isnan(reluGrad.values[0]));  // x < 0, dy NaN
  EXPECT_TRUE(std::isnan(reluGrad.values[1]));  // x NaN
  EXPECT_TRUE(std::isnan(reluGrad.values[4]));
  for (const char* name : {"tanh_grad", "sigmoid_grad"}) {
    SCOPED_TRACE(name);
    const HostTensor g = runKernel(name, {x, dy}, {{{2, 3}, dtype()}})[0];
    EXPECT_TRUE(std::isnan(g.values[0]) && std::isnan(g.values[1]));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ElementwiseTest, ::testing::Values(plan::F32, plan::F64),
                         [](const auto& info) { return info.param == plan::F32 ? "f32" : "f64"; });

TEST(ElementwiseErrors, ShapeAndDtypeMismatchesAreNamed) {
  std::mt19937 rng(7);
  const HostTensor a = randomTensor({2, 3}, plan::F32, rng);
  const HostTensor b = randomTensor({4}, plan::F32, rng);
  EXPECT_EQ(kernelError("add", {a, b}, {{{2, 3}, plan::F32}}),
            "add: shapes [2, 3] and [4] do not broadcast");
  const HostTensor c = randomTensor({3}, plan::F32, rng);
  EXPECT_EQ(kernelError("mul", {a, c}, {{{3, 2}, plan::F32}}),
            "mul: output 'out0' has shape [3, 2], expected [2, 3]");
  const HostTensor d = randomTensor({2, 3}, plan::F64, rng);
  EXPECT_EQ(kernelError("sub", {a, d}, {{{2, 3}, plan::F32}}),
            "sub: operand 'in1' is f64 but 'in0' is f32");
  EXPECT_EQ(kernelError("scale", {a}, {{{2, 3}, plan::F32}}),
            "scale: attribute 'alpha' is missing");
}

}  // namespace
}  // namespace megatrain::runtime::testing
