// PlanViewsTest.cpp - views (Tensor.alias_of, minor 8): the verifier's rules and the executor running one.
//
// viewPlan is linearPlan (TinyPlans.cpp) with the backward's read of y
// (step 15, mul) going through 'view:y', a view of y's bytes: y itself is last
// read at step 4, so only the view keeps its bytes alive until step 15.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>

#include "TestUtil.h"
#include "TinyPlans.h"
#include "megatrain/plan/Aliases.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/FormatVersion.h"
#include "megatrain/plan/PlanVerifier.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/OnnxWeights.h"
#include "megatrain/runtime/PlanLoader.h"

namespace megatrain::runtime::testing {
namespace {

using Failures = std::vector<std::string>;

plan::Tensor& tensorNamed(plan::Plan& plan, const std::string& name) {
  for (plan::Tensor& t : *plan.mutable_tensors())
    if (t.name() == name) return t;
  throw Error("no tensor " + name);
}

// With `early`, the view is read at step 4 instead (mul(view:y, view:y)) and
// dies there, while y itself lives to step 15.
plan::Plan viewPlan(plan::DType dtype, bool early = false) {
  plan::Plan plan = linearPlan(dtype);
  plan.mutable_header()->set_format_minor(kPlanMinorAliases);
  const plan::Tensor y = tensorNamed(plan, "y");
  plan::Tensor& view = *plan.add_tensors();
  view = y;
  view.set_id(static_cast<uint32_t>(plan.tensors_size() - 1));
  view.set_name("view:y");
  view.set_alias_of(y.id());
  EXPECT_EQ(y.last_use_step(), 15);  // the base covers its view's last use
  if (early) {
    plan::Kernel& square = *plan.mutable_steps(4)->mutable_kernel();
    EXPECT_EQ(square.kernel(), "mul");
    square.set_inputs(0, view.id());
    square.set_inputs(1, view.id());
    view.set_last_use_step(4);
    return plan;
  }
  plan::Kernel& mul = *plan.mutable_steps(15)->mutable_kernel();
  EXPECT_EQ(mul.kernel(), "mul");
  EXPECT_EQ(mul.inputs(1), y.id());
  mul.set_inputs(1, view.id());
  view.set_last_use_step(15);
  return plan;
}

bool mentions(const Failures& failures, const std::string& text) {
  return std::any_of(failures.begin(), failures.end(),
                     [&](const std::string& f) { return f.find(text) != std::string::npos; });
}

TEST(PlanViews, AViewOfAnArenaTensorIsProved) {
  EXPECT_EQ(verifySchedule(viewPlan(plan::F32, /*early=*/true)), Failures{});
  const plan::Plan plan = viewPlan(plan::F32);
  EXPECT_EQ(verifySchedule(plan), Failures{});
  EXPECT_EQ(countAliases(plan), 1u);
  const std::vector<uint32_t> bases = aliasBases(plan);
  plan::Plan copy = plan;
  EXPECT_EQ(bases.back(), tensorNamed(copy, "y").id());
  EXPECT_EQ(bases.front(), 0u);  // W is no view: its own base
}

TEST(PlanViews, AViewHasItsBasesBytes) {
  plan::Plan moved = viewPlan(plan::F32);
  tensorNamed(moved, "view:y").mutable_buffer()->set_offset(tensorNamed(moved, "y").buffer().offset() + 64);
  EXPECT_TRUE(mentions(verifySchedule(moved), "view 'view:y' is 32 bytes at offset"))
      << ::testing::PrintToString(verifySchedule(moved));
  EXPECT_TRUE(mentions(verifySchedule(moved), "a view has its base's bytes"));

  plan::Plan smaller = viewPlan(plan::F32);
  tensorNamed(smaller, "view:y").mutable_buffer()->set_size_bytes(16);
  EXPECT_TRUE(mentions(verifySchedule(smaller), "view 'view:y' is 16 bytes"));
}

TEST(PlanViews, AliasOfNamesAnotherTensorThatIsNoView) {
  plan::Plan self = viewPlan(plan::F32);
  plan::Tensor& view = tensorNamed(self, "view:y");
  view.set_alias_of(view.id());
  EXPECT_TRUE(mentions(verifySchedule(self), "view 'view:y': alias_of " + std::to_string(view.id()) +
                                                  " names no other tensor"));

  plan::Plan outside = viewPlan(plan::F32);
  tensorNamed(outside, "view:y").set_alias_of(999);
  EXPECT_TRUE(mentions(verifySchedule(outside), "alias_of 999 names no other tensor"));

  plan::Plan chain = viewPlan(plan::F32);
  plan::Tensor second = tensorNamed(chain, "view:y");
  second.set_id(static_cast<uint32_t>(chain.tensors_size()));
  second.set_name("view:view:y");
  second.set_alias_of(tensorNamed(chain, "view:y").id());
  *chain.add_tensors() = second;
  EXPECT_TRUE(mentions(verifySchedule(chain), "view 'view:view:y' is a view of view 'view:y'"));
}

TEST(PlanViews, AViewIsAnActivationOfAnArenaTensor) {
  plan::Plan role = viewPlan(plan::F32);
  tensorNamed(role, "view:y").set_role(plan::LOSS);
  EXPECT_TRUE(mentions(verifySchedule(role), "view 'view:y' has role LOSS; a view is an ACTIVATION"));

  // A view of the host master W, which ADAMW rewrites in place.
  plan::Plan state = viewPlan(plan::F32);
  const plan::Tensor w = tensorNamed(state, "W");
  plan::Tensor& view = tensorNamed(state, "view:y");
  view.set_alias_of(w.id());
  *view.mutable_buffer() = w.buffer();
  EXPECT_TRUE(mentions(verifySchedule(state), "view 'view:y' is of 'W', a PARAMETER that host tasks rewrite"));
}

TEST(PlanViews, AViewNeverOutlivesItsBase) {
  plan::Plan plan = viewPlan(plan::F32);
  tensorNamed(plan, "y").set_last_use_step(4);
  const Failures failures = verifySchedule(plan);
  EXPECT_TRUE(mentions(failures, "view 'view:y' outlives its base 'y': last_use_step 15 after the base's 4"));
  // Its read at step 15 reads the base's poisoned bytes.
  EXPECT_TRUE(mentions(failures, "step 15 (compute, kernel mul): reads 'y' after its last_use_step 4"));

  plan::Plan late = viewPlan(plan::F32);
  tensorNamed(late, "view:y").set_last_use_step(14);
  EXPECT_TRUE(mentions(verifySchedule(late), "reads view 'view:y' after its last_use_step 14"));
}

TEST(PlanViews, NoStepWritesAViewOrItsLiveBase) {
  plan::Plan view = viewPlan(plan::F32);
  view.mutable_steps(16)->mutable_kernel()->set_outputs(0, tensorNamed(view, "view:y").id());
  EXPECT_TRUE(mentions(verifySchedule(view), "step 16 (compute, kernel scale): writes view 'view:y' of 'y'; "
                                             "a view is written only by its base's step"));

  // Step 14 rewrites y between its def (3) and the view's read (15).
  plan::Plan base = viewPlan(plan::F32);
  base.mutable_steps(14)->mutable_kernel()->set_outputs(0, tensorNamed(base, "y").id());
  EXPECT_TRUE(mentions(verifySchedule(base), "step 14 (compute, kernel scale): writes 'y' while its view "
                                             "'view:y' is live (to step 15)"));
}

TEST(PlanViews, AliasOfNeedsMinor8) {
  plan::Plan plan = viewPlan(plan::F32);
  plan.mutable_header()->set_format_minor(7);
  CpuBackend backend;
  try {
    validatePlan(plan, backend, "t.plan");
    FAIL() << "the plan was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'view:y': alias_of needs format minor 8, the plan says 7"),
              std::string::npos)
        << e.what();
  }
}

