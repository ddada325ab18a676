// PlanStatsTest.cpp - device memory over a plan's steps (runtime/lib/PlanStats.cpp): when a
// tensor counts as live, the peak, and what the device holds at a step.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "TinyPlans.h"
#include "megatrain/plan/Streams.h"
#include "megatrain/runtime/PlanStats.h"

namespace megatrain::runtime::testing {
namespace {

const DeviceMemoryGroup* groupNamed(const std::vector<DeviceMemoryGroup>& groups, const std::string& what) {
  auto it = std::find_if(groups.begin(), groups.end(), [&](const DeviceMemoryGroup& g) { return g.what == what; });
  return it == groups.end() ? nullptr : &*it;
}

TEST(PlanStats, PeakAndWhatTheDeviceHoldsThere) {
  const plan::Plan plan = linearPlan(plan::F32);
  const PlanStats stats = computePlanStats(plan);
  // After the matmul (step 3): x, dev:W and y (48 + 24 + 32 bytes).
  EXPECT_EQ(stats.deviceLiveBytes[3], 104u);
  ASSERT_GE(stats.devicePeakStep, 0);
  const std::vector<DeviceMemoryGroup> atPeak = deviceMemoryAt(plan, stats.devicePeakStep);
  uint64_t bytes = 0;
  for (const DeviceMemoryGroup& group : atPeak) bytes += group.bytes;
  EXPECT_EQ(bytes, stats.devicePeakBytes);
  // Biggest first; activations named by the kernel that wrote them.
  ASSERT_FALSE(atPeak.empty());
  EXPECT_EQ(atPeak.front().what, "device: INPUT");
  EXPECT_EQ(atPeak.front().bytes, 48u);
  const DeviceMemoryGroup* y = groupNamed(atPeak, "device: matmul output");
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->tensors, 1u);
  EXPECT_EQ(y->bytes, 32u);
  // At step 3 the fetched weight is there, as its role.
  const DeviceMemoryGroup* weight = groupNamed(deviceMemoryAt(plan, 3), "device: PARAMETER_COPY");
  ASSERT_NE(weight, nullptr);
  EXPECT_EQ(weight->bytes, 24u);
}

// Training state in a DEVICE pool (a device home's moments) never dies: it holds its bytes at
// every step, though only the update (a host task) touches it.
TEST(PlanStats, StateThatNeverDiesIsLiveAtEveryStep) {
  plan::Plan plan = linearPlan(plan::F32);
  const PlanStats before = computePlanStats(plan);
  plan::Tensor* m = nullptr;
  for (plan::Tensor& tensor : *plan.mutable_tensors())
    if (tensor.name() == "adam_m:W") m = &tensor;
  ASSERT_NE(m, nullptr);
  plan::Pool* device = plan.mutable_pools(0);
  m->mutable_buffer()->set_pool(0);
  m->mutable_buffer()->set_offset(device->size_bytes());
  device->set_size_bytes(device->size_bytes() + m->buffer().size_bytes());
  m->set_last_use_step(-1);

  const PlanStats after = computePlanStats(plan);
  for (size_t s = 0; s < after.deviceLiveBytes.size(); ++s)
    EXPECT_EQ(after.deviceLiveBytes[s], before.deviceLiveBytes[s] + 24) << "step " << s;
  const DeviceMemoryGroup* state = groupNamed(deviceMemoryAt(plan, 0), "device: OPTIMIZER_STATE");
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->bytes, 24u);
}

