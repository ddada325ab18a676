// LinearCrossEntropyTest.cpp - linear_ce and linear_ce_grad against the unfused matmul + next_token_ce (and their gradients), on the CPU.
#include <gtest/gtest.h>

#include "TestUtil.h"

namespace megatrain::runtime::testing {
namespace {

constexpr int64_t kIgnore = -100;
constexpr int64_t kB = 2, kT = 5, kH = 6, kV = 30;

// The tokens: one target ignored, one at the last class, one at the first.
HostTensor tokens() {
  return intTensor({kB, kT}, {3, 29, 0, kIgnore, 17, 8, 11, 0, 29, 4});
}

struct Unfused {
  HostTensor loss, dhidden, dweight;
};

// matmul(hidden, weight^T) -> next_token_ce and its gradient through both
// matmuls, as the unfused plan runs them. For bf16 operands the logits are
// f32 and dlogits is cast to bf16 before the backward matmuls.
Unfused unfused(const HostTensor& hidden, const HostTensor& weight, const HostTensor& ids, const HostTensor& dloss,
                plan::DType operands, plan::DType results) {
  const std::vector<plan::Attribute> noFlags = {intAttr("transpose_a", 0), intAttr("transpose_b", 1)};
  const HostTensor logits = runKernel("matmul", {hidden, weight}, {{{kB, kT, kV}, results}}, noFlags)[0];
  const auto ignore = intAttr("ignore_index", kIgnore);
  Unfused u;
  u.loss = runKernel("next_token_ce", {logits, ids}, {{{}, results}}, {ignore})[0];
  HostTensor dlogits = runKernel("next_token_ce_grad", {logits, ids, dloss}, {{{kB, kT, kV}, results}}, {ignore})[0];
  if (operands != results) dlogits = runKernel("cast", {dlogits}, {{{kB, kT, kV}, operands}})[0];
  u.dhidden = runKernel("matmul", {dlogits, weight}, {{{kB, kT, kH}, results}},
                        {intAttr("transpose_a", 0), intAttr("transpose_b", 0)})[0];
  HostTensor rows = dlogits, hiddenRows = hidden;
  rows.shape = {kB * kT, kV};
  hiddenRows.shape = {kB * kT, kH};
  u.dweight = runKernel("matmul", {rows, hiddenRows}, {{{kV, kH}, results}},
                        {intAttr("transpose_a", 1), intAttr("transpose_b", 0)})[0];
  return u;
}

struct Case {
  plan::DType operands;
  int64_t chunk;
};

class LinearCrossEntropyTest : public ::testing::TestWithParam<Case> {};

TEST_P(LinearCrossEntropyTest, MatchesUnfusedLossAndGradients) {
  const Case c = GetParam();
  const plan::DType results = c.operands == plan::BF16 ? plan::F32 : c.operands;
  std::mt19937 rng(static_cast<unsigned>(77 + c.chunk));
  const HostTensor hidden = randomTensor({kB, kT, kH}, c.operands, rng, -2, 2);
  const HostTensor weight = randomTensor({kV, kH}, c.operands, rng, -2, 2);
  const HostTensor ids = tokens();
  const HostTensor dloss = randomTensor({}, results, rng, 0.5, 2);
  const std::vector<plan::Attribute> attrs = {intAttr("ignore_index", kIgnore), intAttr("chunk", c.chunk)};

  const std::vector<HostTensor> forward =
      runKernel("linear_ce", {hidden, weight, ids}, {{{}, results}, {{kB, kT}, results}}, attrs);
  const std::vector<HostTensor> backward =
      runKernel("linear_ce_grad", {hidden, weight, ids, forward[1], dloss},
                {{{kB, kT, kH}, results}, {{kV, kH}, results}}, attrs);
  const Unfused u = unfused(hidden, weight, ids, dloss, c.operands, results);

  // The online logsumexp differs from the two-pass one in the last bits only;
  // the gradients are the same rounded dlogits summed in double.
  const double tol = results == plan::F64 ? 1e-13 : 1e-6;
  EXPECT_NEAR(forward[0].values[0], u.loss.values[0], tol * (1 + std::abs(u.loss.values[0])));
  expectAllNear(backward[0].values, u.dhidden.values, tol);
  expectAllNear(backward[1].values, u.dweight.values, tol);
  // No target at t = T - 1, nor for the ignored one: lse 0 there.
  EXPECT_EQ(forward[1].values[kT - 1], 0.0);
  EXPECT_EQ(forward[1].values[2], 0.0);  // tokens[0][3] is ignored
  EXPECT_NE(forward[1].values[0], 0.0);
}

INSTANTIATE_TEST_SUITE_P(Chunks, LinearCrossEntropyTest,
                         ::testing::Values(Case{plan::F32, 7}, Case{plan::F32, 30}, Case{plan::F32, 64},
                                           Case{plan::F64, 1}, Case{plan::F64, 8}, Case{plan::BF16, 7},
                                           Case{plan::BF16, 128}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           const char* type = info.param.operands == plan::F32   ? "f32"
                                              : info.param.operands == plan::F64 ? "f64"
                                                                                 : "bf16";
                           return std::string(type) + "_chunk" + std::to_string(info.param.chunk);
                         });

// No counted target: loss 0, gradients 0.
TEST(LinearCrossEntropy, EveryTargetIgnored) {
  std::mt19937 rng(5);
  const HostTensor hidden = randomTensor({1, 3, 4}, plan::F32, rng);
  const HostTensor weight = randomTensor({9, 4}, plan::F32, rng);
  const HostTensor ids = intTensor({1, 3}, {1, kIgnore, kIgnore});
  const HostTensor dloss = randomTensor({}, plan::F32, rng, 1, 2);
  const std::vector<plan::Attribute> attrs = {intAttr("ignore_index", kIgnore), intAttr("chunk", 4)};
  const auto forward = runKernel("linear_ce", {hidden, weight, ids}, {{{}, plan::F32}, {{1, 3}, plan::F32}}, attrs);
  EXPECT_EQ(forward[0].values[0], 0.0);
  const auto backward = runKernel("linear_ce_grad", {hidden, weight, ids, forward[1], dloss},
                                  {{{1, 3, 4}, plan::F32}, {{9, 4}, plan::F32}}, attrs);
  for (double v : backward[0].values) EXPECT_EQ(v, 0.0);
  for (double v : backward[1].values) EXPECT_EQ(v, 0.0);
}

TEST(LinearCrossEntropy, TargetOutsideTheVocabularyIsAnError) {
  std::mt19937 rng(6);
  const HostTensor hidden = randomTensor({1, 3, 4}, plan::F32, rng);
  const HostTensor weight = randomTensor({9, 4}, plan::F32, rng);
  const HostTensor ids = intTensor({1, 3}, {1, 9, 2});
  const std::string error = kernelError("linear_ce", {hidden, weight, ids}, {{{}, plan::F32}, {{1, 3}, plan::F32}},
                                        {intAttr("ignore_index", kIgnore), intAttr("chunk", 4)});
  EXPECT_NE(error.find("label 9 at position 1 is outside [0, 9)"), std::string::npos) << error;
}

TEST(LinearCrossEntropy, WeightMustMatchTheHiddenSize) {
  std::mt19937 rng(7);
  const HostTensor hidden = randomTensor({1, 3, 4}, plan::F32, rng);
  const HostTensor weight = randomTensor({9, 5}, plan::F32, rng);
  const HostTensor ids = intTensor({1, 3}, {1, 2, 3});
  const std::string error = kernelError("linear_ce", {hidden, weight, ids}, {{{}, plan::F32}, {{1, 3}, plan::F32}},
                                        {intAttr("ignore_index", kIgnore), intAttr("chunk", 4)});
  EXPECT_NE(error.find("weight must be [V, H] with H = 4"), std::string::npos) << error;
}

}  // namespace
}  // namespace megatrain::runtime::testing
