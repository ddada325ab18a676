// FusedKernelTest.cpp - the fused kernels (rms_norm, silu, swiglu, gelu and their gradients) on CUDA
// against their CPU twins on fresh random inputs, f32 and f64, several shapes; rms_norm_grad_add
// also against the unfused kernels on CUDA, bit for bit.
//
// rms_norm shapes reach a warp per short row and per long row, the column
// sums of dweight in one split and in many (many rows, few columns), and an
// axis over two dims; the activations run over sizes that do and do not
// fill whole blocks, with inputs wide enough to saturate sigmoid and tanh.
#include <random>

#include <gtest/gtest.h>

#include "CudaHarness.h"

namespace megatrain::runtime::testing {
namespace {

using Shape = std::vector<int64_t>;
constexpr plan::DType kFloatTypes[] = {plan::F32, plan::F64};

class FusedCudaKernels : public ::testing::Test {
 protected:
  FusedCudaKernels() : seed_(testSeed()), rng_(seed_) {}

  void check(const KernelCase& c, double tol = 0) {
    EXPECT_TRUE(cudaMatchesCpu(c, tol)) << describe(c) << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
  }

  HostTensor uniform(const Shape& shape, plan::DType dtype, double lo = -2.0, double hi = 2.0) {
    return randomTensor(shape, dtype, rng_, lo, hi);
  }

  std::vector<HostTensor> onCuda(const KernelCase& c) { return runCase(cudaBackend(), oneKernelPlan(c), c); }