// Staging in a DEVICE pool (an accumulator's visit to the device, minor 10) holds its bytes
// from its first access to its last, not all step: later tensors of its ring reuse them.
TEST(PlanStats, DeviceStagingLivesFromItsFirstAccessToItsLast) {
  plan::Plan plan = linearPlan(plan::F32);
  const PlanStats before = computePlanStats(plan);
  plan::Tensor* grad = nullptr;
  for (plan::Tensor& tensor : *plan.mutable_tensors())
    if (tensor.name() == "grad:W") grad = &tensor;
  ASSERT_NE(grad, nullptr);
  plan::Pool* device = plan.mutable_pools(0);
  grad->set_role(plan::STATE_STAGE);
  grad->mutable_buffer()->set_pool(0);
  grad->mutable_buffer()->set_offset(device->size_bytes());
  device->set_size_bytes(device->size_bytes() + grad->buffer().size_bytes());
  grad->set_last_use_step(-1);
  // Written by the d2h copy (step 20), read by the update (step 23).
  const PlanStats after = computePlanStats(plan);
  for (size_t s = 0; s < after.deviceLiveBytes.size(); ++s)
    EXPECT_EQ(after.deviceLiveBytes[s], before.deviceLiveBytes[s] + (s >= 20 && s <= 23 ? 24 : 0))
        << "step " << s;
  const DeviceMemoryGroup* staged = groupNamed(deviceMemoryAt(plan, 21), "device: STATE_STAGE");
  ASSERT_NE(staged, nullptr);
  EXPECT_EQ(staged->bytes, 24u);
  EXPECT_EQ(groupNamed(deviceMemoryAt(plan, 19), "device: STATE_STAGE"), nullptr);
}

// A kernel marked as a recompute names what it wrote so.
TEST(PlanStats, RecomputedAndPrefetchedActivationsAreNamedSo) {
  plan::Plan plan = linearPlan(plan::F32);
  for (plan::Step& step : *plan.mutable_steps())
    if (step.has_kernel() && step.kernel().kernel() == "mul") step.set_recompute(true);
  // sq (the mul's output) is live after step 4.
  EXPECT_NE(groupNamed(deviceMemoryAt(plan, 4), "device: mul output, recomputed"), nullptr);
  EXPECT_EQ(groupNamed(deviceMemoryAt(plan, 4), "device: mul output"), nullptr);
}

// An ADAMW on `optimizer` over a visit's STATE_STAGE tensors makes the plan's updates visit
// the device; the same update over DEVICE state (a device home), or a visit's tensors
// updated on another stream, does not.
TEST(PlanStats, UpdatesVisitTheDeviceOnlyWithAStagedOperandOnTheOptimizerStream) {
  auto planWith = [](plan::Role masterRole, const std::string& stream) {
    plan::Plan plan;
    for (plan::Role role : {masterRole, plan::GRADIENT, plan::OPTIMIZER_STATE, plan::OPTIMIZER_STATE}) {
      plan::Tensor* tensor = plan.add_tensors();
      tensor->set_id(static_cast<uint32_t>(plan.tensors_size() - 1));
      tensor->set_role(role);
    }
    plan::Step* kernel = plan.add_steps();
    kernel->set_stream(plan::kComputeStream);
    kernel->mutable_kernel()->set_kernel("matmul");
    plan::Step* step = plan.add_steps();
    step->set_index(1);
    step->set_stream(stream);
    step->mutable_host_task()->set_kind(plan::HostTask::ADAMW);
    for (uint32_t id = 0; id < 4; ++id) step->mutable_host_task()->add_tensors(id);
    return plan;
  };
  EXPECT_TRUE(updatesVisitTheDevice(planWith(plan::STATE_STAGE, plan::kOptimizerStream)));
  EXPECT_FALSE(updatesVisitTheDevice(planWith(plan::PARAMETER, plan::kOptimizerStream)));
  EXPECT_FALSE(updatesVisitTheDevice(planWith(plan::STATE_STAGE, plan::kComputeStream)));
  EXPECT_FALSE(updatesVisitTheDevice(planWith(plan::STATE_STAGE, plan::kHostStream)));
  EXPECT_FALSE(updatesVisitTheDevice(plan::Plan{}));
}

}  // namespace
}  // namespace megatrain::runtime::testing
