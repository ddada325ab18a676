// GradClipTest.cpp - per-step lr and global gradient-norm clipping against a hand computation (torch's formula).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>

#include "TestUtil.h"
#include "TinyPlans.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/OnnxWeights.h"

namespace megatrain::runtime::testing {
namespace {

// z = (x A) B, loss = mean(z^2); A [3, 2], B [2, 2]. B's gradient is final
// (and its ADAMW comes) before A's gradient exists, so clipping must defer
// B's update to see A's gradient. With `touchAfterUpdate`, a copy reads B
// between the two updates, which deferring would change.
plan::Plan twoLayerPlan(plan::DType dt, bool touchAfterUpdate = false) {
  PlanBuilder b;
  const uint32_t a = b.tensor("A", {3, 2}, dt, plan::PARAMETER);
  const uint32_t bw = b.tensor("B", {2, 2}, dt, plan::PARAMETER);
  const uint32_t gradA = b.tensor("grad:A", {3, 2}, dt, plan::GRADIENT);
  const uint32_t gradB = b.tensor("grad:B", {2, 2}, dt, plan::GRADIENT);
  const uint32_t mA = b.tensor("adam_m:A", {3, 2}, dt, plan::OPTIMIZER_STATE);
  const uint32_t vA = b.tensor("adam_v:A", {3, 2}, dt, plan::OPTIMIZER_STATE);
  const uint32_t mB = b.tensor("adam_m:B", {2, 2}, dt, plan::OPTIMIZER_STATE);
  const uint32_t vB = b.tensor("adam_v:B", {2, 2}, dt, plan::OPTIMIZER_STATE);
  const uint32_t readout = b.tensor("loss_readout", {}, dt, plan::LOSS_READOUT);
  const uint32_t devA = b.tensor("dev:A", {3, 2}, dt, plan::PARAMETER_COPY);
  const uint32_t devB = b.tensor("dev:B", {2, 2}, dt, plan::PARAMETER_COPY);
  const uint32_t x = b.tensor("x", {4, 3}, dt, plan::INPUT);
  const uint32_t y = b.tensor("y", {4, 2}, dt, plan::ACTIVATION);
  const uint32_t z = b.tensor("z", {4, 2}, dt, plan::ACTIVATION);
  const uint32_t sq = b.tensor("sq", {4, 2}, dt, plan::ACTIVATION);
  const uint32_t loss = b.tensor("loss", {}, dt, plan::LOSS);
  const uint32_t dz = b.tensor("dz", {4, 2}, dt, plan::ACTIVATION);
  const uint32_t dB = b.tensor("dB", {2, 2}, dt, plan::ACTIVATION);
  const uint32_t dy = b.tensor("dy", {4, 2}, dt, plan::ACTIVATION);
  const uint32_t dA = b.tensor("dA", {3, 2}, dt, plan::ACTIVATION);
  const uint32_t spy = touchAfterUpdate ? b.tensor("spy", {2, 2}, dt, plan::ACTIVATION) : 0;

  b.copy(a, devA, "compute");
  b.copy(bw, devB, "compute");
  b.kernel("matmul", {x, devA}, {y});
  b.kernel("matmul", {y, devB}, {z});
  b.kernel("mul", {z, z}, {sq});
  b.kernel("reduce_mean", {sq}, {loss}, {intsAttr("axes", {0, 1}), intAttr("keepdims", 0)});
  b.copy(loss, readout, "compute");
  b.record("loss_ready", "compute");
  b.wait("loss_ready", "host");
  b.readLoss(readout);
  b.kernel("scale", {z}, {dz}, {floatAttr("alpha", 2.0 / 8)});  // d mean(z^2) / dz
  b.kernel("matmul", {y, dz}, {dB}, {intAttr("transpose_a", 1)});
  b.copy(dB, gradB, "compute");
  b.record("grad_b_ready", "compute");
  b.wait("grad_b_ready", "host");
  b.adamw(bw, gradB, mB, vB);
  if (touchAfterUpdate) {
    b.record("b_updated", "host");
    b.wait("b_updated", "compute");
    b.copy(bw, spy, "compute");
  }
  b.kernel("matmul", {dz, devB}, {dy}, {intAttr("transpose_b", 1)});
  b.kernel("matmul", {x, dy}, {dA}, {intAttr("transpose_a", 1)});
  b.copy(dA, gradA, "compute");
  b.record("grad_a_ready", "compute");
  b.wait("grad_a_ready", "host");
  b.adamw(a, gradA, mA, vA);
  return b.build();
}

class GradClipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = makeTempDir();
    std::mt19937 rng(101);
    a_ = randomTensor({3, 2}, plan::F64, rng);
    b_ = randomTensor({2, 2}, plan::F64, rng);
    x_ = randomTensor({4, 3}, plan::F64, rng, -2, 2);
    writeModel(dir_ + "/f64.onnx", {{"A", a_}, {"B", b_}});
    HostTensor a32 = a_, b32 = b_;
    a32.dtype = b32.dtype = plan::F32;
    writeModel(dir_ + "/f32.onnx", {{"A", a32}, {"B", b32}});
  }

