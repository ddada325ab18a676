// PrecisionPlanTest.cpp - a bf16 plan by hand (--precision bf16): the parameter is fetched
// from its host PARAMETER_COMPUTE copy, the ADAMW's fifth tensor; the runtime fills that copy
// from the master and the update rewrites it; validator and verifier rejections.
#include <cmath>
#include <functional>

#include <gtest/gtest.h>

#include "TestUtil.h"
#include "TinyPlans.h"
#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/FormatVersion.h"
#include "megatrain/plan/PlanVerifier.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/HostArray.h"
#include "megatrain/runtime/OnnxWeights.h"
#include "megatrain/runtime/PlanLoader.h"

namespace megatrain::runtime::testing {
namespace {

// linearPlan (TinyPlans.cpp) in bf16: y = bf16(x) bf16(W) in fp32, loss = mean(y^2),
// dW = x^T (2 y / 8) in f32, then AdamW on the f32 master that also rewrites compute:W.
plan::Plan bf16LinearPlan() {
  PlanBuilder b;
  b.plan().mutable_header()->set_source_model("linear.onnx");
  b.plan().mutable_header()->set_precision("bf16");
  const uint32_t w = b.tensor("W", {3, 2}, plan::F32, plan::PARAMETER);
  const uint32_t gradW = b.tensor("grad:W", {3, 2}, plan::F32, plan::GRADIENT);
  const uint32_t m = b.tensor("adam_m:W", {3, 2}, plan::F32, plan::OPTIMIZER_STATE);
  const uint32_t v = b.tensor("adam_v:W", {3, 2}, plan::F32, plan::OPTIMIZER_STATE);
  const uint32_t computeW = b.tensor("compute:W", {3, 2}, plan::BF16, plan::PARAMETER_COMPUTE);
  b.plan().mutable_tensors(static_cast<int>(computeW))->set_source("W");
  const uint32_t readout = b.tensor("loss_readout", {}, plan::F32, plan::LOSS_READOUT);
  const uint32_t devW = b.tensor("dev:W", {3, 2}, plan::BF16, plan::PARAMETER_COPY);
  const uint32_t x = b.tensor("x", {4, 3}, plan::F32, plan::INPUT);
  const uint32_t xb = b.tensor("xb", {4, 3}, plan::BF16, plan::ACTIVATION);
  const uint32_t y = b.tensor("y", {4, 2}, plan::F32, plan::ACTIVATION);
  const uint32_t sq = b.tensor("sq", {4, 2}, plan::F32, plan::ACTIVATION);
  const uint32_t loss = b.tensor("loss", {}, plan::F32, plan::LOSS);
  const uint32_t dloss = b.tensor("dloss", {}, plan::F32, plan::ACTIVATION);
  const uint32_t dsq = b.tensor("dsq", {4, 2}, plan::F32, plan::ACTIVATION);
  const uint32_t dy = b.tensor("dy", {4, 2}, plan::F32, plan::ACTIVATION);
  const uint32_t dW = b.tensor("dW", {3, 2}, plan::F32, plan::ACTIVATION);

  b.copy(computeW, devW, "h2d");                                              // 0
  b.record("w_ready", "h2d");                                                 // 1
  b.wait("w_ready", "compute");                                               // 2
  b.kernel("cast", {x}, {xb});                                                // 3
  b.kernel("matmul", {xb, devW}, {y}, {stringAttr("precision", "bf16")});     // 4
  b.kernel("mul", {y, y}, {sq});                                              // 5
  b.kernel("reduce_mean", {sq}, {loss}, {intsAttr("axes", {0, 1}), intAttr("keepdims", 0)});  // 6
  b.readLossThroughD2h(loss, readout);                                        // 7-12
  b.kernel("fill", {}, {dloss}, {floatAttr("value", 2.0 / 8)});               // 13
  b.kernel("broadcast_to", {dloss}, {dsq});                                   // 14
  b.kernel("mul", {dsq, y}, {dy});                                            // 15: 2 y / 8
  b.kernel("matmul", {x, dy}, {dW}, {intAttr("transpose_a", 1)});             // 16
  b.record("dw_ready", "compute");                                            // 17
  b.wait("dw_ready", "d2h");                                                  // 18
  b.copy(dW, gradW, "d2h");                                                   // 19
  b.record("grad_ready", "d2h");                                              // 20
  b.wait("grad_ready", "host");                                               // 21
  const uint32_t update = b.adamw(w, gradW, m, v);                            // 22
  b.plan().mutable_steps(static_cast<int>(update))->mutable_host_task()->add_tensors(computeW);
  b.plan().mutable_header()->set_format_minor(kPlanMinorPrecision);
  return b.build();
}

plan::Tensor& tensorNamed(plan::Plan& plan, const std::string& name) {
  for (plan::Tensor& t : *plan.mutable_tensors())
    if (t.name() == name) return t;
  throw Error("no tensor " + name);
}

std::string validationError(const std::function<void(plan::Plan&)>& edit) {
  plan::Plan plan = bf16LinearPlan();
  edit(plan);
  return planValidationError(plan);
}

double roundBf16(double v) { return bf16ToFloat(floatToBf16(static_cast<float>(v))); }

TEST(PrecisionPlan, ValidatesAndVerifies) {
  EXPECT_EQ(validationError([](plan::Plan&) {}), "");
  EXPECT_EQ(verifySchedule(bf16LinearPlan()), std::vector<std::string>{});
}

TEST(PrecisionPlan, TrainsOnTheComputeCopyAndTheUpdateRewritesIt) {
  const std::string dir = makeTempDir();
  std::mt19937 rng(5);
  const HostTensor w = randomTensor({3, 2}, plan::F32, rng);
  const HostTensor x = randomTensor({4, 3}, plan::F32, rng);
  writeModel(dir + "/linear.onnx", {{"W", w}});
  Executor executor(bf16LinearPlan(), std::make_unique<CpuBackend>());
  executor.loadWeights(OnnxWeights(dir + "/linear.onnx"));
  HostArray input = HostArray::zeros(ElementType::F32, {4, 3});
  for (int i = 0; i < 12; ++i) input.data<float>()[i] = static_cast<float>(x.values[i]);
  executor.setInput("x", input);

  // Loading the weights fills the copy from the master.
  std::vector<double> copy = executor.readTensor("compute:W");
  for (int i = 0; i < 6; ++i) EXPECT_EQ(copy[i], roundBf16(w.values[i])) << i;

  // The forward reads bf16(x) bf16(W), summed exactly and rounded once to f32.
  double expected = 0;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 2; ++c) {
      double sum = 0;
      for (int k = 0; k < 3; ++k) sum += roundBf16(x.values[r * 3 + k]) * roundBf16(w.values[k * 2 + c]);
      const double y = static_cast<float>(sum);
      expected += y * y;
    }
  const double loss = executor.runStep();
  EXPECT_NEAR(loss, expected / 8, 1e-6 * (1 + expected / 8));

