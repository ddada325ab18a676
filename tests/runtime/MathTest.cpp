// MathTest.cpp - neg, sqrt, reciprocal, exp, log, erf, cos, sin, softplus, powf, max, min, isnan and their gradient kernels.
#include <cmath>
#include <functional>
#include <limits>

#include <gtest/gtest.h>

#include "TestUtil.h"

namespace megatrain::runtime::testing {
namespace {

class MathTest : public ::testing::TestWithParam<plan::DType> {
 protected:
  plan::DType dtype() const { return GetParam(); }
  std::mt19937 rng{4321};
};

TEST_P(MathTest, UnaryFunctionsMatchTheLibrary) {
  // Positive inputs, so that sqrt, log and reciprocal are defined everywhere.
  const HostTensor x = randomTensor({4, 6}, dtype(), rng, 0.1, 3.0);
  const HostTensor s = randomTensor({4, 6}, dtype(), rng, -3.0, 3.0);
  const std::vector<std::tuple<const char*, const HostTensor*, std::function<double(double)>>> ops = {
      {"neg", &s, [](double v) { return -v; }},
      {"sqrt", &x, [](double v) { return std::sqrt(v); }},
      {"reciprocal", &x, [](double v) { return 1 / v; }},
      {"exp", &s, [](double v) { return std::exp(v); }},
      {"log", &x, [](double v) { return std::log(v); }},
      {"erf", &s, [](double v) { return std::erf(v); }},
      {"cos", &s, [](double v) { return std::cos(v); }},
      {"sin", &s, [](double v) { return std::sin(v); }},
      {"softplus", &s, [](double v) { return std::log(1 + std::exp(v)); }}};
  for (const auto& [name, input, f] : ops) {
    const HostTensor y = runKernel(name, {*input}, {{{4, 6}, dtype()}})[0];
    std::vector<double> expected;
    for (double v : input->values) expected.push_back(f(v));
    SCOPED_TRACE(name);
    expectAllNear(y.values, expected, tolerance(dtype()));
  }
}

// Far from 0, where log(1 + e^x) overflows or loses everything to rounding: softplus is x
// above and e^x below; NaN stays NaN.
TEST_P(MathTest, SoftplusIsStableAtTheExtremes) {
  HostTensor x = randomTensor({4}, dtype(), rng);
  x.values = {200.0, -200.0, 40.0, std::numeric_limits<double>::quiet_NaN()};
  const HostTensor y = runKernel("softplus", {x}, {{{4}, dtype()}})[0];
  EXPECT_EQ(y.values[0], 200.0);
  EXPECT_GE(y.values[1], 0.0);  // e^-200: 0 in f32, 1.4e-87 in f64
  EXPECT_LE(y.values[1], 1e-80);
  EXPECT_NEAR(y.values[2], 40.0, 1e-12 * 40);
  EXPECT_TRUE(std::isnan(y.values[3]));
}

TEST_P(MathTest, PowfTakesAnyExponent) {
  const HostTensor x = randomTensor({3, 5}, dtype(), rng, 0.2, 2.0);
  HostTensor signedX = randomTensor({3, 5}, dtype(), rng, -2.0, 2.0);
  for (double e : {2.0, 3.0, 0.5, -0.5, -1.0, 0.0}) {
    const HostTensor y = runKernel("powf", {x}, {{{3, 5}, dtype()}}, {floatAttr("exponent", e)})[0];
    std::vector<double> expected;
    for (double v : x.values) expected.push_back(std::pow(v, e));
    SCOPED_TRACE(e);
    expectAllNear(y.values, expected, tolerance(dtype()));
  }
  // Integer exponents of negative bases are defined; x^0.5 of them is NaN.
  const HostTensor cube = runKernel("powf", {signedX}, {{{3, 5}, dtype()}}, {floatAttr("exponent", 3)})[0];
  for (size_t i = 0; i < signedX.values.size(); ++i)
    EXPECT_NEAR(cube.values[i], std::pow(signedX.values[i], 3), tolerance(dtype()) * 8);
  signedX.values[0] = -1;
  const HostTensor root = runKernel("powf", {signedX}, {{{3, 5}, dtype()}}, {floatAttr("exponent", 0.5)})[0];
  EXPECT_TRUE(std::isnan(root.values[0]));
}

TEST_P(MathTest, MaxAndMinBroadcastAndPropagateNaN) {
  HostTensor a = randomTensor({2, 1, 4}, dtype(), rng);
  HostTensor b = randomTensor({3, 1}, dtype(), rng);
  a.values[1] = b.values[0];  // a tie
  a.values[2] = std::numeric_limits<double>::quiet_NaN();
  const HostTensor mx = runKernel("max", {a, b}, {{{2, 3, 4}, dtype()}})[0];
  const HostTensor mn = runKernel("min", {a, b}, {{{2, 3, 4}, dtype()}})[0];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) {
        const double va = a.values[i * 4 + k], vb = b.values[j];
        const size_t at = (i * 3 + j) * 4 + k;
        if (std::isnan(va)) {
          EXPECT_TRUE(std::isnan(mx.values[at]) && std::isnan(mn.values[at])) << at;
          continue;
        }
        EXPECT_EQ(mx.values[at], std::max(va, vb)) << at;
        EXPECT_EQ(mn.values[at], std::min(va, vb)) << at;
      }
}

TEST_P(MathTest, MaxAndMinGradientsRouteDyToTheChosenOperand) {
  HostTensor a = randomTensor({2, 1, 4}, dtype(), rng);
  HostTensor b = randomTensor({3, 4}, dtype(), rng);
  a.values[0] = b.values[0];  // ties go to a
  a.values[5] = b.values[5];
  const HostTensor dy = randomTensor({2, 3, 4}, dtype(), rng);
  for (const char* name : {"max_grad", "min_grad"}) {
    const bool isMax = std::string(name) == "max_grad";
    const auto grads = runKernel(name, {a, b, dy}, {{{2, 3, 4}, dtype()}, {{2, 3, 4}, dtype()}});
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 4; ++k) {
          const double va = a.values[i * 4 + k], vb = b.values[j * 4 + k];
          const size_t at = (i * 3 + j) * 4 + k;
          const bool toA = isMax ? va >= vb : va <= vb;
          EXPECT_EQ(grads[0].values[at], toA ? dy.values[at] : 0.0) << name << " " << at;
          EXPECT_EQ(grads[1].values[at], toA ? 0.0 : dy.values[at]) << name << " " << at;
        }
  }
}

