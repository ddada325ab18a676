// RmsNormTest.cpp - rms_norm against its formula, rms_norm_grad against finite differences,
// rms_norm_grad_add against rms_norm_grad, add and cast.
#include <cmath>

#include <gtest/gtest.h>

#include "TestUtil.h"
#include "megatrain/plan/Error.h"

namespace megatrain::runtime::testing {
namespace {

constexpr double kEpsilon = 1e-6;

// x viewed as [rows, d]; weight [d].
std::vector<double> rmsNormReference(const std::vector<double>& x, const std::vector<double>& weight, size_t d) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / d; ++r) {
    double ms = 0;
    for (size_t j = 0; j < d; ++j) ms += x[r * d + j] * x[r * d + j] / static_cast<double>(d);
    for (size_t j = 0; j < d; ++j) y[r * d + j] = x[r * d + j] / std::sqrt(ms + kEpsilon) * weight[j];
  }
  return y;
}

class RmsNormTest : public ::testing::TestWithParam<plan::DType> {};

// x [2, 3, 4] normalized over the last dim and over the last two.
TEST_P(RmsNormTest, MatchesTheFormula) {
  std::mt19937 rng(51);
  const plan::DType dtype = GetParam();
  const HostTensor x = randomTensor({2, 3, 4}, dtype, rng, -3, 3);
  const HostTensor w4 = randomTensor({4}, dtype, rng, 0.5, 1.5);
  const HostTensor w34 = randomTensor({3, 4}, dtype, rng, 0.5, 1.5);
  const HostTensor y = runKernel("rms_norm", {x, w4}, {{{2, 3, 4}, dtype}},
                                 {intAttr("axis", 2), floatAttr("epsilon", kEpsilon)})[0];
  expectAllNear(y.values, rmsNormReference(x.values, w4.values, 4), 5 * tolerance(dtype));
  const HostTensor z = runKernel("rms_norm", {x, w34}, {{{2, 3, 4}, dtype}},
                                 {intAttr("axis", 1), floatAttr("epsilon", kEpsilon)})[0];
  expectAllNear(z.values, rmsNormReference(x.values, w34.values, 12), 5 * tolerance(dtype));
}

TEST_P(RmsNormTest, NaNPoisonsItsRowOnly) {
  std::mt19937 rng(52);
  const plan::DType dtype = GetParam();
  HostTensor x = randomTensor({2, 3, 4}, dtype, rng, -3, 3);
  x.values[5] = std::nan("");
  const HostTensor w = randomTensor({4}, dtype, rng, 0.5, 1.5);
  const HostTensor y = runKernel("rms_norm", {x, w}, {{{2, 3, 4}, dtype}},
                                 {intAttr("axis", 2), floatAttr("epsilon", kEpsilon)})[0];
  for (int i = 0; i < 24; ++i) EXPECT_EQ(std::isnan(y.values[i]), i >= 4 && i < 8) << i;
}

