// AdamWTest.cpp - the host AdamW update against torch.optim.AdamW's formula over three steps.
#include <cmath>

#include <gtest/gtest.h>

#include "TestUtil.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/AdamW.h"

namespace megatrain::runtime::testing {
namespace {

plan::AdamW hyper() {
  plan::AdamW h;
  h.set_lr(0.01);
  h.set_beta1(0.9);
  h.set_beta2(0.95);
  h.set_eps(1e-8);
  h.set_weight_decay(0.1);
  return h;
}

// Runs three steps on `count` elements with the kernel (in T) and with the
// formula (in double, rounding m and v to T where the kernel stores them).
template <typename T>
void checkThreeSteps(plan::DType dtype, double tol) {
  std::mt19937 rng(61);
  std::uniform_real_distribution<double> dist(-1, 1);
  const size_t count = 10;
  std::vector<T> param(count), m(count, 0), v(count, 0), grad(count);
  std::vector<double> refParam(count), refM(count, 0), refV(count, 0);
  for (size_t i = 0; i < count; ++i) refParam[i] = param[i] = static_cast<T>(dist(rng));
  const plan::AdamW h = hyper();
  for (int64_t t = 1; t <= 3; ++t) {
    for (size_t i = 0; i < count; ++i) grad[i] = static_cast<T>(dist(rng));
    adamwUpdate(dtype, param.data(), grad.data(), m.data(), v.data(), count, h, t);
    for (size_t i = 0; i < count; ++i) {
      const double g = grad[i];
      refParam[i] = refParam[i] - h.lr() * h.weight_decay() * refParam[i];
      refM[i] = static_cast<T>(h.beta1() * refM[i] + (1 - h.beta1()) * g);
      refV[i] = static_cast<T>(h.beta2() * refV[i] + (1 - h.beta2()) * g * g);
      const double mHat = refM[i] / (1 - std::pow(h.beta1(), t));
      const double vHat = refV[i] / (1 - std::pow(h.beta2(), t));
      refParam[i] = refParam[i] - h.lr() * mHat / (std::sqrt(vHat) + h.eps());
      // The kernel's param is stored in T each step; so is the reference's.
      refParam[i] = static_cast<T>(refParam[i]);
    }
  }
  for (size_t i = 0; i < count; ++i) {
    EXPECT_NEAR(param[i], refParam[i], tol) << i;
    EXPECT_NEAR(m[i], refM[i], tol) << i;
    EXPECT_NEAR(v[i], refV[i], tol) << i;
  }
  // After three steps of +-1 gradients each parameter moved by about lr per step.
  EXPECT_GT(std::abs(param[0] - static_cast<T>(0)), 0.0);
}

TEST(AdamW, ThreeStepsMatchTheFormulaF64) { checkThreeSteps<double>(plan::F64, 1e-15); }
TEST(AdamW, ThreeStepsMatchTheFormulaF32) { checkThreeSteps<float>(plan::F32, 1e-7); }

TEST(AdamW, FirstStepMovesEachParameterByAboutLr) {
  // With m = v = 0 and no decay, step 1 gives m_hat = g, v_hat = g^2: param -= lr * sign(g).
  plan::AdamW h = hyper();
  h.set_weight_decay(0);
  double param[2] = {1.0, 1.0}, grad[2] = {0.3, -2.0}, m[2] = {0, 0}, v[2] = {0, 0};
  adamwUpdate(plan::F64, param, grad, m, v, 2, h, 1);
  EXPECT_NEAR(param[0], 1.0 - 0.01, 1e-9);
  EXPECT_NEAR(param[1], 1.0 + 0.01, 1e-9);
}

TEST(AdamW, RejectsStepZeroAndIntegerTensors) {
  double x = 0;
  try {
    adamwUpdate(plan::F64, &x, &x, &x, &x, 1, hyper(), 0);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "adamw: step count t must be >= 1, got 0");
  }
  EXPECT_THROW(adamwUpdate(plan::I64, &x, &x, &x, &x, 1, hyper(), 1), Error);
}

}  // namespace
}  // namespace megatrain::runtime::testing
