// MicrobatchTest.cpp - the names of micro-batch inputs ("<name>@<k>", megatrain-compile
// --microbatches) and the validator's check that the token input has one copy per micro-batch.
#include <gtest/gtest.h>

#include "TestUtil.h"
#include "TinyPlans.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/Microbatch.h"
#include "megatrain/runtime/PlanLoader.h"

namespace megatrain::runtime::testing {
namespace {

TEST(Microbatch, IndexOfAnInputName) {
  EXPECT_EQ(microbatchIndex("input_ids", "input_ids"), 0);
  EXPECT_EQ(microbatchIndex("input_ids@1", "input_ids"), 1);
  EXPECT_EQ(microbatchIndex("input_ids@12", "input_ids"), 12);
  EXPECT_EQ(microbatchIndex("input_ids@", "input_ids"), -1);
  EXPECT_EQ(microbatchIndex("input_ids@01", "input_ids"), -1);
  EXPECT_EQ(microbatchIndex("input_ids@1x", "input_ids"), -1);
  EXPECT_EQ(microbatchIndex("input_ids2", "input_ids"), -1);
  EXPECT_EQ(microbatchIndex("input", "input_ids"), -1);
  EXPECT_EQ(microbatchIndex("mask@1", "input_ids"), -1);
}

TEST(Microbatch, InputsInMicrobatchOrder) {
  plan::Plan plan;
  for (const char* name : {"x@2", "tokens", "x", "x@10", "x@1", "x@1b"}) {
    plan::Tensor* t = plan.add_tensors();
    t->set_name(name);
    t->set_source(name);
    t->set_role(plan::INPUT);
  }
  plan::Tensor* param = plan.add_tensors();
  param->set_name("x@3");
  param->set_role(plan::PARAMETER);
  EXPECT_EQ(microbatchInputs(plan, "x"), (std::vector<std::string>{"x", "x@1", "x@2", "x@10"}));
  EXPECT_EQ(microbatchInputs(plan, "tokens"), (std::vector<std::string>{"tokens"}));
  EXPECT_TRUE(microbatchInputs(plan, "y").empty());
}

TEST(Microbatch, ValidatorWantsOneTokenInputCopyPerMicrobatch) {
  plan::Plan plan = tokenPlan(plan::F32);
  EXPECT_EQ(planValidationError(plan), "");  // microbatches unset (0) reads as 1
  plan.mutable_header()->set_microbatches(1);
  EXPECT_EQ(planValidationError(plan), "");
  plan.mutable_header()->set_microbatches(2);
  EXPECT_EQ(planValidationError(plan),
            "t.plan: header: microbatches is 2 but the token input 'tokens' has 0 micro-batch copies "
            "(expected 1)");
}

// The targets input of a loss mask (header.target_input, minor 5): an INPUT of
// the token input's shape and dtype, with as many micro-batch copies.
TEST(Microbatch, ValidatorChecksTheTargetsInput) {
  plan::Plan plan = tokenPlan(plan::F32);
  plan.mutable_header()->set_target_input("targets");
  EXPECT_EQ(planValidationError(plan), "t.plan: header: target_input 'targets' is not an INPUT tensor");
  // A copy of the tokens' tensor under the new name, then one of another dtype.
  plan::Tensor tokens;
  for (const plan::Tensor& t : plan.tensors())
    if (t.name() == "tokens") tokens = t;
  plan::Tensor& targets = *plan.add_tensors();
  targets = tokens;
  targets.set_id(static_cast<uint32_t>(plan.tensors_size() - 1));
  targets.set_name("targets");
  targets.set_source("targets");
  // Its own bytes, at the end of a device pool grown for them.
  plan::Pool& pool = *plan.mutable_pools(static_cast<int>(tokens.buffer().pool()));
  targets.mutable_buffer()->set_offset(pool.size_bytes());
  pool.set_size_bytes(pool.size_bytes() + tokens.buffer().size_bytes());
  EXPECT_EQ(planValidationError(plan), "t.plan: header: target_input needs format minor 5, the plan says 0");
  plan.mutable_header()->set_format_minor(5);
  EXPECT_EQ(planValidationError(plan), "");
  targets.set_dtype(plan::I32);
  targets.mutable_buffer()->set_size_bytes(32);
  EXPECT_EQ(planValidationError(plan),
            "t.plan: header: target_input 'targets' is [2, 4] i32, unlike the token input [2, 4] i64");
}

}  // namespace
}  // namespace megatrain::runtime::testing
