// PlanLoaderTest.cpp - the plan loader's version checks and the validator's rejections, message by message.
#include <cmath>
#include <cstdint>
#include <functional>

#include <gtest/gtest.h>

#include "TestUtil.h"
#include "TinyPlans.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/FormatVersion.h"
#include "megatrain/plan/PlanChecksum.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/PlanLoader.h"

namespace megatrain::runtime::testing {
namespace {

std::string parseError(const std::string& bytes) {
  try {
    parsePlan(bytes, "t.plan");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The validator's message for linearPlan after `edit`, "" if it passes.
std::string validationError(const std::function<void(plan::Plan&)>& edit) {
  plan::Plan plan = linearPlan(plan::F32);
  edit(plan);
  return planValidationError(plan);
}

plan::Tensor& tensorNamed(plan::Plan& plan, const std::string& name) {
  for (plan::Tensor& t : *plan.mutable_tensors())
    if (t.name() == name) return t;
  throw Error("no tensor " + name);
}

TEST(PlanLoader, AcceptsAValidPlanFromAFile) {
  const std::string path = makeTempDir() + "/linear.plan";
  writePlan(path, linearPlan(plan::F32));
  const plan::Plan plan = loadPlan(path);
  EXPECT_EQ(plan.steps_size(), 24);
  EXPECT_EQ(validationError([](plan::Plan&) {}), "");
}

TEST(PlanLoader, RejectsWhatIsNotAPlan) {
  EXPECT_EQ(parseError("\x0a\xff garbage"), "t.plan: not a megatrain plan (protobuf parse failed)");
  plan::Plan plan = linearPlan(plan::F32);
  plan.set_magic("onnx");
  EXPECT_EQ(parseError(plan.SerializeAsString()),
            "t.plan: not a megatrain plan (magic 'onnx', expected 'megatrain.plan')");
  try {
    loadPlan("/nonexistent/model.plan");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/model.plan: cannot open");
  }
}

TEST(PlanLoader, ChecksTheFormatVersion) {
  plan::Plan plan = linearPlan(plan::F32);
  plan.mutable_header()->set_format_major(2);
  EXPECT_EQ(parseError(plan.SerializeAsString()), "t.plan: format version 2.0, this runtime reads 1.x");
  plan.mutable_header()->set_format_major(1);
  plan.mutable_header()->set_format_minor(kPlanFormatMinor + 1);
  EXPECT_EQ(parseError(plan.SerializeAsString()),
            "t.plan: format version 1." + std::to_string(kPlanFormatMinor + 1) + ", this runtime reads 1." +
                std::to_string(kPlanFormatMinor) + " at most (update the runtime)");
}

TEST(PlanLoader, ChecksTheChecksum) {
  plan::Plan plan = linearPlan(plan::F32);
  sealPlan(plan);
  EXPECT_EQ(plan.header().format_minor(), kPlanMinorChecksum);
  EXPECT_EQ(parseError(plan.SerializeAsString()), "");
  // One bit of an offset, as a flip on disk would change it: the plan still parses.
  plan::Plan flipped = plan;
  plan::Buffer* buffer = flipped.mutable_tensors(0)->mutable_buffer();
  buffer->set_offset(buffer->offset() ^ 64);
  ASSERT_NE(computePlanChecksum(flipped), plan.header().checksum());
  const std::string flippedError = parseError(flipped.SerializeAsString());
  EXPECT_NE(flippedError.find("t.plan: checksum mismatch: the plan says 0x"), std::string::npos) << flippedError;
  EXPECT_NE(flippedError.find("the file is corrupt or was edited (recompile it)"), std::string::npos);
  // A plan of the checksum's minor without one.
  plan.mutable_header()->clear_checksum();
  EXPECT_EQ(parseError(plan.SerializeAsString()),
            "t.plan: the plan has no checksum (format 1.4 requires one); recompile it");
  // Older minors carry none and are read as before.
  plan.mutable_header()->set_format_minor(kPlanMinorPrecision);
  EXPECT_EQ(parseError(plan.SerializeAsString()), "");
}

TEST(PlanValidator, BufferOutsideItsPool) {
  EXPECT_EQ(validationError([](plan::Plan& p) { tensorNamed(p, "W").mutable_buffer()->set_offset(1 << 20); }),
            "t.plan: tensor 0 'W': buffer [1048576, 1048600) lies outside pool 'host' of 320 bytes");
}

TEST(PlanValidator, BufferSizeDisagreesWithShape) {
  EXPECT_EQ(validationError([](plan::Plan& p) { tensorNamed(p, "y").mutable_buffer()->set_size_bytes(16); }),
            "t.plan: tensor 7 'y': buffer is 16 bytes, shape [4, 2] f32 needs 32");
}

TEST(PlanValidator, UnknownKernel) {
  EXPECT_EQ(validationError([](plan::Plan& p) { p.mutable_steps(4)->mutable_kernel()->set_kernel("no_such_kernel"); }),
            "t.plan: step 4 (kernel no_such_kernel): unknown kernel 'no_such_kernel' (the cpu backend does not implement it)");
}

TEST(PlanValidator, WrongOperandCount) {
  EXPECT_EQ(validationError([](plan::Plan& p) { p.mutable_steps(4)->mutable_kernel()->add_inputs(6); }),
            "t.plan: step 4 (kernel mul): 3 inputs and 1 outputs, 'mul' takes 2 and 1");
}

TEST(PlanValidator, CopySizeMismatch) {
  EXPECT_EQ(validationError([](plan::Plan& p) { p.mutable_steps(0)->mutable_copy()->set_dst(6); }),
            "t.plan: step 0 (copy): sizes differ: tensor 0 'W' is 24 bytes, tensor 6 'x' is 48");
}

TEST(PlanValidator, BadTensorIds) {
  EXPECT_EQ(validationError([](plan::Plan& p) { p.mutable_steps(3)->mutable_kernel()->set_outputs(0, 99); }),
            "t.plan: step 3 (kernel matmul): output names tensor 99, the plan has 16");
  EXPECT_EQ(validationError([](plan::Plan& p) { tensorNamed(p, "y").set_id(3); }),
            "t.plan: tensor 7 'y': id 3 differs from its index");
  EXPECT_EQ(validationError([](plan::Plan& p) { p.mutable_header()->set_loss_tensor(40); }),
            "t.plan: header: loss_tensor 40 does not exist (the plan has 16 tensors)");
}

TEST(PlanValidator, StepsStreamsAndEvents) {
  EXPECT_EQ(validationError([](plan::Plan& p) { p.mutable_steps(5)->set_index(9); }),
            "t.plan: step 5: index 9 differs from its position");
  EXPECT_EQ(validationError([](plan::Plan& p) { p.mutable_steps(5)->set_stream("gpu7"); }),
            "t.plan: step 5 (kernel reduce_mean): unknown stream 'gpu7'");
  EXPECT_EQ(validationError([](plan::Plan& p) { p.mutable_steps(2)->mutable_wait()->set_event("never"); }),
            "t.plan: step 2 (wait never): event 'never' is never recorded");
}

TEST(PlanValidator, HostTasksNeedHostTensorsOfTheRightRoles) {
  EXPECT_EQ(validationError([](plan::Plan& p) { p.mutable_steps(23)->mutable_host_task()->set_tensors(1, 5); }),
            "t.plan: step 23 (host_task ADAMW): tensor 5 'dev:W' has role PARAMETER_COPY, expected GRADIENT");
  EXPECT_EQ(validationError([](plan::Plan& p) { tensorNamed(p, "grad:W").mutable_buffer()->set_pool(0); }),
            "t.plan: step 23 (host_task ADAMW): tensor 1 'grad:W' is in a DEVICE pool, host tasks need host memory");
  EXPECT_EQ(validationError([](plan::Plan& p) { p.mutable_steps(11)->mutable_host_task()->set_tensors(0, 9); }),
            "t.plan: step 11 (host_task READ_LOSS): tensor 9 'loss' has role LOSS, expected LOSS_READOUT");
}

TEST(PlanValidator, KernelsWorkOnTheDeviceArena) {
  EXPECT_EQ(validationError([](plan::Plan& p) { p.mutable_steps(3)->mutable_kernel()->set_inputs(1, 0); }),
            "t.plan: step 3 (kernel matmul): input tensor 0 'W' is not in a DEVICE pool (kernels work on the device arena)");
}

// Sizes near 2^64 once wrapped in the backends' round-up and preflight's sum,
// and memset then ran past the allocation: bounded at load.
TEST(PlanValidator, PoolSizesAndOffsetsCannotWrap) {
  EXPECT_EQ(validationError([](plan::Plan& p) { p.mutable_pools(0)->set_size_bytes(UINT64_MAX); }),
            "t.plan: pool 0 'device': size 18446744073709551615 bytes is over the limit of 72057594037927936 (2^56)");
  EXPECT_EQ(validationError([](plan::Plan& p) {
              p.mutable_pools(0)->set_size_bytes(uint64_t(1) << 55);
              p.mutable_pools(1)->set_size_bytes((uint64_t(1) << 55) + 64);
            }),
            "t.plan: pool 1 'host': the pools up to it total 72057594037928000 bytes, over the limit of "
            "72057594037927936 (2^56)");
  EXPECT_EQ(validationError([](plan::Plan& p) { tensorNamed(p, "W").mutable_buffer()->set_offset(UINT64_MAX - 8); }),
            "t.plan: tensor 0 'W': buffer 24 bytes at offset 18446744073709551607 (the end overflows) lies outside "
            "pool 'host' of 320 bytes");
}

// --memory-plot walked an infinite predicted time forever.
TEST(PlanValidator, PredictedTimesMustBeFinite) {
  EXPECT_EQ(validationError([](plan::Plan& p) { p.mutable_steps(4)->set_predicted_end_s(INFINITY); }),
            "t.plan: step 4: predicted_end_s is inf (expected a finite time in [0, 1e9] seconds)");
  EXPECT_EQ(validationError([](plan::Plan& p) { p.mutable_steps(0)->set_predicted_start_s(-1); }),
            "t.plan: step 0: predicted_start_s is -1 (expected a finite time in [0, 1e9] seconds)");
  EXPECT_EQ(validationError([](plan::Plan& p) { p.mutable_header()->set_predicted_step_s(NAN); }),
            "t.plan: header: predicted_step_s is nan (expected a finite time in [0, 1e9] seconds)");
  EXPECT_EQ(validationError([](plan::Plan& p) {
              p.mutable_header()->mutable_predicted_breakdown()->set_idle_s(1e300);
            }),
            "t.plan: header: predicted_breakdown.idle_s is 1e+300 (expected a finite time in [0, 1e9] seconds)");
}

TEST(PlanValidator, LastUseMustBeAStep) {
  EXPECT_EQ(validationError([](plan::Plan& p) { tensorNamed(p, "y").set_last_use_step(24); }),
            "t.plan: tensor 7 'y': last_use_step 24 is not a step (the plan has 24)");
}

}  // namespace
}  // namespace megatrain::runtime::testing
