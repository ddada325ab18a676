// PlanVerifierTest.cpp - the schedule verifier on hand-built plans: what it proves, and each rejection by its message.
//
// linearPlan's schedule (TinyPlans.cpp): 0 h2d copy W -> dev:W, 1 record
// w_ready, 2 compute wait w_ready, 3 matmul -> y, 4 mul -> sq, 5 reduce_mean
// -> loss, 6-7 compute -> d2h event, 8 d2h copy loss, 9-10 d2h -> host event,
// 11 READ_LOSS, 12-17 backward kernels (15 reads y, 17 writes dW), 18-19
// compute -> d2h event, 20 d2h copy dW -> grad:W, 21-22 d2h -> host event,
// 23 ADAMW.
#include <gtest/gtest.h>

#include "TestUtil.h"
#include "TinyPlans.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/PlanVerifier.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/PlanLoader.h"

namespace megatrain::runtime::testing {
namespace {

using Failures = std::vector<std::string>;

plan::Tensor& tensorNamed(plan::Plan& plan, const std::string& name) {
  for (plan::Tensor& t : *plan.mutable_tensors())
    if (t.name() == name) return t;
  throw Error("no tensor " + name);
}

// Removes step `index`, renumbering the steps after it and their last uses.
void eraseStep(plan::Plan& plan, int index) {
  plan.mutable_steps()->DeleteSubrange(index, 1);
  for (int i = 0; i < plan.steps_size(); ++i) plan.mutable_steps(i)->set_index(static_cast<uint32_t>(i));
  for (plan::Tensor& t : *plan.mutable_tensors())
    if (t.last_use_step() > index) t.set_last_use_step(t.last_use_step() - 1);
}

void swapSteps(plan::Plan& plan, int a, int b) {
  plan.mutable_steps()->SwapElements(a, b);
  plan.mutable_steps(a)->set_index(static_cast<uint32_t>(a));
  plan.mutable_steps(b)->set_index(static_cast<uint32_t>(b));
}

TEST(PlanVerifier, ProvesTheHandBuiltPlans) {
  EXPECT_EQ(verifySchedule(linearPlan(plan::F32)), Failures{});
  EXPECT_EQ(verifySchedule(linearPlan(plan::F64, /*keepOutput=*/true)), Failures{});
  EXPECT_EQ(verifySchedule(tokenPlan(plan::F32)), Failures{});
}

// Every trainable parameter gets exactly one update: a plan without W's ADAMW
// is well ordered, but W would never train.
TEST(PlanVerifier, EveryTrainableParameterIsUpdatedOnce) {
  plan::Plan dropped = linearPlan(plan::F32);
  eraseStep(dropped, 23);
  EXPECT_EQ(verifySchedule(dropped),
            Failures{"trainable parameter 'W' is updated by 0 ADAMW tasks, expected exactly one per step"});
  plan::Plan twice = linearPlan(plan::F32);
  *twice.add_steps() = twice.steps(23);
  twice.mutable_steps(24)->set_index(24);
  const Failures failures = verifySchedule(twice);
  ASSERT_FALSE(failures.empty());
  EXPECT_EQ(failures.back(), "trainable parameter 'W' is updated by 2 ADAMW tasks (steps 23, 24), expected exactly one per step");
  // An ADAMW of a frozen parameter.
  plan::Plan frozen = linearPlan(plan::F32);
  tensorNamed(frozen, "W").set_trainable(false);
  EXPECT_EQ(verifySchedule(frozen),
            Failures{"step 23 (host, host_task ADAMW): updates tensor 'W', which is not a trainable PARAMETER"});
}

// An update of a visit (a STATE_STAGE master, format minor 11: docs/tiering.md "Update
// visits") counts as its parameter's only where the visit is copied from the PARAMETER before
// it and back into it after; here neither, so W trains nowhere.
TEST(PlanVerifier, AVisitsUpdateCountsOnlyCopiedFromAndBackIntoItsParameter) {
  plan::Plan plan = linearPlan(plan::F32);
  plan::Tensor& visit = *plan.add_tensors();
  visit = tensorNamed(plan, "W");
  visit.set_id(static_cast<uint32_t>(plan.tensors_size() - 1));
  visit.set_name("visit_master:W");
  visit.set_role(plan::STATE_STAGE);
  visit.set_trainable(false);
  visit.clear_source();
  plan.mutable_steps(23)->mutable_host_task()->set_tensors(0, visit.id());
  // (The stand-in visit shares W's bytes and nothing writes it: the access checks say so first.)
  const Failures failures = verifySchedule(plan);
  ASSERT_GE(failures.size(), 2u);
  EXPECT_EQ(Failures(failures.end() - 2, failures.end()),
            (Failures{"step 23 (host, host_task ADAMW): updates 'visit_master:W', a visit that is not "
                      "copied from a trainable PARAMETER before the update and back into it after",
                      "trainable parameter 'W' is updated by 0 ADAMW tasks, expected exactly one per step"}));
}

// (a) Without compute's wait for the h2d copy, the matmul may read dev:W
// before it lands, and the host's update of W may overwrite it while the
// copy still reads it.
TEST(PlanVerifier, MissingWait) {
  plan::Plan plan = linearPlan(plan::F32);
  eraseStep(plan, 2);
  EXPECT_EQ(verifySchedule(plan),
            (Failures{"step 2 (compute, kernel matmul): reads 'dev:W' written by step 0 (h2d) with no "
                      "event ordering them",
                      "step 22 (host, host_task ADAMW): writes 'W' read by step 0 (h2d) with no event "
                      "ordering them",
                      // dev:W dies at step 2: its poison may land before the copy does.
                      "step 2 (compute, kernel matmul): poisons 'dev:W' after its last use, but step 0 "
                      "(h2d) writes it with no event ordering them"}));
}

// (b) sq put on y's bytes while y is still needed (read at step 15).
TEST(PlanVerifier, TensorsLiveTogetherShareBytes) {
  plan::Plan plan = linearPlan(plan::F32);
  const uint64_t offset = tensorNamed(plan, "y").buffer().offset();
  tensorNamed(plan, "sq").mutable_buffer()->set_offset(offset);
  EXPECT_EQ(verifySchedule(plan),
            Failures{"step 4 (compute, kernel mul): writes 'sq' into bytes [" + std::to_string(offset) +
                     ", " + std::to_string(offset + 32) +
                     ") of pool 'device' that 'y' holds from step 3 to step 15"});
}

// (c) The device pool and the live bytes against header.device_budget_bytes.
TEST(PlanVerifier, DeviceBudget) {
  plan::Plan plan = linearPlan(plan::F32);
  const uint64_t arena = plan.pools(0).size_bytes();
  plan.mutable_header()->set_device_budget_bytes(arena);
  EXPECT_EQ(verifySchedule(plan), Failures{});
  plan.mutable_header()->set_device_budget_bytes(arena - 1);
  EXPECT_EQ(verifySchedule(plan), Failures{"pool 'device' is " + std::to_string(arena) +
                                           " bytes, over the device budget of " +
                                           std::to_string(arena - 1) + " bytes"});
  // Below the peak too: x (48), dev:W (24), y, sq, loss... live at step 4.
  plan.mutable_header()->set_device_budget_bytes(100);
  const Failures failures = verifySchedule(plan);
  ASSERT_EQ(failures.size(), 2u);
  EXPECT_EQ(failures[1].rfind("step ", 0), 0u) << failures[1];
  EXPECT_NE(failures[1].find(" bytes are live on the device, over the device budget of 100 bytes"),
            std::string::npos)
      << failures[1];
}

// (d) A wait whose event is recorded nowhere before it (here: only later).
TEST(PlanVerifier, WaitWithoutEarlierRecord) {
  plan::Plan plan = linearPlan(plan::F32);
  plan.mutable_steps(2)->mutable_wait()->set_event("dw_ready");  // recorded at step 18
  const Failures failures = verifySchedule(plan);
  ASSERT_FALSE(failures.empty());
  EXPECT_EQ(failures[0],
            "step 2 (compute, wait dw_ready): waits for event 'dw_ready', which no earlier step records");
  plan.mutable_steps(2)->mutable_wait()->set_event("nowhere");
  EXPECT_EQ(verifySchedule(plan).at(0),
            "step 2 (compute, wait nowhere): waits for event 'nowhere', which no earlier step records");
}

// (e) The wait moved after the step it protects.
TEST(PlanVerifier, ReadBeforeItsCopyCompletes) {
  plan::Plan plan = linearPlan(plan::F32);
  swapSteps(plan, 2, 3);
  EXPECT_EQ(verifySchedule(plan),
            Failures{"step 2 (compute, kernel matmul): reads 'dev:W' written by step 0 (h2d) with no "
                     "event ordering them"});
}

// dev:W placed on y's bytes, dead in plan order after step 1; `ordered`
// makes the h2d copy wait for compute's progress past that read.
plan::Plan reusePlan(bool ordered) {
  PlanBuilder b;
  const uint32_t w = b.tensor("W", {4}, plan::F32, plan::PARAMETER);
  const uint32_t readout = b.tensor("loss", {}, plan::F32, plan::LOSS_READOUT);
  const uint32_t x = b.tensor("x", {4}, plan::F32, plan::INPUT);
  const uint32_t y = b.tensor("y", {4}, plan::F32, plan::ACTIVATION);
  const uint32_t devW = b.tensor("dev:W", {4}, plan::F32, plan::PARAMETER_COPY);
  const uint32_t loss = b.tensor("l", {}, plan::F32, plan::LOSS);
  b.kernel("relu", {x}, {y});
  b.kernel("reduce_sum", {y}, {loss}, {intsAttr("axes", {0}), intAttr("keepdims", 0)});
  if (ordered) {
    b.record("y_read", "compute");
    b.wait("y_read", "h2d");
  }
  b.copy(w, devW, "h2d");
  b.readLossThroughD2h(loss, readout);
  plan::Plan plan = b.build();
  plan.mutable_tensors(devW)->mutable_buffer()->set_offset(plan.tensors(y).buffer().offset());
  return plan;
}

TEST(PlanVerifier, WriteOverBytesAnotherStreamStillReads) {
  EXPECT_EQ(verifySchedule(reusePlan(false)),
            Failures{"step 2 (h2d, copy): writes 'dev:W' over bytes of 'y' read by step 1 (compute) "
                     "with no event ordering them"});
  EXPECT_EQ(verifySchedule(reusePlan(true)), Failures{});
}

// A tensor read after its last_use_step reads bytes the CPU backend poisoned.
TEST(PlanVerifier, ReadAfterLastUse) {
  plan::Plan plan = linearPlan(plan::F32);
  tensorNamed(plan, "y").set_last_use_step(4);
  EXPECT_EQ(verifySchedule(plan),
            Failures{"step 15 (compute, kernel mul): reads 'y' after its last_use_step 4, when its bytes "
                     "are dead"});
}

// A dead DEVICE tensor is poisoned on the stream of its last_use_step right
// after that step (the CUDA backend's --poison): with 'loss' dying at compute's
// step 12, the poison may overwrite it before d2h's copy of it (step 8) reads
// it, since nothing orders d2h before compute there.
TEST(PlanVerifier, PoisonBeforeAnotherStreamsRead) {
  plan::Plan plan = linearPlan(plan::F32);
  tensorNamed(plan, "loss").set_last_use_step(12);
  EXPECT_EQ(verifySchedule(plan),
            Failures{"step 12 (compute, kernel fill): poisons 'loss' after its last use, but step 8 (d2h) "
                     "reads it with no event ordering them"});
}

// The poison is a write at last_use_step, which may lie after the tensor's last
// access: a later tensor in the same bytes must wait for that step, not only for
// the last access. Here 'sq' (last read at step 5) dies at step 12, and an h2d
// copy into its bytes waits only for step 5 (loss_ready).
TEST(PlanVerifier, ReuseBeforeThePoison) {
  plan::Plan plan = linearPlan(plan::F32);
  plan::Tensor& sq = tensorNamed(plan, "sq");
  sq.set_last_use_step(12);
  plan::Tensor reuse = tensorNamed(plan, "dev:W");
  reuse.set_name("dev:W2");
  reuse.set_id(static_cast<uint32_t>(plan.tensors_size()));
  reuse.mutable_buffer()->set_offset(tensorNamed(plan, "sq").buffer().offset());
  const uint32_t x = tensorNamed(plan, "x").id();  // written by the runtime before every step
  const uint32_t index = static_cast<uint32_t>(plan.steps_size());
  reuse.set_last_use_step(index + 1);
  tensorNamed(plan, "x").set_last_use_step(-1);  // the copy source lives on, unpoisoned
  *plan.add_tensors() = reuse;
  plan::Step* wait = plan.add_steps();
  wait->set_index(index);
  wait->set_stream("h2d");
  wait->mutable_wait()->set_event("loss_ready");
  plan::Step* copy = plan.add_steps();
  copy->set_index(index + 1);
  copy->set_stream("h2d");
  copy->mutable_copy()->set_src(x);
  copy->mutable_copy()->set_dst(reuse.id());
  EXPECT_EQ(verifySchedule(plan),
            Failures{"step " + std::to_string(index + 1) + " (h2d, copy): writes 'dev:W2' over bytes of 'sq' "
                     "poisoned after its last use by step 12 (compute) with no event ordering them"});
  // Waiting for an event recorded after step 12 (dw_ready, after step 17) orders it.
  plan.mutable_steps(static_cast<int>(index))->mutable_wait()->set_event("dw_ready");
  EXPECT_EQ(verifySchedule(plan), Failures{});
}

// A read of a tensor no step writes (and the runtime does not either).
TEST(PlanVerifier, ReadOfATensorNothingWrites) {
  plan::Plan plan = linearPlan(plan::F32);
  plan.mutable_steps(4)->mutable_kernel()->set_inputs(1, tensorNamed(plan, "dy").id());
  const Failures failures = verifySchedule(plan);
  ASSERT_FALSE(failures.empty());
  EXPECT_EQ(failures[0], "step 4 (compute, kernel mul): reads 'dy', which no earlier step writes");
}

// Loading runs the verifier after the structural checks: the first failure,
// and how many more there are.
TEST(PlanVerifier, RunsWhenAPlanIsValidated) {
  plan::Plan plan = linearPlan(plan::F32);
  eraseStep(plan, 2);
  CpuBackend backend;
  try {
    validatePlan(plan, backend, "t.plan");
    FAIL() << "the plan was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "t.plan: plan verifier: step 2 (compute, kernel matmul): reads 'dev:W' written by step 0 "
                 "(h2d) with no event ordering them (and 2 more)");
  }
}

}  // namespace
}  // namespace megatrain::runtime::testing
