// MatmulBiasGeluTest.cpp - the GELU epilogues on the CUDA backend against their CPU twins: matmul_bias_gelu (cuBLASLt's GELU_AUX_BIAS epilogue, or the bias form and gelu's kernel) and matmul_gelu_grad (its DGELU epilogue, or the plain form and gelu_grad's kernel).
//
// The CPU twin writes z = matmul_add(a, b, bias) and y = gelu_tanh(z) with
// the bits of the unfused pair; the CUDA step differs from it by the fp32
// accumulation order in z (as matmul_add does) and, where the epilogue runs,
// by cuBLASLt's own tanh GELU in y. Shapes are not tile multiples; those
// whose n is a multiple of 8 take the epilogue (its aux matrix's leading
// dimension must be), the others the bias form into z and gelu's kernel into
// y, which must then be bit for bit the gelu kernel's on that z.
// MEGATRAIN_MATMUL_LOG=1 is set, so the output shows which way each step went.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "CudaBackend.h"
#include "CudaHarness.h"
#include "megatrain/runtime/CpuBackend.h"

namespace megatrain::runtime::testing {
namespace {

// Every element of `actual` within tol * (|expected| + max |expected|); names the first that is not.
::testing::AssertionResult near(const std::vector<double>& actual, const std::vector<double>& expected, double tol,
                                const char* what) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure() << what << ": " << actual.size() << " elements, expected "
                                         << expected.size();
  double scale = 0;
  for (double v : expected) scale = std::max(scale, std::abs(v));
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < actual.size(); ++i)
    if (!(std::abs(actual[i] - expected[i]) <= tol * (std::abs(expected[i]) + scale)) && bad++ == 0) first = i;
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << bad << " of " << actual.size()
                                       << " elements off; first at " << first << ": cuda " << actual[first]
                                       << ", cpu " << expected[first] << " (tolerance " << tol << " of scale "
                                       << scale << ")";
}

class CudaMatmulBiasGelu : public ::testing::Test {
 protected:
  CudaMatmulBiasGelu() : seed_(testSeed()), rng_(seed_), log_("MEGATRAIN_MATMUL_LOG", "1") {}

  // The fused step of shape s with fresh operands (bf16 operands under
  // precision "bf16", else f32 ones) on the CPU and on the GPU.
  void expectNearCpu(const MatmulShape& s, plan::DType operands) {
    const std::vector<int64_t> y = matmulResult(s);
    std::vector<plan::Attribute> attrs = {intAttr("transpose_a", s.transA), intAttr("transpose_b", s.transB)};
    if (operands == plan::BF16) attrs.push_back(stringAttr("precision", "bf16"));
    // Operands of a few units and a bias put z on both sides of 0 and into GELU's curve.
    const KernelCase c{"matmul_bias_gelu",
                       {randomTensor(s.a, operands, rng_, -1.0, 1.0), randomTensor(s.b, operands, rng_, -1.0, 1.0),
                        randomTensor({y.back()}, plan::F32, rng_, -2.0, 2.0)},
                       {{y, plan::F32}, {y, plan::F32}},
                       attrs};
    CpuBackend cpu;
    const std::vector<HostTensor> expected = runCase(cpu, oneKernelPlan(c), c);
    const std::vector<HostTensor> actual = runCase(cudaBackend(), oneKernelPlan(c), c);
    // z: matmul_add's tolerance (1e-5 f32, 1e-3 for bf16 operands, whose
    // products the CPU widens exactly too). y: that, plus cuBLASLt's own
    // tanh, which may be a hardware approximation (about 2^-11 relative):
    // 0.5 |z| times that error, within 1e-3 of the output's scale.
    const double zTol = operands == plan::BF16 ? 1e-3 : 1e-5;
    EXPECT_TRUE(near(actual[1].values, expected[1].values, zTol, "z"))
        << describe(c) << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
    EXPECT_TRUE(near(actual[0].values, expected[0].values, zTol + 1e-3, "y"))
        << describe(c) << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
  }

  uint32_t seed_;
  std::mt19937 rng_;
  ScopedEnv log_;
};

