// host_order_test.cpp - orderHostUpdates (compiler/include/megatrain/Plan/HostOrder.h, docs/tiering.md
// "The host update order") on small hand-built plans: the host's updates after the loss go earliest
// deadline first (on the simulator's times: 140.7 ms a step in plan order, 128.0 so), the tensors'
// last uses follow, the events and the schedule verifier accept the result; a plan whose tasks
// would pass a copy into their bytes, and a plan with events, stay as they are.
#include "megatrain/Plan/Events.h"
#include "megatrain/Plan/HostOrder.h"
#include "megatrain/plan/PlanVerifier.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

namespace pb = megatrain::plan;
using megatrain::runtime::testing::PlanBuilder;

constexpr int64_t kElements = 1 << 20;

// A profile on which an elementwise add of kElements f32 takes about 12 ms (three 4 MiB
// tensors over 1 GB/s) and a host AdamW of kElements about 30 ms: a host slower than the
// backward that hands it a gradient every add.
megatrain::DeviceProfile slowProfile() {
  megatrain::DeviceProfile profile;
  profile.hbmBytesPerS = 1e9;
  profile.hostAdamWParamsPerS = kElements / 0.030;
  return profile;
}

struct Layer {
  uint32_t master, m, v, copy, grad, stage;
};

// Three layers, forward 0, 1, 2 (each fetches its weight on compute right before its add, so the
// next step wants layer 0's update first), the loss read on the host, backward 2, 1, 0 (each
// gradient copied out, then its host AdamW). With `copyIntoStage`, layer 1's gradient comes last
// (its copy out queues on h2d behind a 158 ms fetch of a large tensor), and right after layer 1's
// update a copy on h2d writes into the staging bytes that update reads, as a ring's next
// gradient would.
pb::Plan threeLayers(bool copyIntoStage) {
  PlanBuilder b;
  const uint32_t x = b.tensor("x", {kElements}, pb::F32, pb::INPUT);
  const uint32_t loss = b.tensor("loss", {1}, pb::F32, pb::INPUT);
  const uint32_t readout = b.tensor("loss_readout", {1}, pb::F32, pb::LOSS_READOUT);
  std::vector<Layer> layers;
  for (int i = 0; i < 3; ++i) {
    const std::string n = std::to_string(i);
    Layer l;
    l.master = b.tensor("w" + n, {kElements}, pb::F32, pb::PARAMETER);
    l.m = b.tensor("adam_m:w" + n, {kElements}, pb::F32, pb::OPTIMIZER_STATE);
    l.v = b.tensor("adam_v:w" + n, {kElements}, pb::F32, pb::OPTIMIZER_STATE);
    l.copy = b.tensor("dev:w" + n, {kElements}, pb::F32, pb::PARAMETER_COPY);
    l.grad = b.tensor("g" + n, {kElements}, pb::F32, pb::ACTIVATION);
    l.stage = b.tensor("grad_stage:w" + n, {kElements}, pb::F32, pb::GRADIENT);
    layers.push_back(l);
  }
  uint32_t bigHost = 0, bigDevice = 0;
  if (copyIntoStage) {
    bigHost = b.tensor("big", {int64_t{1} << 31}, pb::F32, pb::PARAMETER_COMPUTE);
    bigDevice = b.tensor("dev:big", {int64_t{1} << 31}, pb::F32, pb::PARAMETER_COPY);
    b.copy(bigHost, bigDevice, "h2d");
  }
  std::vector<uint32_t> h;
  for (int i = 0; i < 3; ++i)
    h.push_back(b.tensor("h" + std::to_string(i), {kElements}, pb::F32, pb::ACTIVATION));
  uint32_t in = x;
  for (int i = 0; i < 3; ++i) {
    b.copy(layers[i].master, layers[i].copy, "compute");
    b.kernel("add", {in, layers[i].copy}, {h[i]});
    in = h[i];
  }
  b.copy(loss, readout, "d2h");
  b.readLoss(readout);
  for (int i = 2; i >= 0; --i) {
    b.kernel("add", {h[i], layers[i].copy}, {layers[i].grad});
    b.copy(layers[i].grad, layers[i].stage, copyIntoStage && i == 1 ? "h2d" : "d2h");
    b.adamw(layers[i].master, layers[i].stage, layers[i].m, layers[i].v);
    if (copyIntoStage && i == 1)
      b.copy(h[0], layers[1].stage, "h2d");
  }
  return b.build();
}

