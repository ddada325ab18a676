// AccumulateTest.cpp - the host ACCUMULATE task (micro-batch gradients): the validator's
// checks, the schedule verifier's staging-reuse event, and the executor's fp32 sums.
#include <functional>
#include <memory>
#include <random>

#include <gtest/gtest.h>

#include "TestUtil.h"
#include "TinyPlans.h"
#include "megatrain/runtime/Accumulate.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/Error.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/OnnxWeights.h"
#include "megatrain/runtime/PlanLoader.h"

namespace megatrain::runtime::testing {
namespace {

// A plan shaped like an N = 3 micro-batch step for one parameter W: the loss
// of x W, then three gradient parts (here the inputs g0, g1, g2) go to the
// host as the compiler emits them: g0 into grad:W, g1 and g2 each into the
// one staging tensor grad_part:W followed by ACCUMULATE (grad:W, grad_part:W),
// then ADAMW. `warWait` = false drops the event that holds the copy of g2
// until the first ACCUMULATE has read grad_part:W.
plan::Plan accumulatePlan(plan::DType dtype, bool warWait = true) {
  PlanBuilder b;
  b.plan().mutable_header()->set_source_model("linear.onnx");
  b.plan().mutable_header()->set_format_minor(2);
  const uint32_t w = b.tensor("W", {3, 2}, dtype, plan::PARAMETER);
  const uint32_t gradW = b.tensor("grad:W", {3, 2}, dtype, plan::GRADIENT);
  const uint32_t partW = b.tensor("grad_part:W", {3, 2}, dtype, plan::GRADIENT);
  const uint32_t m = b.tensor("adam_m:W", {3, 2}, dtype, plan::OPTIMIZER_STATE);
  const uint32_t v = b.tensor("adam_v:W", {3, 2}, dtype, plan::OPTIMIZER_STATE);
  const uint32_t readout = b.tensor("loss_readout", {}, dtype, plan::LOSS_READOUT);
  const uint32_t devW = b.tensor("dev:W", {3, 2}, dtype, plan::PARAMETER_COPY);
  const uint32_t x = b.tensor("x", {4, 3}, dtype, plan::INPUT);
  const uint32_t g0 = b.tensor("g0", {3, 2}, dtype, plan::INPUT);
  const uint32_t g1 = b.tensor("g1", {3, 2}, dtype, plan::INPUT);
  const uint32_t g2 = b.tensor("g2", {3, 2}, dtype, plan::INPUT);
  const uint32_t y = b.tensor("y", {4, 2}, dtype, plan::ACTIVATION);
  const uint32_t sq = b.tensor("sq", {4, 2}, dtype, plan::ACTIVATION);
  const uint32_t loss = b.tensor("loss", {}, dtype, plan::LOSS);
  auto accumulateStep = [&](uint32_t acc, uint32_t addend) {
    plan::Step* step = b.plan().add_steps();
    step->set_index(static_cast<uint32_t>(b.plan().steps_size() - 1));
    step->set_stream("host");
    step->mutable_host_task()->set_kind(plan::HostTask::ACCUMULATE);
    step->mutable_host_task()->add_tensors(acc);
    step->mutable_host_task()->add_tensors(addend);
  };

  b.copy(w, devW, "h2d");                                                    // 0
  b.record("w_ready", "h2d");                                                // 1
  b.wait("w_ready", "compute");                                              // 2
  b.kernel("matmul", {x, devW}, {y});                                        // 3
  b.kernel("mul", {y, y}, {sq});                                             // 4
  b.kernel("reduce_mean", {sq}, {loss}, {intsAttr("axes", {0, 1}), intAttr("keepdims", 0)});  // 5
  b.record("loss_ready", "compute");                                         // 6
  b.wait("loss_ready", "d2h");                                               // 7
  b.copy(loss, readout, "d2h");                                              // 8
  b.record("readout_ready", "d2h");                                          // 9
  b.wait("readout_ready", "host");                                           // 10
  b.readLoss(readout);                                                       // 11
  b.copy(g0, gradW, "d2h");                                                  // 12
  b.copy(g1, partW, "d2h");                                                  // 13
  b.record("part1", "d2h");                                                  // 14
  b.wait("part1", "host");                                                   // 15
  accumulateStep(gradW, partW);                                                // 16
  if (warWait) {
    b.record("added1", "host");                                              // 17
    b.wait("added1", "d2h");                                                 // 18
  }
  b.copy(g2, partW, "d2h");
  b.record("part2", "d2h");
  b.wait("part2", "host");
  accumulateStep(gradW, partW);
  b.adamw(w, gradW, m, v);
  return b.build();
}

// The validator's message for accumulatePlan(F32) after `edit`, "" if it passes.
std::string validationError(const std::function<void(plan::Plan&)>& edit) {
  plan::Plan plan = accumulatePlan(plan::F32);
  edit(plan);
  CpuBackend backend;
  try {
    validatePlan(plan, backend, "t.plan");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

plan::Tensor& tensorNamed(plan::Plan& plan, const std::string& name) {
  for (plan::Tensor& t : *plan.mutable_tensors())
    if (t.name() == name) return t;
  throw Error("no tensor " + name);
}

TEST(Accumulate, ValidatorAcceptsTheMicrobatchPlan) {
  EXPECT_EQ(validationError([](plan::Plan&) {}), "");
}

TEST(Accumulate, ValidatorRejectsBadOperands) {
  EXPECT_EQ(validationError([](plan::Plan& p) { tensorNamed(p, "grad_part:W").mutable_buffer()->set_pool(0); }),
            "t.plan: step 16 (host_task ACCUMULATE): tensor 2 'grad_part:W' is in a DEVICE pool, host tasks "
            "need host memory");
  EXPECT_EQ(validationError([](plan::Plan& p) {
              plan::Tensor& part = tensorNamed(p, "grad_part:W");
              part.clear_shape();
              part.add_shape(2);
              part.add_shape(3);
            }),
            "t.plan: step 16 (host_task ACCUMULATE): tensor 2 'grad_part:W' ([2, 3] f32) does not match the "
            "accumulator tensor 1 'grad:W' ([3, 2] f32)");
  EXPECT_EQ(validationError([](plan::Plan& p) { tensorNamed(p, "grad_part:W").set_role(plan::OPTIMIZER_STATE); }),
            "t.plan: step 16 (host_task ACCUMULATE): tensor 2 'grad_part:W' has role OPTIMIZER_STATE, expected "
            "GRADIENT");
  EXPECT_EQ(validationError([](plan::Plan& p) { p.mutable_steps(16)->mutable_host_task()->add_tensors(3); }),
            "t.plan: step 16 (host_task ACCUMULATE): ACCUMULATE takes 2 tensors (accumulator, addend), got 3");
  EXPECT_EQ(validationError([](plan::Plan& p) { p.mutable_steps(16)->mutable_host_task()->set_tensors(1, 1); }),
            "t.plan: step 16 (host_task ACCUMULATE): ACCUMULATE adds tensor 1 'grad:W' to itself");
}

TEST(Accumulate, VerifierNeedsTheStagingTensorFreeBeforeTheNextPart) {
  plan::Plan plan = accumulatePlan(plan::F32, /*warWait=*/false);
  CpuBackend backend;
  try {
    validatePlan(plan, backend, "t.plan");
    FAIL() << "a copy into grad_part:W racing the ACCUMULATE that reads it was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("grad_part:W"), std::string::npos) << e.what();
  }
}

// Three parts summed on the host in index order, each sum rounded to f32:
// the exact bits of ((g0 + g1) + g2) in float, on the CPU backend as on CUDA
// (the executor runs ACCUMULATE on the host for both).
TEST(Accumulate, ExecutorSumsThePartsInF32) {
  const std::string dir = makeTempDir();
  std::mt19937 rng(5);
  writeModel(dir + "/linear.onnx", {{"W", randomTensor({3, 2}, plan::F64, rng)}});
  Executor executor(accumulatePlan(plan::F32), std::make_unique<CpuBackend>());
  executor.loadWeights(OnnxWeights(dir + "/linear.onnx"));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<std::vector<float>> parts(3, std::vector<float>(6));
  HostArray x = HostArray::zeros(ElementType::F32, {4, 3});
  for (int i = 0; i < 12; ++i) x.data<float>()[i] = dist(rng);
  executor.setInput("x", x);
  for (int k = 0; k < 3; ++k) {
    HostArray g = HostArray::zeros(ElementType::F32, {3, 2});
    for (int i = 0; i < 6; ++i) {
      // Magnitudes 1e-4 .. 1: a sum in double would round differently.
      parts[k][i] = dist(rng) * (k == 1 ? 1e-4f : 1.0f) / 3.0f;
      g.data<float>()[i] = parts[k][i];
    }
    executor.setInput("g" + std::to_string(k), g);
  }
  executor.runStep();
  const std::vector<double> grad = executor.readTensor("grad:W");
  ASSERT_EQ(grad.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    volatile float sum = parts[0][i];
    sum = sum + parts[1][i];
    sum = sum + parts[2][i];
    EXPECT_EQ(static_cast<float>(grad[i]), sum) << "element " << i;
  }
}

TEST(Accumulate, RejectsOtherDtypes) {
  int64_t acc = 1, addend = 2;
  EXPECT_THROW(accumulate(plan::I64, &acc, &addend, 1), Error);
  double a[2] = {1.0, 2.0}, b[2] = {0.5, 0.25};
  accumulate(plan::F64, a, b, 2);
  EXPECT_EQ(a[0], 1.5);
  EXPECT_EQ(a[1], 2.25);
}

}  // namespace
}  // namespace megatrain::runtime::testing