  uint32_t seed_;
  std::mt19937 rng_;
};

// rms_norm_grad's tolerance against the CPU twin for x in [-3, 5). A row of
// one element is ill-conditioned: dx = g w rstd eps / (x^2 + eps) comes out
// of a difference whose terms are (x^2 + eps) / eps times larger, up to 2.5e7
// for |x| <= 5, so f64 rounding (1.1e-16 of the terms) reaches 2.8e-9 of dx
// in either backend: its bound is 2.5e-8 (the f32 kernel computes that
// difference in double).
double rmsNormGradTol(plan::DType dtype, const Shape& normalized) {
  if (dtype == plan::F32) return 2e-5;
  return normalized.size() == 1 && normalized[0] == 1 ? 2.5e-8 : 1e-11;
}

TEST_F(FusedCudaKernels, RmsNormAndGrad) {
  const std::pair<Shape, int64_t> cases[] = {{{6, 32}, 1},   {{2, 3, 40}, 2}, {{4, 1000}, 1},
                                             {{4096, 64}, 1}, {{5, 7}, 0},     {{3, 1}, 1},
                                             {{2, 3, 8}, 1}};
  for (plan::DType dt : kFloatTypes)
    for (const auto& [shape, axis] : cases) {
      const Shape normalized(shape.begin() + axis, shape.end());
      const auto attrs = std::vector<plan::Attribute>{intAttr("axis", axis), floatAttr("epsilon", 1e-6)};
      check({"rms_norm", {uniform(shape, dt, -3, 5), uniform(normalized, dt)}, {{shape, dt}}, attrs});
      check({"rms_norm_grad",
             {uniform(shape, dt, -3, 5), uniform(normalized, dt), uniform(shape, dt)},
             {{shape, dt}, {normalized, dt}},
             attrs},
            rmsNormGradTol(dt, normalized));
    }
}

// The register path (a block per row, runtime/cuda/RowNorm.cuh) at every
// packs-per-thread count, 16-byte and element-wide accesses (d not a multiple
// of 4 f32 or 2 f64), more rows than blocks and not a multiple of them, one
// row, tiny rows; and rows past its limit (8,192 f32, 4,096 f64, 2,048 when
// d is not a multiple of 4 or 2: the warp-per-row path). Hidden sizes 2048 to
// 8192 as in Llama models.
TEST_F(FusedCudaKernels, RmsNormRowPaths) {
  const Shape cases[] = {{1237, 2048}, {301, 4096}, {67, 8192}, {9, 8196}, {3, 16388}, {1237, 2047},
                         {517, 1001},  {300, 301},  {7, 4097}, {5000, 64}, {1, 2048},  {4, 30}};
  for (plan::DType dt : kFloatTypes)
    for (const Shape& shape : cases) {
      const Shape normalized = {shape[1]};
      const auto attrs = std::vector<plan::Attribute>{intAttr("axis", 1), floatAttr("epsilon", 1e-6)};
      check({"rms_norm", {uniform(shape, dt, -3, 5), uniform(normalized, dt)}, {{shape, dt}}, attrs});
      check({"rms_norm_grad",
             {uniform(shape, dt, -3, 5), uniform(normalized, dt), uniform(shape, dt)},
             {{shape, dt}, {normalized, dt}},
             attrs},
            rmsNormGradTol(dt, normalized));
    }
}

// rms_norm with a bf16 result (mt-fold-norm-casts) on both row paths
// (register: d up to 8,192, 16-byte and element-wide; warp per row past it):
// bit for bit the CUDA f32 result cast to bf16 by the cast kernel, and
// within a bf16 rounding of the CPU twin.
TEST_F(FusedCudaKernels, RmsNormBf16ResultIsTheCastOfF32) {
  const Shape cases[] = {{1237, 2048}, {301, 4096}, {517, 1001}, {3, 16388}, {4, 30}};
  for (const Shape& shape : cases) {
    const auto attrs = std::vector<plan::Attribute>{intAttr("axis", 1), floatAttr("epsilon", 1e-6)};
    const HostTensor x = uniform(shape, plan::F32, -3, 5), w = uniform({shape[1]}, plan::F32);
    const KernelCase f32{"rms_norm", {x, w}, {{shape, plan::F32}}, attrs};
    const std::vector<HostTensor> y32 = runCase(cudaBackend(), oneKernelPlan(f32), f32);
    ASSERT_EQ(y32.size(), 1u);
    const KernelCase cast{"cast", {y32[0]}, {{shape, plan::BF16}}, {}};
    const std::vector<HostTensor> casted = runCase(cudaBackend(), oneKernelPlan(cast), cast);
    const KernelCase bf16{"rms_norm", {x, w}, {{shape, plan::BF16}}, attrs};
    const std::vector<HostTensor> y16 = runCase(cudaBackend(), oneKernelPlan(bf16), bf16);
    ASSERT_EQ(y16.size(), 1u);
    EXPECT_EQ(y16[0].values, casted[0].values) << describe(bf16) << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
    check(bf16, 8e-3);
  }
}

// rms_norm_grad_add on both row paths (register: the Llama row of 2048,
// 16-byte and element-wide accesses, d = 1, an axis over two dims; warp per
// row past 8,192 f32 elements, or 2,048 when d is odd), f32 with and without
// dx_bf16 and f64: bit for bit what rms_norm_grad, add and cast write on
// CUDA (dweight included: the same blocks sum it), and within
// rms_norm_grad's tolerances of the CPU twin (dx_bf16 within a bf16 rounding).
TEST_F(FusedCudaKernels, RmsNormGradAddIsTheUnfusedKernels) {
  const std::pair<Shape, int64_t> cases[] = {{{2, 33, 2048}, 2}, {{9, 8196}, 1}, {{517, 1001}, 1},
                                             {{7, 4097}, 1},     {{3, 1}, 1},     {{2, 3, 40}, 1}};
  for (plan::DType dt : kFloatTypes)
    for (const auto& [shape, axis] : cases)
      for (bool bf16Copy : {false, true}) {
        if (bf16Copy && dt != plan::F32) continue;
        const Shape normalized(shape.begin() + axis, shape.end());
        const auto attrs = std::vector<plan::Attribute>{intAttr("axis", axis), floatAttr("epsilon", 1e-6)};
        const HostTensor x = uniform(shape, dt, -3, 5), w = uniform(normalized, dt), dy = uniform(shape, dt),
                         addend = uniform(shape, dt);
        const std::vector<HostTensor> grads =
            onCuda({"rms_norm_grad", {x, w, dy}, {{shape, dt}, {normalized, dt}}, attrs});
        const HostTensor sum = onCuda({"add", {addend, grads[0]}, {{shape, dt}}, {}})[0];
        KernelCase fused{"rms_norm_grad_add", {x, w, dy, addend}, {{shape, dt}, {normalized, dt}}, attrs};
        if (bf16Copy) fused.outputs.push_back({shape, plan::BF16});
        const std::vector<HostTensor> out = onCuda(fused);
        const std::string what = describe(fused) + " (MEGATRAIN_TEST_SEED=" + std::to_string(seed_) + ")";
        expectSameBits(out[0].values, sum.values, what + ": dx");
        expectSameBits(out[1].values, grads[1].values, what + ": dweight");
        if (bf16Copy)
          expectSameBits(out[2].values, onCuda({"cast", {sum}, {{shape, plan::BF16}}, {}})[0].values,
                         what + ": dx_bf16");
        check(fused, bf16Copy ? 8e-3 : rmsNormGradTol(dt, normalized));
      }
}

TEST_F(FusedCudaKernels, SiluSwigluAndGrads) {
  for (plan::DType dt : kFloatTypes)
    for (const Shape& shape : {Shape{1}, Shape{1000}, Shape{17, 33}, Shape{4, 256, 129}}) {
      check({"silu", {uniform(shape, dt, -40, 40)}, {{shape, dt}}});
      check({"silu_grad", {uniform(shape, dt, -40, 40), uniform(shape, dt)}, {{shape, dt}}});
      check({"swiglu", {uniform(shape, dt, -40, 40), uniform(shape, dt)}, {{shape, dt}}});
      check({"swiglu_grad", {uniform(shape, dt, -40, 40), uniform(shape, dt), uniform(shape, dt)},
             {{shape, dt}, {shape, dt}}});
    }
}

TEST_F(FusedCudaKernels, GeluBothFormsAndGrads) {
  for (plan::DType dt : kFloatTypes)
    for (const Shape& shape : {Shape{1}, Shape{1000}, Shape{17, 33}, Shape{4, 256, 129}})
      for (const char* form : {"none", "tanh"}) {
        const auto attrs = std::vector<plan::Attribute>{stringAttr("approximate", form)};
        check({"gelu", {uniform(shape, dt, -10, 10)}, {{shape, dt}}, attrs});
        check({"gelu_grad", {uniform(shape, dt, -10, 10), uniform(shape, dt)}, {{shape, dt}}, attrs});
      }
}

}  // namespace
}  // namespace megatrain::runtime::testing