// A bf16 result (mt-fold-norm-casts) is the f32 result cast to bf16, bit for
// bit, NaN rows included; a bf16 result from f64 operands is refused by name.
TEST(RmsNormBf16, IsTheCastOfTheF32Result) {
  std::mt19937 rng(53);
  HostTensor x = randomTensor({5, 3, 16}, plan::F32, rng, -3, 3);
  x.values[7] = std::nan("");
  const HostTensor w = randomTensor({16}, plan::F32, rng, 0.5, 1.5);
  const auto attrs = std::vector<plan::Attribute>{intAttr("axis", 2), floatAttr("epsilon", kEpsilon)};
  const HostTensor y32 = runKernel("rms_norm", {x, w}, {{{5, 3, 16}, plan::F32}}, attrs)[0];
  const HostTensor cast = runKernel("cast", {y32}, {{{5, 3, 16}, plan::BF16}})[0];
  const HostTensor y16 = runKernel("rms_norm", {x, w}, {{{5, 3, 16}, plan::BF16}}, attrs)[0];
  ASSERT_EQ(y16.values.size(), cast.values.size());
  for (size_t i = 0; i < cast.values.size(); ++i) {
    if (std::isnan(cast.values[i])) {
      EXPECT_TRUE(std::isnan(y16.values[i])) << i;
      continue;
    }
    EXPECT_EQ(y16.values[i], cast.values[i]) << i;
  }
  const HostTensor x64 = randomTensor({2, 4}, plan::F64, rng, -3, 3);
  const HostTensor w64 = randomTensor({4}, plan::F64, rng, 0.5, 1.5);
  EXPECT_THROW(
      {
        try {
          runKernel("rms_norm", {x64, w64}, {{{2, 4}, plan::BF16}},
                    {intAttr("axis", 1), floatAttr("epsilon", kEpsilon)});
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("bf16 output needs f32 x and weight"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RmsNormTest, ::testing::Values(plan::F32, plan::F64),
                         [](const auto& info) { return info.param == plan::F32 ? "f32" : "f64"; });

// L = sum(rms_norm(x, weight) * w) so dy = w; every partial derivative is
// compared with a central difference of the reference.
TEST(RmsNormGrad, MatchesFiniteDifferences) {
  std::mt19937 rng(52);
  const HostTensor x = randomTensor({3, 5}, plan::F64, rng, -2, 2);
  const HostTensor weight = randomTensor({5}, plan::F64, rng, 0.5, 1.5);
  const HostTensor w = randomTensor({3, 5}, plan::F64, rng);
  const std::vector<HostTensor> grads =
      runKernel("rms_norm_grad", {x, weight, w}, {{{3, 5}, plan::F64}, {{5}, plan::F64}},
                {intAttr("axis", 1), floatAttr("epsilon", kEpsilon)});

  auto loss = [&](const std::vector<double>& xv, const std::vector<double>& wv) {
    const std::vector<double> y = rmsNormReference(xv, wv, 5);
    double sum = 0;
    for (size_t i = 0; i < y.size(); ++i) sum += y[i] * w.values[i];
    return sum;
  };
  const double h = 1e-6;
  auto numeric = [&](int which, size_t i) {
    std::vector<double> xv = x.values, wv = weight.values;
    std::vector<double>& v = which == 0 ? xv : wv;
    v[i] += h;
    const double up = loss(xv, wv);
    v[i] -= 2 * h;
    return (up - loss(xv, wv)) / (2 * h);
  };
  for (int which = 0; which < 2; ++which)
    for (size_t i = 0; i < grads[which].values.size(); ++i)
      EXPECT_NEAR(grads[which].values[i], numeric(which, i), 1e-6) << "output " << which << " element " << i;
}

// rms_norm_grad_add: (x, weight, dy, addend) over x [shape] normalized from `axis`.
struct GradAddCase {
  std::vector<int64_t> shape;
  int64_t axis = 1;
  plan::DType dtype = plan::F32;
  bool bf16Copy = false;  // the third output, dx_bf16
};

// rms_norm_grad_add writes what rms_norm_grad, add(addend, dx) and (for
// dx_bf16) cast of the sum write, bit for bit: d = 1 (where dx's difference
// cancels), rows over two dims, the Llama 1.36B row (2048) and rows longer
// than the CUDA register path's 8,192.
TEST(RmsNormGradAdd, IsTheUnfusedKernelsBitForBit) {
  std::mt19937 rng(54);
  const GradAddCase cases[] = {
      {{3, 1}, 1, plan::F32, true},       {{3, 1}, 1, plan::F64},
      {{4, 5, 6}, 1, plan::F32, true},    {{4, 5, 6}, 1, plan::F32},    {{4, 5, 6}, 1, plan::F64},
      {{2, 33, 2048}, 2, plan::F32, true}, {{2, 33, 2048}, 2, plan::F64},
      {{3, 8200}, 1, plan::F32, true},    {{3, 8200}, 1, plan::F32},    {{3, 8200}, 1, plan::F64},
  };
  for (const GradAddCase& c : cases) {
    const std::vector<int64_t> normalized(c.shape.begin() + c.axis, c.shape.end());
    const auto attrs = std::vector<plan::Attribute>{intAttr("axis", c.axis), floatAttr("epsilon", kEpsilon)};
    const HostTensor x = randomTensor(c.shape, c.dtype, rng, -3, 5);
    const HostTensor weight = randomTensor(normalized, c.dtype, rng, 0.5, 1.5);
    const HostTensor dy = randomTensor(c.shape, c.dtype, rng);
    const HostTensor addend = randomTensor(c.shape, c.dtype, rng);
    const std::vector<HostTensor> grads =
        runKernel("rms_norm_grad", {x, weight, dy}, {{c.shape, c.dtype}, {normalized, c.dtype}}, attrs);
    const HostTensor sum = runKernel("add", {addend, grads[0]}, {{c.shape, c.dtype}})[0];
    std::vector<OutputSpec> outputs = {{c.shape, c.dtype}, {normalized, c.dtype}};
    if (c.bf16Copy) outputs.push_back({c.shape, plan::BF16});
    const std::vector<HostTensor> fused = runKernel("rms_norm_grad_add", {x, weight, dy, addend}, outputs, attrs);
    const std::string what = ::testing::PrintToString(c.shape) + (c.dtype == plan::F32 ? " f32" : " f64");
    expectSameBits(fused[0].values, sum.values, what + " dx");
    expectSameBits(fused[1].values, grads[1].values, what + " dweight");
    if (c.bf16Copy)
      expectSameBits(fused[2].values, runKernel("cast", {sum}, {{c.shape, plan::BF16}})[0].values, what + " dx_bf16");
  }
}

TEST(RmsNormGradAdd, Bf16CopyNeedsF32Operands) {
  std::mt19937 rng(55);
  const HostTensor x = randomTensor({2, 4}, plan::F64, rng), w = randomTensor({4}, plan::F64, rng);
  EXPECT_EQ(kernelError("rms_norm_grad_add", {x, w, x, x},
                        {{{2, 4}, plan::F64}, {{4}, plan::F64}, {{2, 4}, plan::BF16}},
                        {intAttr("axis", 1), floatAttr("epsilon", kEpsilon)}),
            "rms_norm_grad_add: dx_bf16 is the bf16 copy of an f32 dx; x is f64");
}

TEST(RmsNormErrors, WeightShapeIsChecked) {
  std::mt19937 rng(53);
  const HostTensor x = randomTensor({2, 4}, plan::F32, rng);
  const HostTensor weight = randomTensor({3}, plan::F32, rng);
  EXPECT_EQ(kernelError("rms_norm", {x, weight}, {{{2, 4}, plan::F32}},
                        {intAttr("axis", 1), floatAttr("epsilon", kEpsilon)}),
            "rms_norm: weight 'in1' has shape [3], expected [4]");
}

}  // namespace
}  // namespace megatrain::runtime::testing