// n a multiple of 8 (the GELU epilogue) and not (the bias form and gelu's
// kernel), every transpose, and each batch form matmul.cpp distinguishes.
const MatmulShape kShapes[] = {
    {{77, 130}, {130, 64}, false, false},
    {{130, 77}, {64, 130}, true, true},
    {{77, 130}, {72, 130}, false, true},
    {{130, 77}, {130, 40}, true, false},
    {{77, 130}, {130, 61}, false, false},              // n = 61: no GELU epilogue
    {{2, 3, 77, 64}, {64, 256}, false, false},         // GPT-2's c_fc: a batch against one weight, folded
    {{4, 33, 65}, {4, 65, 24}, false, false},          // equal batches: one strided call (aux batch stride)
    {{2, 1, 33, 65}, {1, 3, 65, 16}, false, false},    // both broadcast: walked on the host (aux per call)
    {{2, 1, 33, 65}, {1, 3, 65, 13}, false, false},    // the same with n = 13
    {{256, 768}, {768, 3072}, false, false},           // GPT-2 small's MLP, tokens cut to 256
};

TEST_F(CudaMatmulBiasGelu, F32MatchesTheCpuTwin) {
  for (const MatmulShape& s : kShapes) expectNearCpu(s, plan::F32);
}

TEST_F(CudaMatmulBiasGelu, Bf16OperandsMatchTheCpuTwin) {
  for (const MatmulShape& s : kShapes) expectNearCpu(s, plan::BF16);
}

// Where cuBLASLt takes no GELU form (n not a multiple of 8), y is gelu's
// kernel on the z the step wrote: bit for bit the gelu step's output on it.
TEST_F(CudaMatmulBiasGelu, OddWidthIsTheGeluKernelOnItsPreActivation) {
  const MatmulShape s{{2, 45, 70}, {70, 37}, false, false};
  const std::vector<int64_t> shape = matmulResult(s);
  const HostTensor a = randomTensor(s.a, plan::F32, rng_), b = randomTensor(s.b, plan::F32, rng_);
  const HostTensor bias = randomTensor({shape.back()}, plan::F32, rng_, -2.0, 2.0);
  PlanBuilder builder;
  const uint32_t ta = builder.tensor("a", s.a, plan::F32, plan::ACTIVATION);
  const uint32_t tb = builder.tensor("b", s.b, plan::F32, plan::ACTIVATION);
  const uint32_t tbias = builder.tensor("bias", {shape.back()}, plan::F32, plan::ACTIVATION);
  const uint32_t ty = builder.tensor("y", shape, plan::F32, plan::ACTIVATION);
  const uint32_t tz = builder.tensor("z", shape, plan::F32, plan::ACTIVATION);
  const uint32_t tg = builder.tensor("g", shape, plan::F32, plan::ACTIVATION);
  const uint32_t steps[] = {builder.kernel("matmul_bias_gelu", {ta, tb, tbias}, {ty, tz}),
                            builder.kernel("gelu", {tz}, {tg}, {stringAttr("approximate", "tanh")})};
  const plan::Plan plan = builder.build();
  std::unique_ptr<Backend> backend = makeCudaBackend();
  backend->prepare(plan);
  for (const auto& [id, tensor] : {std::pair{ta, &a}, std::pair{tb, &b}, std::pair{tbias, &bias}}) {
    const std::vector<std::byte> bytes = encode(*tensor);
    backend->write(plan.tensors(static_cast<int>(id)), bytes.data(), bytes.size());
  }
  for (uint32_t step : steps) backend->launchKernel(step);
  backend->synchronize();
  std::vector<float> y(static_cast<size_t>(a.elements() / 70 * 37)), g(y.size());
  backend->read(plan.tensors(static_cast<int>(ty)), y.data(), y.size() * sizeof(float));
  backend->read(plan.tensors(static_cast<int>(tg)), g.data(), g.size() * sizeof(float));
  size_t differ = 0;
  for (size_t i = 0; i < y.size(); ++i) differ += std::memcmp(&y[i], &g[i], sizeof(float)) != 0;
  EXPECT_EQ(differ, 0u) << "of " << y.size() << " elements (MEGATRAIN_TEST_SEED=" << seed_ << ")";
}

