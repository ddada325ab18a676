// AccumulateTest.cpp - the host ACCUMULATE task (micro-batch gradients): the validator's
// checks, the schedule verifier's staging-reuse event, and the executor's fp32 sums.
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "MicrobatchPlans.h"
#include "TestUtil.h"
#include "TinyPlans.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/Accumulate.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/OnnxWeights.h"
#include "megatrain/runtime/PlanLoader.h"

namespace megatrain::runtime::testing {
namespace {

// The validator's message for accumulatePlan(F32) after `edit`, "" if it passes.
std::string validationError(const std::function<void(plan::Plan&)>& edit) {
  plan::Plan plan = accumulatePlan(plan::F32);
  edit(plan);
  return planValidationError(plan);
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

// Staging in a DEVICE pool (an accumulator's visit to the device) is format minor 10's; an
// older plan keeps its staging in pinned host memory.
TEST(Accumulate, ValidatorTakesDeviceStagingFromMinor10) {
  auto deviceStaging = [](uint32_t minor) {
    return validationError([minor](plan::Plan& p) {
      plan::Tensor& part = tensorNamed(p, "grad_part:W");
      part.set_role(plan::STATE_STAGE);
      part.mutable_buffer()->set_pool(0);
      p.mutable_header()->set_format_minor(minor);
    });
  };
  EXPECT_EQ(deviceStaging(9),
            "t.plan: tensor 2 'grad_part:W': STATE_STAGE is in a DEVICE pool, staging lives in pinned host "
            "memory (a DEVICE one needs format minor 10)");
  // From minor 10 the pool is allowed; the host ACCUMULATE then finds its addend on the device.
  const std::string error = deviceStaging(10);
  EXPECT_EQ(error.find("STATE_STAGE is in"), std::string::npos) << error;
  EXPECT_NE(error.find("host tasks need host memory"), std::string::npos) << error;
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

// Large tensors are split over the host threads: every element still gets exactly the
// serial f32 (or f64) sum, whatever the split, including a tail that is no multiple of 16.
TEST(Accumulate, SplitOverThreadsGivesTheSerialBits) {
  std::mt19937_64 rng(20261130);
  std::uniform_real_distribution<double> dist(-3.0, 3.0);
  for (size_t count : {size_t{65535}, size_t{(1u << 20) + 7}, size_t{(3u << 20) + 13}}) {
    std::vector<float> acc(count), addend(count), expected(count);
    std::vector<double> accD(count), addendD(count), expectedD(count);
    for (size_t i = 0; i < count; ++i) {
      acc[i] = static_cast<float>(dist(rng));
      addend[i] = static_cast<float>(dist(rng) * 1e-3);
      expected[i] = acc[i] + addend[i];
      accD[i] = dist(rng);
      addendD[i] = dist(rng) * 1e-9;
      expectedD[i] = accD[i] + addendD[i];
    }
    accumulate(plan::F32, acc.data(), addend.data(), count);
    accumulate(plan::F64, accD.data(), addendD.data(), count);
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(acc[i], expected[i]) << "f32 element " << i << " of " << count;
      ASSERT_EQ(accD[i], expectedD[i]) << "f64 element " << i << " of " << count;
    }
  }
}

}  // namespace
}  // namespace megatrain::runtime::testing
