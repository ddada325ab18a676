// ActivationTest.cpp - silu, swiglu and gelu (both forms) against their formulas, and their gradient
// kernels against central differences of those formulas.
#include <cmath>
#include <functional>

#include <gtest/gtest.h>

#include "TestUtil.h"

namespace megatrain::runtime::testing {
namespace {

double silu(double x) { return x / (1 + std::exp(-x)); }
double geluErf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double geluTanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

std::vector<double> map(const std::vector<double>& x, const std::function<double(double)>& f) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = f(x[i]);
  return y;
}

double slope(const std::function<double(double)>& f, double x) {
  const double h = 1e-6;
  return (f(x + h) - f(x - h)) / (2 * h);
}

class ActivationTest : public ::testing::TestWithParam<plan::DType> {};

TEST_P(ActivationTest, MatchesTheFormulas) {
  std::mt19937 rng(61);
  const plan::DType dtype = GetParam();
  // Wide enough that sigmoid's and tanh's saturated ends are reached.
  const HostTensor x = randomTensor({4, 25}, dtype, rng, -12, 12);
  const HostTensor u = randomTensor({4, 25}, dtype, rng, -2, 2);
  const OutputSpec out{{4, 25}, dtype};
  expectAllNear(runKernel("silu", {x}, {out})[0].values, map(x.values, silu), 4 * tolerance(dtype));
  std::vector<double> swiglu = map(x.values, silu);
  for (size_t i = 0; i < swiglu.size(); ++i) swiglu[i] *= u.values[i];
  expectAllNear(runKernel("swiglu", {x, u}, {out})[0].values, swiglu, 4 * tolerance(dtype));
  expectAllNear(runKernel("gelu", {x}, {out}, {stringAttr("approximate", "none")})[0].values,
                map(x.values, geluErf), 4 * tolerance(dtype));
  expectAllNear(runKernel("gelu", {x}, {out}, {stringAttr("approximate", "tanh")})[0].values,
                map(x.values, geluTanh), 4 * tolerance(dtype));
}

TEST_P(ActivationTest, PropagateNaN) {
  std::mt19937 rng(62);
  const plan::DType dtype = GetParam();
  HostTensor x = randomTensor({2, 4}, dtype, rng, -3, 3);
  HostTensor u = randomTensor({2, 4}, dtype, rng, -2, 2);
  x.values[2] = std::nan("");
  u.values[5] = std::nan("");
  const OutputSpec out{{2, 4}, dtype};
  for (const auto& [name, y] : {std::pair{"silu", runKernel("silu", {x}, {out})[0]},
                                std::pair{"swiglu", runKernel("swiglu", {x, u}, {out})[0]},
                                std::pair{"gelu", runKernel("gelu", {x}, {out}, {stringAttr("approximate", "none")})[0]},
                                std::pair{"gelu tanh",
                                          runKernel("gelu", {x}, {out}, {stringAttr("approximate", "tanh")})[0]}}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(std::isnan(y.values[2]));
    if (std::string(name) == "swiglu") EXPECT_TRUE(std::isnan(y.values[5]));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ActivationTest, ::testing::Values(plan::F32, plan::F64),
                         [](const auto& info) { return info.param == plan::F32 ? "f32" : "f64"; });

// dx = dy * f'(x), f' by central differences of the formula, in f64.
TEST(ActivationGrad, MatchesFiniteDifferences) {
  std::mt19937 rng(62);
  const HostTensor x = randomTensor({3, 20}, plan::F64, rng, -6, 6);
  const HostTensor u = randomTensor({3, 20}, plan::F64, rng, -2, 2);
  const HostTensor dy = randomTensor({3, 20}, plan::F64, rng);
  const OutputSpec out{{3, 20}, plan::F64};
  auto expected = [&](const std::function<double(double)>& f) {
    std::vector<double> dx(x.values.size());
    for (size_t i = 0; i < dx.size(); ++i) dx[i] = dy.values[i] * slope(f, x.values[i]);
    return dx;
  };
  expectAllNear(runKernel("silu_grad", {x, dy}, {out})[0].values, expected(silu), 1e-8);
  expectAllNear(runKernel("gelu_grad", {x, dy}, {out}, {stringAttr("approximate", "none")})[0].values,
                expected(geluErf), 1e-8);
  expectAllNear(runKernel("gelu_grad", {x, dy}, {out}, {stringAttr("approximate", "tanh")})[0].values,
                expected(geluTanh), 1e-8);

  // swiglu(g, u) = silu(g) * u: dgate = dy * u * silu'(g), dup = dy * silu(g).
  const std::vector<HostTensor> grads = runKernel("swiglu_grad", {x, u, dy}, {out, out});
  std::vector<double> dgate(x.values.size()), dup(x.values.size());
  for (size_t i = 0; i < dgate.size(); ++i) {
    dgate[i] = dy.values[i] * u.values[i] * slope(silu, x.values[i]);
    dup[i] = dy.values[i] * silu(x.values[i]);
  }
  expectAllNear(grads[0].values, dgate, 1e-8);
  expectAllNear(grads[1].values, dup, 1e-8);
}

TEST(ActivationErrors, UnknownGeluFormAndShapeMismatch) {
  std::mt19937 rng(63);
  const HostTensor x = randomTensor({2, 4}, plan::F32, rng);
  const HostTensor u = randomTensor({4}, plan::F32, rng);
  EXPECT_EQ(kernelError("gelu", {x}, {{{2, 4}, plan::F32}}, {stringAttr("approximate", "sigmoid")}),
            "gelu: approximate must be \"none\" or \"tanh\", got \"sigmoid\"");
  EXPECT_EQ(kernelError("swiglu", {x, u}, {{{2, 4}, plan::F32}}),
            "swiglu: input 'in1' has shape [4], expected [2, 4]");
}

}  // namespace
}  // namespace megatrain::runtime::testing