  // The update moved the f32 master and rewrote the copy from it.
  const std::vector<double> master = executor.readTensor("W");
  copy = executor.readTensor("compute:W");
  bool moved = false;
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(copy[i], roundBf16(master[i])) << i;
    moved = moved || master[i] != w.values[i];
  }
  EXPECT_TRUE(moved);

  // Writing a master (as a checkpoint restore or a test does) refreshes its copy.
  executor.writeTensor("W", {1.00390625, 2, 3, 4, 5, 6});  // 1 + 2^-8: a tie, rounds to 1
  EXPECT_EQ(executor.readTensor("compute:W"), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  executor.restoreOptimizerStep(1);
  EXPECT_EQ(executor.readTensor("compute:W")[0], 1.0);
}

TEST(PrecisionPlan, ValidatorRejectsAWrongFifthTensor) {
  // Wrong role: the fifth tensor is the device copy.
  EXPECT_EQ(validationError([](plan::Plan& p) { p.mutable_steps(22)->mutable_host_task()->set_tensors(4, 6); }),
            "t.plan: step 22 (host_task ADAMW): tensor 6 'dev:W' has role PARAMETER_COPY, expected PARAMETER_COMPUTE");
  // Wrong dtype: an f32 compute copy.
  EXPECT_EQ(validationError([](plan::Plan& p) {
              plan::Tensor& t = tensorNamed(p, "compute:W");
              t.set_dtype(plan::F32);
              t.mutable_buffer()->set_size_bytes(24);
            }),
            "t.plan: tensor 4 'compute:W': PARAMETER_COMPUTE dtype f32 (expected bf16)");
  // A copy of another shape than its master.
  EXPECT_EQ(validationError([](plan::Plan& p) {
              plan::Tensor& t = tensorNamed(p, "compute:W");
              t.set_shape(0, 2);
              t.set_shape(1, 3);
            }),
            "t.plan: tensor 4 'compute:W': PARAMETER_COMPUTE [2, 3] of the [3, 2] f32 parameter tensor 0 'W' "
            "(needs an f32 master of its shape)");
  // A copy of no parameter.
  EXPECT_EQ(validationError([](plan::Plan& p) { tensorNamed(p, "compute:W").set_source("V"); }),
            "t.plan: tensor 4 'compute:W': PARAMETER_COMPUTE of 'V', which is no PARAMETER's source");
  // Six tensors.
  EXPECT_EQ(validationError([](plan::Plan& p) { p.mutable_steps(22)->mutable_host_task()->add_tensors(4); }),
            "t.plan: step 22 (host_task ADAMW): ADAMW takes 4 or 5 tensors (param, grad, m, v [, compute copy]), got 6");
  // In device memory while its host update is not (a device-resident parameter keeps all of them there).
  EXPECT_EQ(validationError([](plan::Plan& p) { tensorNamed(p, "compute:W").mutable_buffer()->set_pool(0); }),
            "t.plan: step 22 (host_task ADAMW): tensor 4 'compute:W' is in a DEVICE pool, host tasks need host memory");
  EXPECT_EQ(validationError([](plan::Plan& p) { p.mutable_header()->set_precision("fp8"); }),
            "t.plan: header: precision 'fp8' (expected fp32, tf32 or bf16)");
}

TEST(PrecisionPlan, VerifierWantsTheUpdateOrderedAfterTheFetchOfTheCopy) {
  // Without compute's wait for the h2d fetch nothing orders the fetch, which
  // reads compute:W, before the ADAMW that rewrites it (nor the matmul after
  // the fetch). The master W is not read on the device, so only the compute
  // copy's write needs the event.
  plan::Plan plan = bf16LinearPlan();
  plan.mutable_steps()->DeleteSubrange(2, 1);
  for (int i = 0; i < plan.steps_size(); ++i) plan.mutable_steps(i)->set_index(static_cast<uint32_t>(i));
  for (plan::Tensor& t : *plan.mutable_tensors())
    if (t.last_use_step() > 2) t.set_last_use_step(t.last_use_step() - 1);
  EXPECT_EQ(verifySchedule(plan),
            (std::vector<std::string>{
                "step 3 (compute, kernel matmul): reads 'dev:W' written by step 0 (h2d) with no event ordering them",
                "step 21 (host, host_task ADAMW): writes 'compute:W' read by step 0 (h2d) with no event ordering them",
                "step 3 (compute, kernel matmul): poisons 'dev:W' after its last use, but step 0 (h2d) writes it "
                "with no event ordering them"}));
}

}  // namespace
}  // namespace megatrain::runtime::testing