TEST_P(MathTest, ErfGradIsTheDerivative) {
  const HostTensor x = randomTensor({5, 3}, dtype(), rng, -3, 3);
  const HostTensor dy = randomTensor({5, 3}, dtype(), rng);
  const HostTensor dx = runKernel("erf_grad", {x, dy}, {{{5, 3}, dtype()}})[0];
  std::vector<double> expected;
  for (size_t i = 0; i < x.values.size(); ++i)
    expected.push_back(dy.values[i] * 2 / std::sqrt(M_PI) * std::exp(-x.values[i] * x.values[i]));
  expectAllNear(dx.values, expected, 4 * tolerance(dtype()));
}

TEST_P(MathTest, IsNanWritesBools) {
  HostTensor x = randomTensor({2, 3}, dtype(), rng);
  x.values[1] = std::numeric_limits<double>::quiet_NaN();
  x.values[4] = std::numeric_limits<double>::infinity();
  const HostTensor m = runKernel("isnan", {x}, {{{2, 3}, plan::BOOL}})[0];
  EXPECT_EQ(m.values, (std::vector<double>{0, 1, 0, 0, 0, 0}));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MathTest, ::testing::Values(plan::F32, plan::F64),
                         [](const auto& info) { return info.param == plan::F32 ? "f32" : "f64"; });

TEST(MathErrors, WrongOperandsAreNamed) {
  std::mt19937 rng(9);
  const HostTensor a = randomTensor({2, 3}, plan::F32, rng);
  EXPECT_EQ(kernelError("powf", {a}, {{{2, 3}, plan::F32}}), "powf: attribute 'exponent' is missing");
  EXPECT_EQ(kernelError("isnan", {a}, {{{2, 3}, plan::F32}}),
            "isnan: output 'out0' is f32, expected bool");
  EXPECT_EQ(kernelError("max_grad", {a, a, randomTensor({3, 3}, plan::F32, rng)},
                        {{{2, 3}, plan::F32}, {{2, 3}, plan::F32}}),
            "max_grad: dy 'in2' has shape [3, 3], expected [2, 3]");
  EXPECT_EQ(kernelError("sqrt", {intTensor({2}, {1, 4})}, {{{2}, plan::I64}}),
            "sqrt: operand 'in0' is i64, the CPU backend computes in f32 or f64");
}

}  // namespace
}  // namespace megatrain::runtime::testing
