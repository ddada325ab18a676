// MatmulAddTest.cpp - the matmul epilogues on the CPU backend: matmul_add (y = A B + r, r of y's shape or a bias), the bits of matmul followed by add, matmul_bias_gelu, the bits of matmul_add followed by gelu, and matmul_gelu_grad, the bits of matmul followed by gelu_grad.
#include <gtest/gtest.h>

#include "TestUtil.h"

namespace megatrain::runtime::testing {
namespace {

struct MatmulAddCase {
  plan::DType operands, result;
  bool transA, transB;
};

class MatmulAddTest : public ::testing::TestWithParam<MatmulAddCase> {};

// The fused kernel rounds the product to y's type and adds r in that type, so
// it gives exactly what the unfused pair gives (docs/ops.md "Matmul epilogues").
TEST_P(MatmulAddTest, BitwiseMatmulThenAdd) {
  const MatmulAddCase p = GetParam();
  std::mt19937 rng(71);
  const int64_t M = 5, K = 37, N = 6;
  // a [2, 1, M, K] and b [3, K, N] (each maybe transposed), r and y [2, 3, M, N].
  const HostTensor a = randomTensor(p.transA ? std::vector<int64_t>{2, 1, K, M}
                                             : std::vector<int64_t>{2, 1, M, K}, p.operands, rng);
  const HostTensor b = randomTensor(p.transB ? std::vector<int64_t>{3, N, K}
                                             : std::vector<int64_t>{3, K, N}, p.operands, rng);
  const HostTensor r = randomTensor({2, 3, M, N}, p.result, rng, -4.0, 4.0);
  const std::vector<plan::Attribute> attrs = {intAttr("transpose_a", p.transA), intAttr("transpose_b", p.transB)};
  const OutputSpec out = {{2, 3, M, N}, p.result};
  const HostTensor fused = runKernel("matmul_add", {a, b, r}, {out}, attrs)[0];
  const HostTensor product = runKernel("matmul", {a, b}, {out}, attrs)[0];
  const HostTensor sum = runKernel("add", {product, r}, {out})[0];
  EXPECT_EQ(fused.values, sum.values);
  // And the addend did arrive: the fused result is not the bare product.
  EXPECT_NE(fused.values, product.values);
}

// A bias [N] is added to every row, as add broadcasts it.
TEST_P(MatmulAddTest, BiasBitwiseMatmulThenBroadcastAdd) {
  const MatmulAddCase p = GetParam();
  std::mt19937 rng(73);
  const int64_t M = 7, K = 19, N = 5;
  const HostTensor a = randomTensor(p.transA ? std::vector<int64_t>{2, K, M} : std::vector<int64_t>{2, M, K},
                                    p.operands, rng);
  const HostTensor b =
      randomTensor(p.transB ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N}, p.operands, rng);
  const HostTensor bias = randomTensor({N}, p.result, rng, -4.0, 4.0);
  const std::vector<plan::Attribute> attrs = {intAttr("transpose_a", p.transA), intAttr("transpose_b", p.transB)};
  const OutputSpec out = {{2, M, N}, p.result};
  const HostTensor fused = runKernel("matmul_add", {a, b, bias}, {out}, attrs)[0];
  const HostTensor product = runKernel("matmul", {a, b}, {out}, attrs)[0];
  const HostTensor sum = runKernel("add", {product, bias}, {out})[0];
  EXPECT_EQ(fused.values, sum.values);
  EXPECT_NE(fused.values, product.values);
}

INSTANTIATE_TEST_SUITE_P(
    Types, MatmulAddTest,
    ::testing::Values(MatmulAddCase{plan::F32, plan::F32, false, false},
                      MatmulAddCase{plan::F32, plan::F32, true, true},
                      MatmulAddCase{plan::F64, plan::F64, false, true},
                      MatmulAddCase{plan::BF16, plan::F32, false, false},
                      MatmulAddCase{plan::BF16, plan::F32, false, true},
                      MatmulAddCase{plan::BF16, plan::F32, true, false}),
    [](const auto& info) {
      const MatmulAddCase& p = info.param;
      return std::string(p.operands == plan::BF16 ? "bf16" : p.operands == plan::F32 ? "f32" : "f64") +
             (p.transA ? "_ta" : "") + (p.transB ? "_tb" : "");
    });

class MatmulBiasGeluTest : public ::testing::TestWithParam<MatmulAddCase> {};

// z is matmul_add's value and y gelu's (tanh) of z, bit for bit, so a plan
// trains the same with and without the fusion (docs/ops.md "Matmul
// epilogues"). Random bias and operands of a few units put z on both sides
// of 0 and into GELU's curved range.
TEST_P(MatmulBiasGeluTest, BitwiseMatmulAddThenGelu) {
  const MatmulAddCase p = GetParam();
  std::mt19937 rng(79);
  const int64_t M = 9, K = 21, N = 11;
  const HostTensor a = randomTensor(p.transA ? std::vector<int64_t>{2, K, M} : std::vector<int64_t>{2, M, K},
                                    p.operands, rng, -2.0, 2.0);
  const HostTensor b =
      randomTensor(p.transB ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N}, p.operands, rng, -1.0, 1.0);
  const HostTensor bias = randomTensor({N}, plan::F32, rng, -3.0, 3.0);
  const std::vector<plan::Attribute> attrs = {intAttr("transpose_a", p.transA), intAttr("transpose_b", p.transB)};
  const OutputSpec out = {{2, M, N}, plan::F32};
  const std::vector<HostTensor> fused = runKernel("matmul_bias_gelu", {a, b, bias}, {out, out}, attrs);
  const HostTensor sum = runKernel("matmul_add", {a, b, bias}, {out}, attrs)[0];
  const HostTensor gelu = runKernel("gelu", {sum}, {out}, {stringAttr("approximate", "tanh")})[0];
  EXPECT_EQ(fused[1].values, sum.values);
  EXPECT_EQ(fused[0].values, gelu.values);
  // The GELU did apply: negative pre-activations are pulled toward 0.
  EXPECT_NE(fused[0].values, fused[1].values);
}