// The kernel's rule refuses an f64 step and a bias of another shape at prepare.
TEST_F(CudaMatmulBiasGelu, RefusalsAreNamed) {
  const HostTensor a = randomTensor({4, 5}, plan::F64, rng_), b = randomTensor({5, 8}, plan::F64, rng_);
  const std::string f64 =
      cudaError({"matmul_bias_gelu", {a, b, randomTensor({8}, plan::F64, rng_)}, {{{4, 8}, plan::F64}, {{4, 8}, plan::F64}}});
  EXPECT_NE(f64.find("the bias, y and z are f32"), std::string::npos) << f64;
  const HostTensor af = randomTensor({4, 5}, plan::F32, rng_), bf = randomTensor({5, 8}, plan::F32, rng_);
  const std::string bias =
      cudaError({"matmul_bias_gelu", {af, bf, randomTensor({4}, plan::F32, rng_)}, {{{4, 8}, plan::F32}, {{4, 8}, plan::F32}}});
  EXPECT_NE(bias.find("expected [8] (the output's last dim)"), std::string::npos) << bias;
}

// matmul_gelu_grad: the CPU twin writes dz = product * gelu_tanh'(z) with
// the bits of matmul then gelu_grad; the CUDA step differs from it by the
// fp32 accumulation order of the product (as matmul does) and, where the
// DGELU epilogue runs (n a multiple of 8), by cuBLASLt's own evaluation of
// the slope; elsewhere dz is the plain form's product scaled in place by
// gelu_grad's kernel.
class CudaMatmulGeluGrad : public ::testing::Test {
 protected:
  CudaMatmulGeluGrad() : seed_(testSeed()), rng_(seed_), log_("MEGATRAIN_MATMUL_LOG", "1") {}

  void expectNearCpu(const MatmulShape& s, plan::DType operands) {
    const std::vector<int64_t> shape = matmulResult(s);
    std::vector<plan::Attribute> attrs = {intAttr("transpose_a", s.transA), intAttr("transpose_b", s.transB)};
    if (operands == plan::BF16) attrs.push_back(stringAttr("precision", "bf16"));
    // Pre-activations of a few units: the slope's curved range on both sides of 0.
    const KernelCase c{"matmul_gelu_grad",
                       {randomTensor(s.a, operands, rng_, -1.0, 1.0), randomTensor(s.b, operands, rng_, -1.0, 1.0),
                        randomTensor(shape, plan::F32, rng_, -3.0, 3.0)},
                       {{shape, plan::F32}},
                       attrs};
    CpuBackend cpu;
    const std::vector<HostTensor> expected = runCase(cpu, oneKernelPlan(c), c);
    const std::vector<HostTensor> actual = runCase(cudaBackend(), oneKernelPlan(c), c);
    // The product within matmul's tolerance (1e-5 f32, 1e-3 for bf16
    // operands), times a slope of at most about 1.13; plus cuBLASLt's own
    // slope, whose tanh may be a hardware approximation (about 2^-11
    // relative): the slope off by up to about 2e-3 where |z| is near 1 to 2,
    // times the product, within 3e-3 of the output's scale.
    const double productTol = operands == plan::BF16 ? 1e-3 : 1e-5;
    EXPECT_TRUE(near(actual[0].values, expected[0].values, 1.2 * productTol + 3e-3, "dz"))
        << describe(c) << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
  }

  uint32_t seed_;
  std::mt19937 rng_;
  ScopedEnv log_;
};

TEST_F(CudaMatmulGeluGrad, F32MatchesTheCpuTwin) {
  for (const MatmulShape& s : kShapes) expectNearCpu(s, plan::F32);
}

TEST_F(CudaMatmulGeluGrad, Bf16OperandsMatchTheCpuTwin) {
  for (const MatmulShape& s : kShapes) expectNearCpu(s, plan::BF16);
}