// The CPU backend poisons dead arena tensors. A view read at step 15 while y
// is last read directly at step 4 needs y's bytes until then; a view that
// dies at step 4 while y lives on must not poison y's bytes. Both run to
// linearPlan's numbers, to the bit.
TEST(PlanViews, TheExecutorKeepsABaseWhileItsViewLives) {
  const std::string dir = makeTempDir();
  std::mt19937 rng(73);
  const HostTensor w = randomTensor({3, 2}, plan::F64, rng);
  const HostTensor x = randomTensor({4, 3}, plan::F64, rng);
  writeModel(dir + "/linear.onnx", {{"W", w}});
  auto run = [&](plan::Plan plan) {
    Executor executor(std::move(plan), std::make_unique<CpuBackend>());
    executor.loadWeights(OnnxWeights(dir + "/linear.onnx"));
    HostArray input = HostArray::zeros(ElementType::F64, {4, 3});
    for (int i = 0; i < 12; ++i) input.data<double>()[i] = x.values[i];
    executor.setInput("x", input);
    std::vector<double> losses;
    for (int step = 0; step < 3; ++step) losses.push_back(executor.runStep());
    std::vector<double> weights = executor.readTensor("W");
    losses.insert(losses.end(), weights.begin(), weights.end());
    return losses;
  };
  const std::vector<double> copies = run(linearPlan(plan::F64));
  for (bool early : {false, true}) {
    const std::vector<double> views = run(viewPlan(plan::F64, early));
    ASSERT_EQ(copies.size(), views.size());
    for (size_t i = 0; i < copies.size(); ++i) {
      EXPECT_FALSE(std::isnan(views[i])) << i << (early ? " early" : "");
      EXPECT_EQ(std::memcmp(&copies[i], &views[i], sizeof(double)), 0) << i << (early ? " early" : "");
    }
  }
}

}  // namespace
}  // namespace megatrain::runtime::testing