INSTANTIATE_TEST_SUITE_P(
    Types, MatmulBiasGeluTest,
    ::testing::Values(MatmulAddCase{plan::F32, plan::F32, false, false},
                      MatmulAddCase{plan::F32, plan::F32, true, true},
                      MatmulAddCase{plan::BF16, plan::F32, false, false},
                      MatmulAddCase{plan::BF16, plan::F32, true, false},
                      MatmulAddCase{plan::BF16, plan::F32, false, true}),
    [](const auto& info) {
      const MatmulAddCase& p = info.param;
      return std::string(p.operands == plan::BF16 ? "bf16" : "f32") + (p.transA ? "_ta" : "") +
             (p.transB ? "_tb" : "");
    });

class MatmulGeluGradTest : public ::testing::TestWithParam<MatmulAddCase> {};

// dz is gelu_grad's (tanh) of the pre-activation z and matmul's product, bit
// for bit, so a plan trains the same with and without the fusion (docs/ops.md
// "Matmul epilogues"). z of a few units spans GELU's curved range, where the
// slope is neither 0 nor 1; a batch of a against one b, each maybe transposed.
TEST_P(MatmulGeluGradTest, BitwiseMatmulThenGeluGrad) {
  const MatmulAddCase p = GetParam();
  std::mt19937 rng(81);
  const int64_t M = 10, K = 23, N = 13;
  const HostTensor a = randomTensor(p.transA ? std::vector<int64_t>{2, K, M} : std::vector<int64_t>{2, M, K},
                                    p.operands, rng, -2.0, 2.0);
  const HostTensor b =
      randomTensor(p.transB ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N}, p.operands, rng, -1.0, 1.0);
  const HostTensor z = randomTensor({2, M, N}, plan::F32, rng, -4.0, 4.0);
  const std::vector<plan::Attribute> attrs = {intAttr("transpose_a", p.transA), intAttr("transpose_b", p.transB)};
  const OutputSpec out = {{2, M, N}, plan::F32};
  const HostTensor fused = runKernel("matmul_gelu_grad", {a, b, z}, {out}, attrs)[0];
  const HostTensor product = runKernel("matmul", {a, b}, {out}, attrs)[0];
  const HostTensor grad = runKernel("gelu_grad", {z, product}, {out}, {stringAttr("approximate", "tanh")})[0];
  EXPECT_EQ(fused.values, grad.values);
  // The slope did apply: dz is not the bare product.
  EXPECT_NE(fused.values, product.values);
}