// The parameters the host stream's ADAMW steps update, in plan order.
std::vector<uint32_t> hostUpdates(const pb::Plan &plan) {
  std::vector<uint32_t> out;
  for (const pb::Step &step : plan.steps())
    if (step.has_host_task() && step.host_task().kind() == pb::HostTask::ADAMW)
      out.push_back(step.host_task().tensors(0));
  return out;
}

uint32_t tensorNamed(const pb::Plan &plan, const std::string &name) {
  for (const pb::Tensor &t : plan.tensors())
    if (t.name() == name)
      return t.id();
  ADD_FAILURE() << "no tensor " << name;
  return 0;
}

TEST(HostOrder, TheNextStepsFirstLayerIsUpdatedFirst) {
  pb::Plan plan = threeLayers(/*copyIntoStage=*/false);
  const uint32_t w0 = tensorNamed(plan, "w0"), w1 = tensorNamed(plan, "w1"), w2 = tensorNamed(plan, "w2");
  ASSERT_EQ(hostUpdates(plan), (std::vector<uint32_t>{w2, w1, w0}));
  const uint32_t g1 = tensorNamed(plan, "g1");
  const int64_t g1Last = plan.tensors(static_cast<int>(g1)).last_use_step();

  const megatrain::HostOrderResult result = megatrain::orderHostUpdates(plan, slowProfile());
  ASSERT_TRUE(result.applied) << result.why;
  EXPECT_EQ(result.tasks, 3u);
  EXPECT_EQ(result.moved, 2u);
  EXPECT_LT(result.after, result.before);
  // Layer 2's update runs as its gradient comes; of the two waiting when it is done, layer 0's,
  // which the next step fetches first, goes before layer 1's.
  EXPECT_EQ(hostUpdates(plan), (std::vector<uint32_t>{w2, w0, w1}));
  for (int i = 0; i < plan.steps_size(); ++i)
    EXPECT_EQ(plan.steps(i).index(), static_cast<uint32_t>(i));
  // g1 is last read by its copy out, which did not move: its last use is that step still.
  const pb::Step &last = plan.steps(static_cast<int>(plan.tensors(static_cast<int>(g1)).last_use_step()));
  ASSERT_TRUE(last.has_copy());
  EXPECT_EQ(last.copy().src(), g1);
  EXPECT_LE(plan.tensors(static_cast<int>(g1)).last_use_step(), g1Last);

  // The events and the verifier take the reordered plan as any other.
  megatrain::insertEvents(plan);
  const std::vector<std::string> failures = megatrain::verifySchedule(plan);
  EXPECT_TRUE(failures.empty()) << failures.front();
}

TEST(HostOrder, NoTaskPassesACopyIntoItsBytes) {
  // Layer 0's gradient comes before layer 1's, so its update would go first, moving layer 1's
  // past the copy into the bytes it reads: the plan stays in plan order.
  pb::Plan plan = threeLayers(/*copyIntoStage=*/true);
  const pb::Plan before = plan;
  const megatrain::HostOrderResult result = megatrain::orderHostUpdates(plan, slowProfile());
  EXPECT_FALSE(result.applied);
  EXPECT_EQ(result.why, "a task would move past a step that touches its bytes");
  EXPECT_EQ(plan.SerializeAsString(), before.SerializeAsString());
}

TEST(HostOrder, APlanWithEventsStaysAsItIs) {
  pb::Plan plan = threeLayers(/*copyIntoStage=*/false);
  megatrain::insertEvents(plan);
  const pb::Plan before = plan;
  const megatrain::HostOrderResult result = megatrain::orderHostUpdates(plan, slowProfile());
  EXPECT_FALSE(result.applied);
  EXPECT_EQ(result.why, "the plan already has events");
  EXPECT_EQ(plan.SerializeAsString(), before.SerializeAsString());
}

} // namespace
