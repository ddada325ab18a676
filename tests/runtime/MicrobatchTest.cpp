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

}  // namespace
}  // namespace megatrain::runtime::testing