INSTANTIATE_TEST_SUITE_P(
    Types, MatmulGeluGradTest,
    ::testing::Values(MatmulAddCase{plan::F32, plan::F32, false, false},
                      MatmulAddCase{plan::F32, plan::F32, false, true},
                      MatmulAddCase{plan::F32, plan::F32, true, true},
                      MatmulAddCase{plan::BF16, plan::F32, false, false},
                      MatmulAddCase{plan::BF16, plan::F32, true, true}),
    [](const auto& info) {
      const MatmulAddCase& p = info.param;
      return std::string(p.operands == plan::BF16 ? "bf16" : "f32") + (p.transA ? "_ta" : "") +
             (p.transB ? "_tb" : "");
    });

TEST(MatmulGeluGradErrors, PreActivationAndTypesAreNamed) {
  std::mt19937 rng(83);
  const HostTensor a = randomTensor({4, 3}, plan::F32, rng);
  const HostTensor b = randomTensor({3, 8}, plan::F32, rng);
  const OutputSpec f32 = {{4, 8}, plan::F32};
  EXPECT_EQ(kernelError("matmul_gelu_grad", {a, b, randomTensor({8}, plan::F32, rng)}, {f32}),
            "matmul_gelu_grad: pre-activation z 'in2' has shape [8], expected [4, 8]");
  const HostTensor ad = randomTensor({4, 3}, plan::F64, rng), bd = randomTensor({3, 8}, plan::F64, rng);
  EXPECT_EQ(kernelError("matmul_gelu_grad", {ad, bd, randomTensor({4, 8}, plan::F64, rng)}, {{{4, 8}, plan::F64}}),
            "matmul_gelu_grad: z and dz are f32; got z f64, dz f64");
}

TEST(MatmulBiasGeluErrors, BiasAndTypesAreNamed) {
  std::mt19937 rng(74);
  const HostTensor a = randomTensor({4, 3}, plan::F32, rng);
  const HostTensor b = randomTensor({3, 8}, plan::F32, rng);
  const OutputSpec f32 = {{4, 8}, plan::F32};
  EXPECT_EQ(kernelError("matmul_bias_gelu", {a, b, randomTensor({4, 8}, plan::F32, rng)}, {f32, f32}),
            "matmul_bias_gelu: bias 'in2' has shape [4, 8], expected [8] (the output's last dim)");
  const HostTensor ad = randomTensor({4, 3}, plan::F64, rng), bd = randomTensor({3, 8}, plan::F64, rng);
  const OutputSpec f64 = {{4, 8}, plan::F64};
  EXPECT_EQ(kernelError("matmul_bias_gelu", {ad, bd, randomTensor({8}, plan::F64, rng)}, {f64, f64}),
            "matmul_bias_gelu: the bias, y and z are f32; got bias f64, y f64, z f64");
}

TEST(MatmulAddErrors, AddendShapeAndTypeAreNamed) {
  std::mt19937 rng(72);
  const HostTensor a = randomTensor({4, 3}, plan::F32, rng);
  const HostTensor b = randomTensor({3, 5}, plan::F32, rng);
  EXPECT_EQ(kernelError("matmul_add", {a, b, randomTensor({4}, plan::F32, rng)}, {{{4, 5}, plan::F32}}),
            "matmul_add: addend r 'in2' has shape [4], expected [4, 5] (the output's) or [5] (a bias over its "
            "last dim)");
  EXPECT_EQ(kernelError("matmul_add", {a, b, randomTensor({4, 5}, plan::F64, rng)}, {{{4, 5}, plan::F32}}),
            "matmul_add: addend r is f64, the output f32; they must match");
  const HostTensor ab = randomTensor({4, 3}, plan::BF16, rng), bb = randomTensor({3, 5}, plan::BF16, rng);
  EXPECT_EQ(kernelError("matmul_add", {ab, bb, randomTensor({4, 5}, plan::BF16, rng)}, {{{4, 5}, plan::F32}}),
            "matmul_add: addend r is bf16, the output f32; they must match");
}

}  // namespace
}  // namespace megatrain::runtime::testing
