// CrossEntropyTest.cpp - softmax_ce and next_token_ce against their formulas; gradients against finite differences.
#include <cmath>
#include <functional>

#include <gtest/gtest.h>

#include "TestUtil.h"

namespace megatrain::runtime::testing {
namespace {

constexpr int64_t kIgnore = -100;

// -log softmax(lane)[label] for a lane of c logits `stride` apart.
double laneLoss(const std::vector<double>& logits, size_t base, size_t stride, size_t c, int64_t label) {
  double denominator = 0;
  for (size_t i = 0; i < c; ++i) denominator += std::exp(logits[base + i * stride]);
  return -std::log(std::exp(logits[base + static_cast<size_t>(label) * stride]) / denominator);
}

// ONNX SoftmaxCrossEntropyLoss on logits [N, C, D], labels [N, D].
double softmaxCeReference(const std::vector<double>& logits, const std::vector<double>& labels, size_t n,
                          size_t c, size_t d, bool mean) {
  double total = 0;
  int count = 0;
  for (size_t i = 0; i < n; ++i)
    for (size_t q = 0; q < d; ++q) {
      const auto label = static_cast<int64_t>(labels[i * d + q]);
      if (label == kIgnore) continue;
      total += laneLoss(logits, i * c * d + q, d, c, label);
      ++count;
    }
  return mean ? (count ? total / count : 0.0) : total;
}

// Mean over t < T-1 of -log softmax(logits[b, t])[tokens[b, t + 1]].
double nextTokenReference(const std::vector<double>& logits, const std::vector<double>& tokens, size_t b,
                          size_t t, size_t v) {
  double total = 0;
  int count = 0;
  for (size_t i = 0; i < b; ++i)
    for (size_t s = 0; s + 1 < t; ++s) {
      const auto target = static_cast<int64_t>(tokens[i * t + s + 1]);
      if (target == kIgnore) continue;
      total += laneLoss(logits, (i * t + s) * v, 1, v, target);
      ++count;
    }
  return count ? total / count : 0.0;
}

// Central differences of f at every element of x.
std::vector<double> numericGradient(const std::vector<double>& x,
                                    const std::function<double(const std::vector<double>&)>& f) {
  std::vector<double> grad(x.size());
  const double h = 1e-6;
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<double> probe = x;
    probe[i] = x[i] + h;
    const double up = f(probe);
    probe[i] = x[i] - h;
    grad[i] = (up - f(probe)) / (2 * h);
  }
  return grad;
}

class CrossEntropyTest : public ::testing::TestWithParam<plan::DType> {};

// logits [3, 4, 2] (N, C, D), labels [3, 2] with one ignored.
TEST_P(CrossEntropyTest, SoftmaxCeMeanAndSum) {
  std::mt19937 rng(51);
  const plan::DType dtype = GetParam();
  const HostTensor logits = randomTensor({3, 4, 2}, dtype, rng, -3, 3);
  const HostTensor labels = intTensor({3, 2}, {0, 3, kIgnore, 1, 2, 2});
  const auto ignore = intAttr("ignore_index", kIgnore);
  const HostTensor mean = runKernel("softmax_ce", {logits, labels}, {{{}, dtype}}, {ignore, stringAttr("reduction", "mean")})[0];
  const HostTensor sum = runKernel("softmax_ce", {logits, labels}, {{{}, dtype}}, {ignore, stringAttr("reduction", "sum")})[0];
  EXPECT_NEAR(mean.values[0], softmaxCeReference(logits.values, labels.values, 3, 4, 2, true), tolerance(dtype));
  EXPECT_NEAR(sum.values[0], softmaxCeReference(logits.values, labels.values, 3, 4, 2, false), 5 * tolerance(dtype));
}

TEST_P(CrossEntropyTest, NextTokenCe) {
  std::mt19937 rng(52);
  const plan::DType dtype = GetParam();
  const HostTensor logits = randomTensor({2, 4, 5}, dtype, rng, -3, 3);
  const HostTensor tokens = intTensor({2, 4}, {1, 4, 0, 2, 3, kIgnore, 4, 4});
  const HostTensor loss = runKernel("next_token_ce", {logits, tokens}, {{{}, dtype}}, {intAttr("ignore_index", kIgnore)})[0];
  EXPECT_NEAR(loss.values[0], nextTokenReference(logits.values, tokens.values, 2, 4, 5), tolerance(dtype));
}

TEST_P(CrossEntropyTest, NaNLogitGivesNaNLoss) {
  std::mt19937 rng(53);
  const plan::DType dtype = GetParam();
  HostTensor logits = randomTensor({3, 4, 2}, dtype, rng, -3, 3);
  logits.values[5] = std::nan("");  // not the label's logit
  const HostTensor labels = intTensor({3, 2}, {0, 3, kIgnore, 1, 2, 2});
  const HostTensor mean = runKernel("softmax_ce", {logits, labels}, {{{}, dtype}},
                                    {intAttr("ignore_index", kIgnore), stringAttr("reduction", "mean")})[0];
  EXPECT_TRUE(std::isnan(mean.values[0]));
  HostTensor next = randomTensor({2, 4, 5}, dtype, rng, -3, 3);
  next.values[7] = std::nan("");
  const HostTensor tokens = intTensor({2, 4}, {1, 4, 0, 2, 3, kIgnore, 4, 4});
  const HostTensor loss =
      runKernel("next_token_ce", {next, tokens}, {{{}, dtype}}, {intAttr("ignore_index", kIgnore)})[0];
  EXPECT_TRUE(std::isnan(loss.values[0]));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CrossEntropyTest, ::testing::Values(plan::F32, plan::F64),
                         [](const auto& info) { return info.param == plan::F32 ? "f32" : "f64"; });

TEST(CrossEntropyGrad, SoftmaxCeGradMatchesFiniteDifferences) {
  std::mt19937 rng(53);
  const HostTensor logits = randomTensor({2, 3, 2}, plan::F64, rng, -2, 2);
  const HostTensor labels = intTensor({2, 2}, {2, kIgnore, 0, 1});
  const HostTensor dloss{{}, plan::F64, {1.7}};
  for (const char* reduction : {"mean", "sum"}) {
    const std::vector<plan::Attribute> attrs = {intAttr("ignore_index", kIgnore), stringAttr("reduction", reduction)};
    const HostTensor dlogits = runKernel("softmax_ce_grad", {logits, labels, dloss}, {{{2, 3, 2}, plan::F64}}, attrs)[0];
    const bool mean = std::string(reduction) == "mean";
    const std::vector<double> expected = numericGradient(logits.values, [&](const std::vector<double>& l) {
      return 1.7 * softmaxCeReference(l, labels.values, 2, 3, 2, mean);
    });
    SCOPED_TRACE(reduction);
    expectAllNear(dlogits.values, expected, 1e-7);
  }
}

TEST(CrossEntropyGrad, NextTokenCeGradMatchesFiniteDifferences) {
  std::mt19937 rng(54);
  const HostTensor logits = randomTensor({2, 3, 4}, plan::F64, rng, -2, 2);
  const HostTensor tokens = intTensor({2, 3}, {0, 3, kIgnore, 1, 1, 2});
  const HostTensor dloss{{}, plan::F64, {0.5}};
  const HostTensor dlogits = runKernel("next_token_ce_grad", {logits, tokens, dloss}, {{{2, 3, 4}, plan::F64}},
                                       {intAttr("ignore_index", kIgnore)})[0];
  const std::vector<double> expected = numericGradient(logits.values, [&](const std::vector<double>& l) {
    return 0.5 * nextTokenReference(l, tokens.values, 2, 3, 4);
  });
  expectAllNear(dlogits.values, expected, 1e-7);
  // The last position predicts nothing: its gradient is exactly zero.
  for (int v = 0; v < 4; ++v) EXPECT_EQ(dlogits.values[(0 * 3 + 2) * 4 + v], 0.0);
}

TEST(CrossEntropyErrors, LabelOutsideTheClassesIsNamed) {
  std::mt19937 rng(55);
  const HostTensor logits = randomTensor({2, 3}, plan::F32, rng);
  EXPECT_EQ(kernelError("softmax_ce", {logits, intTensor({2}, {1, 3})}, {{{}, plan::F32}}),
            "softmax_ce: label 3 at position 1 is outside [0, 3)");
  EXPECT_EQ(kernelError("softmax_ce", {logits, intTensor({2}, {1, 2})}, {{{}, plan::F32}},
                        {stringAttr("reduction", "none")}),
            "softmax_ce: reduction 'none' is not supported (mean or sum)");
}

}  // namespace
}  // namespace megatrain::runtime::testing