  std::unique_ptr<Executor> makeExecutor(plan::DType dt, bool touchAfterUpdate = false) {
    auto executor = std::make_unique<Executor>(twoLayerPlan(dt, touchAfterUpdate), std::make_unique<CpuBackend>());
    executor->loadWeights(OnnxWeights(dir_ + (dt == plan::F32 ? "/f32.onnx" : "/f64.onnx")));
    HostArray x = HostArray::zeros(ElementType::F64, {4, 3});
    for (int i = 0; i < 12; ++i) x.data<double>()[i] = x_.values[i];
    executor->setInput("x", x);
    return executor;
  }

  std::string dir_;
  HostTensor a_, b_, x_;
};

// F64, so the hand computation below is the same arithmetic: the norm over
// B's then A's gradient (the plan's ADAMW order), torch's coefficient, the
// scaled gradients, and one AdamW step at an lr that is not the plan's.
TEST_F(GradClipTest, ClippedStepMatchesHandComputation) {
  auto reference = makeExecutor(plan::F64);
  const StepResult plain = reference->runStep(StepOptions{});
  EXPECT_TRUE(std::isnan(plain.gradNorm));
  EXPECT_EQ(plain.lr, 1e-2);
  const std::vector<double> gA = reference->readTensor("grad:A"), gB = reference->readTensor("grad:B");
  double sum = 0;
  for (double g : gB) sum += g * g;
  for (double g : gA) sum += g * g;
  const double norm = std::sqrt(sum);
  const double maxNorm = norm / 4;
  const double coef = maxNorm / (norm + 1e-6);  // torch.nn.utils.clip_grad_norm_

  auto clipped = makeExecutor(plan::F64);
  StepOptions options;
  options.lr = 0.05;
  options.clipGradNorm = maxNorm;
  const StepResult result = clipped->runStep(options);
  EXPECT_EQ(result.loss, plain.loss);  // the forward does not change
  EXPECT_EQ(result.gradNorm, norm);
  EXPECT_EQ(result.lr, 0.05);

  const plan::AdamW& h = clipped->plan().header().optimizer();
  auto check = [&](const std::string& name, const HostTensor& initial, const std::vector<double>& grads) {
    const std::vector<double> g = clipped->readTensor("grad:" + name);
    const std::vector<double> p = clipped->readTensor(name);
    for (size_t i = 0; i < grads.size(); ++i) {
      const double scaled = grads[i] * coef;
      EXPECT_EQ(g[i], scaled) << name << "[" << i << "]: the gradient is clipped in place";
      const double m = (1 - h.beta1()) * scaled, v = (1 - h.beta2()) * scaled * scaled;
      const double mHat = m / (1 - h.beta1()), vHat = v / (1 - h.beta2());
      double expected = initial.values[i] - 0.05 * h.weight_decay() * initial.values[i];
      expected -= 0.05 * mHat / (std::sqrt(vHat) + h.eps());
      EXPECT_NEAR(p[i], expected, 1e-15) << name << "[" << i << "]";
    }
  };
  check("A", a_, gA);
  check("B", b_, gB);
}

// A bound above the norm changes nothing, bit for bit, over several steps;
// one below it scales each f32 gradient to float(g * coef).
TEST_F(GradClipTest, LooseBoundIsANoOpAndTightBoundScalesF32Gradients) {
  auto plain = makeExecutor(plan::F32), loose = makeExecutor(plan::F32);
  StepOptions looseOptions;
  looseOptions.clipGradNorm = 1e9;
  for (int step = 0; step < 3; ++step) {
    const double a = plain->runStep();
    const StepResult b = loose->runStep(looseOptions);
    EXPECT_EQ(std::memcmp(&a, &b.loss, sizeof a), 0);
    EXPECT_GT(b.gradNorm, 0);
  }
  for (const char* name : {"A", "B", "adam_m:A", "adam_v:B"}) EXPECT_EQ(plain->readBytes(name), loose->readBytes(name));

  auto reference = makeExecutor(plan::F32), tight = makeExecutor(plan::F32);
  reference->runStep();
  StepOptions tightOptions;
  tightOptions.clipGradNorm = 0.01;
  const StepResult result = tight->runStep(tightOptions);
  const double coef = 0.01 / (result.gradNorm + 1e-6);
  ASSERT_LT(coef, 1.0);
  for (const char* name : {"grad:A", "grad:B"}) {
    const std::vector<double> g = reference->readTensor(name), clipped = tight->readTensor(name);
    for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(clipped[i], static_cast<float>(g[i] * coef)) << name;
  }
}

TEST_F(GradClipTest, PlanThatUsesAParameterAfterItsUpdateRefusesClipping) {
  auto executor = makeExecutor(plan::F32, true);
  executor->runStep();  // without clipping the plan is fine
  StepOptions options;
  options.clipGradNorm = 1.0;
  try {
    executor->runStep(options);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "gradient clipping needs every gradient before any AdamW update, but step 18 (copy) uses 'B' after "
              "its update at step 15");
  }
  options.clipGradNorm = 0.0;
  EXPECT_THROW(makeExecutor(plan::F32)->runStep(options), Error);
}

}  // namespace
}  // namespace megatrain::runtime::testing