// Where cuBLASLt takes no DGELU form (n not a multiple of 8), dz is the
// plain form's product, which the unfused matmul step of the same form (the
// same cached algorithm: both results sit at 256-byte aligned arena
// offsets) writes too, scaled by gelu_grad's kernel: bit for bit the
// gelu_grad step's output on that product.
TEST_F(CudaMatmulGeluGrad, OddWidthIsTheGeluGradKernelOnTheProduct) {
  const MatmulShape s{{2, 45, 70}, {37, 70}, false, true};
  const std::vector<int64_t> shape = matmulResult(s);
  const HostTensor a = randomTensor(s.a, plan::F32, rng_), b = randomTensor(s.b, plan::F32, rng_);
  const HostTensor z = randomTensor(shape, plan::F32, rng_, -3.0, 3.0);
  PlanBuilder builder;
  const uint32_t ta = builder.tensor("a", s.a, plan::F32, plan::ACTIVATION);
  const uint32_t tb = builder.tensor("b", s.b, plan::F32, plan::ACTIVATION);
  const uint32_t tz = builder.tensor("z", shape, plan::F32, plan::ACTIVATION);
  const uint32_t tdz = builder.tensor("dz", shape, plan::F32, plan::ACTIVATION);
  const uint32_t tp = builder.tensor("p", shape, plan::F32, plan::ACTIVATION);
  const uint32_t tg = builder.tensor("g", shape, plan::F32, plan::ACTIVATION);
  const std::vector<plan::Attribute> attrs = {intAttr("transpose_b", 1)};
  const uint32_t steps[] = {builder.kernel("matmul_gelu_grad", {ta, tb, tz}, {tdz}, attrs),
                            builder.kernel("matmul", {ta, tb}, {tp}, attrs),
                            builder.kernel("gelu_grad", {tz, tp}, {tg}, {stringAttr("approximate", "tanh")})};
  const plan::Plan plan = builder.build();
  std::unique_ptr<Backend> backend = makeCudaBackend();
  backend->prepare(plan);
  for (const auto& [id, tensor] : {std::pair{ta, &a}, std::pair{tb, &b}, std::pair{tz, &z}}) {
    const std::vector<std::byte> bytes = encode(*tensor);
    backend->write(plan.tensors(static_cast<int>(id)), bytes.data(), bytes.size());
  }
  for (uint32_t step : steps) backend->launchKernel(step);
  backend->synchronize();
  std::vector<float> dz(static_cast<size_t>(z.elements())), g(dz.size());
  backend->read(plan.tensors(static_cast<int>(tdz)), dz.data(), dz.size() * sizeof(float));
  backend->read(plan.tensors(static_cast<int>(tg)), g.data(), g.size() * sizeof(float));
  size_t differ = 0, scaled = 0;
  for (size_t i = 0; i < dz.size(); ++i) {
    differ += std::memcmp(&dz[i], &g[i], sizeof(float)) != 0;
    scaled += dz[i] != 0;
  }
  EXPECT_EQ(differ, 0u) << "of " << dz.size() << " elements (MEGATRAIN_TEST_SEED=" << seed_ << ")";
  EXPECT_GT(scaled, dz.size() / 2) << "dz is mostly zero";
}

// The kernel's rule refuses an f64 step and a pre-activation of another shape at prepare.
TEST_F(CudaMatmulGeluGrad, RefusalsAreNamed) {
  const HostTensor a = randomTensor({4, 5}, plan::F64, rng_), b = randomTensor({5, 8}, plan::F64, rng_);
  const std::string f64 =
      cudaError({"matmul_gelu_grad", {a, b, randomTensor({4, 8}, plan::F64, rng_)}, {{{4, 8}, plan::F64}}});
  EXPECT_NE(f64.find("z and dz are f32"), std::string::npos) << f64;
  const HostTensor af = randomTensor({4, 5}, plan::F32, rng_), bf = randomTensor({5, 8}, plan::F32, rng_);
  const std::string z =
      cudaError({"matmul_gelu_grad", {af, bf, randomTensor({8, 4}, plan::F32, rng_)}, {{{4, 8}, plan::F32}}});
  EXPECT_NE(z.find("pre-activation z 'in2' has shape [8, 4], expected [4, 8]"), std::string::npos) << z;
}

}  // namespace
}  // namespace megatrain::runtime::testing
