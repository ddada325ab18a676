// SimulateTest.cpp - the plan simulator on hand-built plans: streams and events, the
// dependencies it assumes without events, the step-time breakdown and the memory peaks.
#include "megatrain/plan/OpCost.h"
#include "megatrain/plan/Simulate.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

namespace megatrain {
namespace {

namespace pb = plan;

constexpr uint32_t kDevice = 0, kHost = 1;

// Round figures so the expected times are easy to state.
DeviceProfile testProfile() {
  DeviceProfile profile;
  profile.name = "test-profile";
  profile.h2dBytesPerS = 1e9;
  profile.d2hBytesPerS = 2e9;
  profile.hbmBytesPerS = 1e12;
  profile.matmulFp32 = 1e12;
  profile.hostAdamWParamsPerS = 1e8;
  profile.launchS = 1e-6;
  return profile;
}

class Builder {
public:
  Builder() {
    plan.set_magic("megatrain.plan");
    plan.mutable_header()->set_format_major(1);
    for (auto [id, name, tier] : {std::tuple<uint32_t, const char *, pb::Tier>{kDevice, "device", pb::DEVICE},
                                  {kHost, "host", pb::HOST_PINNED}}) {
      pb::Pool *pool = plan.add_pools();
      pool->set_id(id);
      pool->set_name(name);
      pool->set_tier(tier);
      pool->set_size_bytes(1 << 24);
    }
    for (const char *stream : {"compute", "h2d", "d2h", "host"})
      plan.add_streams(stream);
  }

  // An f32 vector of `elements` at `offset` of `pool`.
  uint32_t tensor(const std::string &name, int64_t elements, pb::Role role, uint32_t pool,
                  uint64_t offset) {
    pb::Tensor *tensor = plan.add_tensors();
    tensor->set_id(static_cast<uint32_t>(plan.tensors_size() - 1));
    tensor->set_name(name);
    tensor->add_shape(elements);
    tensor->set_dtype(pb::F32);
    tensor->set_role(role);
    tensor->mutable_buffer()->set_pool(pool);
    tensor->mutable_buffer()->set_offset(offset);
    tensor->mutable_buffer()->set_size_bytes(static_cast<uint64_t>(elements) * 4);
    tensor->set_last_use_step(-1);
    return tensor->id();
  }

  pb::Step &step(const char *stream) {
    pb::Step *step = plan.add_steps();
    step->set_index(static_cast<uint32_t>(plan.steps_size() - 1));
    step->set_stream(stream);
    return *step;
  }
  int kernel(const char *name, std::initializer_list<uint32_t> inputs,
             std::initializer_list<uint32_t> outputs, bool recompute = false) {
    pb::Step &s = step("compute");
    s.mutable_kernel()->set_kernel(name);
    for (uint32_t id : inputs)
      s.mutable_kernel()->add_inputs(id);
    for (uint32_t id : outputs)
      s.mutable_kernel()->add_outputs(id);
    s.set_recompute(recompute);
    return static_cast<int>(s.index());
  }
  int copy(const char *stream, uint32_t src, uint32_t dst) {
    pb::Step &s = step(stream);
    s.mutable_copy()->set_src(src);
    s.mutable_copy()->set_dst(dst);
    return static_cast<int>(s.index());
  }
  int record(const char *stream, const char *event) {
    pb::Step &s = step(stream);
    s.mutable_record()->set_event(event);
    return static_cast<int>(s.index());
  }
  int wait(const char *stream, const char *event) {
    pb::Step &s = step(stream);
    s.mutable_wait()->set_event(event);
    return static_cast<int>(s.index());
  }
  int adamw(uint32_t param, uint32_t grad, uint32_t m, uint32_t v) {
    pb::Step &s = step("host");
    s.mutable_host_task()->set_kind(pb::HostTask::ADAMW);
    for (uint32_t id : {param, grad, m, v})
      s.mutable_host_task()->add_tensors(id);
    return static_cast<int>(s.index());
  }

  double start(int step) const { return plan.steps(step).predicted_start_s(); }
  double end(int step) const { return plan.steps(step).predicted_end_s(); }
  uint64_t peak(uint32_t pool) const {
    for (const pb::PoolUsage &usage : plan.header().predicted_peak())
      if (usage.pool() == pool)
        return usage.peak_bytes();
    ADD_FAILURE() << "no predicted peak for pool " << pool;
    return 0;
  }

  pb::Plan plan;
};

double elementwise(const DeviceProfile &profile, uint64_t bytesIn, uint64_t bytesOut) {
  return static_cast<double>(bytesIn + bytesOut) / profile.hbmBytesPerS + profile.launchS;
}

void expectBreakdownSums(const pb::Plan &plan) {
  const pb::StepTimeBreakdown &b = plan.header().predicted_breakdown();
  EXPECT_NEAR(b.compute_s() + b.exposed_transfer_s() + b.recompute_s() + b.host_optimizer_s() +
                  b.idle_s(),
              plan.header().predicted_step_s(), 1e-12);
  EXPECT_GE(b.idle_s(), 0);
}

// h2d: copy w -> dev:w, record e.  compute: wait e, relu(dev:w).
// The wait holds the kernel exactly until the copy is done.
TEST(Simulate, WaitDelaysTheComputeStepByTheCopyTime) {
  const DeviceProfile profile = testProfile();
  for (bool withWait : {true, false}) {
    Builder b;
    uint32_t w = b.tensor("w", 65536, pb::PARAMETER, kHost, 0);
    uint32_t dw = b.tensor("dev:w", 65536, pb::PARAMETER_COPY, kDevice, 0);
    uint32_t y = b.tensor("y", 65536, pb::ACTIVATION, kDevice, 1 << 20);
    int copy = b.copy("h2d", w, dw);
    b.record("h2d", "e");
    if (withWait)
      b.wait("compute", "e");
    int relu = b.kernel("relu", {dw}, {y});
    simulatePlan(b.plan, profile);

    const double copyS = transferSeconds(65536 * 4, Link::HostToDevice, profile);
    EXPECT_DOUBLE_EQ(b.start(copy), 0);
    EXPECT_DOUBLE_EQ(b.end(copy), copyS);
    // With events in the plan they are the only cross-stream order: without the wait the
    // kernel starts at once (what the verifier would reject).
    EXPECT_DOUBLE_EQ(b.start(relu), withWait ? copyS : 0.0) << "withWait " << withWait;
    const double reluS = elementwise(profile, 65536 * 4, 65536 * 4);
    EXPECT_DOUBLE_EQ(b.end(relu), b.start(relu) + reluS);
    const pb::StepTimeBreakdown &breakdown = b.plan.header().predicted_breakdown();
    EXPECT_DOUBLE_EQ(breakdown.exposed_transfer_s(), withWait ? copyS : 0.0);
    EXPECT_DOUBLE_EQ(breakdown.compute_s(), reluS);
    expectBreakdownSums(b.plan);
  }
}

// The link is one per direction, whichever stream copies over it: a prefetch on h2d that
// waits for its bytes (a relu on compute) leaves the link to a parameter's fetch on the
// `fetch` stream issued after it, which fits in the wait and lands first; two copies
// ready at once take it one after the other, in plan order.
TEST(Simulate, StreamsCopyingOneWayShareTheLink) {
  DeviceProfile profile = testProfile();
  profile.hbmBytesPerS = 1e9; // the relu outlasts a copy
  Builder b;
  b.plan.add_streams("fetch");
  uint32_t x = b.tensor("x", 65536, pb::ACTIVATION, kDevice, 0);
  uint32_t y = b.tensor("y", 65536, pb::ACTIVATION, kDevice, 1 << 20);
  uint32_t hp = b.tensor("offload:p", 65536, pb::OFFLOADED, kHost, 0);
  uint32_t p = b.tensor("prefetch:p", 65536, pb::ACTIVATION, kDevice, 2 << 20);
  uint32_t w = b.tensor("w", 65536, pb::PARAMETER, kHost, 1 << 20);
  uint32_t dw = b.tensor("dev:w", 65536, pb::PARAMETER_COPY, kDevice, 3 << 20);
  int relu = b.kernel("relu", {x}, {y});
  b.record("compute", "bytes");
  b.wait("h2d", "bytes");
  int prefetch = b.copy("h2d", hp, p);
  int fetch = b.copy("fetch", w, dw);
  simulatePlan(b.plan, profile);
  const double copyS = transferSeconds(65536 * 4, Link::HostToDevice, profile);
  const double reluS = elementwise(profile, 65536 * 4, 65536 * 4);
  ASSERT_GT(reluS, copyS); // the fetch fits in the prefetch's wait
  EXPECT_DOUBLE_EQ(b.start(fetch), 0);
  EXPECT_DOUBLE_EQ(b.end(fetch), copyS);
  // The prefetch waits for the relu only.
  EXPECT_DOUBLE_EQ(b.start(prefetch), b.end(relu));
  EXPECT_DOUBLE_EQ(b.end(prefetch), b.end(relu) + copyS);

  // Both ready at once on two streams: the second in plan order after the first.
  Builder c;
  c.plan.add_streams("fetch");
  uint32_t hp2 = c.tensor("offload:p", 65536, pb::OFFLOADED, kHost, 0);
  uint32_t p2 = c.tensor("prefetch:p", 65536, pb::ACTIVATION, kDevice, 0);
  uint32_t v2 = c.tensor("v", 65536, pb::PARAMETER, kHost, 1 << 20);
  uint32_t dv2 = c.tensor("dev:v", 65536, pb::PARAMETER_COPY, kDevice, 1 << 20);
  int first = c.copy("h2d", hp2, p2);
  int second = c.copy("fetch", v2, dv2);
  simulatePlan(c.plan, profile);
  EXPECT_DOUBLE_EQ(c.start(first), 0);
  EXPECT_DOUBLE_EQ(c.start(second), copyS);
  EXPECT_DOUBLE_EQ(c.end(second), 2 * copyS);
}

// A wait is released by the latest record of its event before it in plan order, not a
// later one: two fetches behind one event name.
TEST(Simulate, WaitUsesTheLatestEarlierRecord) {
  const DeviceProfile profile = testProfile();
  Builder b;
  uint32_t w1 = b.tensor("w1", 1000, pb::PARAMETER, kHost, 0);
  uint32_t w2 = b.tensor("w2", 1000, pb::PARAMETER, kHost, 4096);
  uint32_t d1 = b.tensor("dev:w1", 1000, pb::PARAMETER_COPY, kDevice, 0);
  uint32_t d2 = b.tensor("dev:w2", 1000, pb::PARAMETER_COPY, kDevice, 4096);
  uint32_t y1 = b.tensor("y1", 1000, pb::ACTIVATION, kDevice, 8192);
  uint32_t y2 = b.tensor("y2", 1000, pb::ACTIVATION, kDevice, 12288);
  b.copy("h2d", w1, d1);
  b.record("h2d", "fetched");
  b.wait("compute", "fetched");
  int first = b.kernel("relu", {d1}, {y1});
  b.copy("h2d", w2, d2);
  b.record("h2d", "fetched");
  int secondWait = b.wait("compute", "fetched");
  int second = b.kernel("relu", {d2}, {y2});
  simulatePlan(b.plan, profile);

  const double copyS = transferSeconds(4000, Link::HostToDevice, profile);
  const double reluS = elementwise(profile, 4000, 4000);
  EXPECT_DOUBLE_EQ(b.start(first), copyS);
  EXPECT_DOUBLE_EQ(b.start(secondWait), copyS + reluS); // reached when the first kernel ends
  EXPECT_DOUBLE_EQ(b.end(secondWait), 2 * copyS);       // released by the second record
  EXPECT_DOUBLE_EQ(b.start(second), 2 * copyS);
  EXPECT_DOUBLE_EQ(b.plan.header().predicted_step_s(), 2 * copyS + reluS);
  EXPECT_NEAR(b.plan.header().predicted_breakdown().exposed_transfer_s(), 2 * copyS - reluS, 1e-15);
  expectBreakdownSums(b.plan);
}

// Today's plans have no events: a step waits for the writers of what it reads (RAW), and
// nothing else across streams. Forward: fetch w while x's relu runs; matmul waits for both.
// Backward tail: the gradient goes out over d2h, the host updates w.
TEST(Simulate, WithoutEventsAStepWaitsForTheWritersOfItsInputs) {
  const DeviceProfile profile = testProfile();
  Builder b;
  uint32_t x = b.tensor("x", 256, pb::INPUT, kDevice, 0);
  uint32_t w = b.tensor("w", 256, pb::PARAMETER, kHost, 0);
  uint32_t dw = b.tensor("dev:w", 256, pb::PARAMETER_COPY, kDevice, 1024);
  uint32_t a = b.tensor("a", 256, pb::ACTIVATION, kDevice, 2048);
  uint32_t g = b.tensor("g", 256, pb::ACTIVATION, kDevice, 3072);
  uint32_t gw = b.tensor("grad:w", 256, pb::GRADIENT, kHost, 1024);
  uint32_t m = b.tensor("adam_m:w", 256, pb::OPTIMIZER_STATE, kHost, 2048);
  uint32_t v = b.tensor("adam_v:w", 256, pb::OPTIMIZER_STATE, kHost, 3072);
  int fetch = b.copy("h2d", w, dw);
  int relu = b.kernel("relu", {x}, {a});
  int mul = b.kernel("mul", {a, dw}, {g});
  int out = b.copy("d2h", g, gw);
  int update = b.adamw(w, gw, m, v);
  simulatePlan(b.plan, profile);

  const double fetchS = transferSeconds(1024, Link::HostToDevice, profile);
  const double reluS = elementwise(profile, 1024, 1024);
  const double mulS = elementwise(profile, 2048, 1024);
  const double outS = transferSeconds(1024, Link::DeviceToHost, profile);
  const double adamS = hostAdamWSeconds(256, profile);
  ASSERT_GT(fetchS, reluS);
  EXPECT_DOUBLE_EQ(b.start(fetch), 0);
  EXPECT_DOUBLE_EQ(b.start(relu), 0); // x needs no writer: it runs beside the fetch
  EXPECT_DOUBLE_EQ(b.start(mul), fetchS);
  EXPECT_DOUBLE_EQ(b.start(out), fetchS + mulS);
  EXPECT_DOUBLE_EQ(b.start(update), fetchS + mulS + outS);
  EXPECT_DOUBLE_EQ(b.plan.header().predicted_step_s(), fetchS + mulS + outS + adamS);

  const pb::Header &h = b.plan.header();
  EXPECT_EQ(h.h2d_bytes(), 1024u);
  EXPECT_EQ(h.d2h_bytes(), 1024u);
  const pb::StepTimeBreakdown &bd = h.predicted_breakdown();
  EXPECT_DOUBLE_EQ(bd.compute_s(), reluS + mulS);
  EXPECT_DOUBLE_EQ(bd.exposed_transfer_s(), fetchS - reluS);
  EXPECT_DOUBLE_EQ(bd.recompute_s(), 0);
  EXPECT_DOUBLE_EQ(bd.host_optimizer_s(), adamS); // all of it after the last kernel
  EXPECT_NEAR(bd.idle_s(), outS, 1e-15);          // the gradient's copy out
  expectBreakdownSums(b.plan);
}

// A host update after the loss is read runs on beside the next step (docs/runtime.md, "Host
// updates across steps"): the steps repeat once the device's streams are done, and the next
// step's first touch of the update's bytes (the fetch of w, one kernel in) waits for it. The
// same plan with the loss read after the update is one step end to end.
TEST(Simulate, HostUpdatesAfterTheLossRunIntoTheNextStep) {
  const DeviceProfile profile = testProfile();
  for (bool lossFirst : {true, false}) {
    SCOPED_TRACE(lossFirst ? "loss read before the update" : "loss read last");
    Builder b;
    uint32_t x = b.tensor("x", 4096, pb::INPUT, kDevice, 0);
    uint32_t a = b.tensor("a", 4096, pb::ACTIVATION, kDevice, 16384);
    uint32_t w = b.tensor("w", 4096, pb::PARAMETER, kHost, 0);
    uint32_t dw = b.tensor("dev:w", 4096, pb::PARAMETER_COPY, kDevice, 32768);
    uint32_t g = b.tensor("g", 4096, pb::ACTIVATION, kDevice, 49152);
    uint32_t gw = b.tensor("grad:w", 4096, pb::GRADIENT, kHost, 16384);
    uint32_t m = b.tensor("adam_m:w", 4096, pb::OPTIMIZER_STATE, kHost, 32768);
    uint32_t v = b.tensor("adam_v:w", 4096, pb::OPTIMIZER_STATE, kHost, 49152);
    uint32_t loss = b.tensor("loss", 1, pb::LOSS, kHost, 65536);
    auto readLoss = [&] {
      pb::Step &s = b.step("host");
      s.mutable_host_task()->set_kind(pb::HostTask::READ_LOSS);
      s.mutable_host_task()->add_tensors(loss);
    };
    int relu = b.kernel("relu", {x}, {a});
    b.record("compute", "e0");
    b.wait("h2d", "e0");
    int fetch = b.copy("h2d", w, dw);
    b.record("h2d", "e1");
    b.wait("compute", "e1");
    int mul = b.kernel("mul", {a, dw}, {g});
    b.record("compute", "e2");
    b.wait("d2h", "e2");
    int out = b.copy("d2h", g, gw);
    b.record("d2h", "e3");
    if (lossFirst)
      readLoss();
    b.wait("host", "e3");
    int update = b.adamw(w, gw, m, v);
    if (!lossFirst)
      readLoss();
    simulatePlan(b.plan, profile);

    const double reluS = b.end(relu) - b.start(relu);
    const double updateS = hostAdamWSeconds(4096, profile);
    ASSERT_DOUBLE_EQ(b.start(fetch), reluS);
    ASSERT_DOUBLE_EQ(b.end(update) - b.start(update), updateS);
    ASSERT_GT(updateS, b.end(out));  // the host bounds the step
    const pb::Header &h = b.plan.header();
    if (lossFirst) {
      // The next step's fetch of w, a kernel in, waits for the update.
      EXPECT_DOUBLE_EQ(h.predicted_step_s(), b.end(update) - b.start(fetch));
      EXPECT_DOUBLE_EQ(h.predicted_breakdown().host_optimizer_s(),
                       h.predicted_step_s() - b.end(out));
    } else {
      EXPECT_DOUBLE_EQ(h.predicted_step_s(), b.end(update));
    }
    EXPECT_DOUBLE_EQ(b.start(mul), b.end(fetch));
    expectBreakdownSums(b.plan);
  }
}

// hostRateFloor: the slowest host AdamW rate whose step stays within 1% of the profile's.
// Nothing updated in host memory: 0. An update beside a long kernel: the rate at which it
// would end 1% after that kernel (checked by simulating just above and below it). An update
// that ends the step: just under the profile's own rate. The plan is left as it was.
TEST(Simulate, HostRateFloor) {
  DeviceProfile profile = testProfile();
  auto build = [](bool longKernel, bool hostUpdate) {
    Builder b;
    for (pb::Pool &pool : *b.plan.mutable_pools())
      pool.set_size_bytes(uint64_t{1} << 30);
    uint32_t x = b.tensor("x", 4096, pb::INPUT, kDevice, 0);
    uint32_t a = b.tensor("a", 4096, pb::ACTIVATION, kDevice, 16384);
    uint32_t big = b.tensor("big", 1 << 24, pb::ACTIVATION, kDevice, 1 << 20);
    uint32_t out = b.tensor("out", 1 << 24, pb::ACTIVATION, kDevice, 1 << 27);
    uint32_t w = b.tensor("w", 4096, pb::PARAMETER, kHost, 0);
    uint32_t gw = b.tensor("grad:w", 4096, pb::GRADIENT, kHost, 16384);
    uint32_t m = b.tensor("adam_m:w", 4096, pb::OPTIMIZER_STATE, kHost, 32768);
    uint32_t v = b.tensor("adam_v:w", 4096, pb::OPTIMIZER_STATE, kHost, 49152);
    b.kernel("relu", {x}, {a});
    b.record("compute", "e0");
    b.wait("d2h", "e0");
    b.copy("d2h", a, gw);
    b.record("d2h", "e1");
    b.wait("host", "e1");
    if (hostUpdate)
      b.adamw(w, gw, m, v);
    if (longKernel)
      b.kernel("relu", {big}, {out});
    return b.plan;
  };
  EXPECT_EQ(hostRateFloor(build(true, false), profile), 0);

  pb::Plan beside = build(true, true);
  simulatePlan(beside, profile);
  const pb::Plan before = beside;
  const double floor = hostRateFloor(beside, profile);
  EXPECT_EQ(beside.SerializeAsString(), before.SerializeAsString());
  ASSERT_GT(floor, profile.hostAdamWParamsPerS / 64);
  ASSERT_LT(floor, profile.hostAdamWParamsPerS / 2);  // the kernel is far longer than the update
  const double step = beside.header().predicted_step_s();
  auto stepAt = [&](double rate) {
    DeviceProfile slower = profile;
    slower.hostAdamWParamsPerS = rate;
    pb::Plan copy = beside;
    simulatePlan(copy, slower);
    return copy.header().predicted_step_s();
  };
  EXPECT_LE(stepAt(floor), step * 1.01);
  EXPECT_GT(stepAt(floor / 1.02), step * 1.01);

  const pb::Plan last = build(false, true);  // the update ends the step
  const double bound = hostRateFloor(last, profile);
  EXPECT_LT(bound, profile.hostAdamWParamsPerS);
  EXPECT_GT(bound, profile.hostAdamWParamsPerS / 1.01 / 1.01);
}

// Without events a write also waits for the last readers of the bytes it reuses: a fetch
// into bytes an earlier activation occupied starts when that activation's reader ends.
TEST(Simulate, WithoutEventsAWriteWaitsForTheReadersOfItsBytes) {
  const DeviceProfile profile = testProfile();
  Builder b;
  uint32_t x = b.tensor("x", 4096, pb::INPUT, kDevice, 0);
  uint32_t a = b.tensor("a", 4096, pb::ACTIVATION, kDevice, 16384);
  uint32_t y = b.tensor("y", 4096, pb::ACTIVATION, kDevice, 32768);
  uint32_t w = b.tensor("w", 2048, pb::PARAMETER, kHost, 0);
  uint32_t dw = b.tensor("dev:w", 2048, pb::PARAMETER_COPY, kDevice, 20480); // inside a
  int first = b.kernel("relu", {x}, {a});
  int reader = b.kernel("exp", {a}, {y});
  int fetch = b.copy("h2d", w, dw);
  simulatePlan(b.plan, profile);
  EXPECT_DOUBLE_EQ(b.start(reader), b.end(first));
  EXPECT_DOUBLE_EQ(b.start(fetch), b.end(reader));
}

// Recompute kernels are charged to recompute_s, not compute_s.
TEST(Simulate, RecomputeKernelsAreCountedApart) {
  const DeviceProfile profile = testProfile();
  Builder b;
  uint32_t x = b.tensor("x", 1024, pb::INPUT, kDevice, 0);
  uint32_t a = b.tensor("a", 1024, pb::ACTIVATION, kDevice, 4096);
  uint32_t a2 = b.tensor("a.recomputed", 1024, pb::ACTIVATION, kDevice, 8192);
  uint32_t y = b.tensor("y", 1024, pb::ACTIVATION, kDevice, 12288);
  b.kernel("relu", {x}, {a});
  b.kernel("relu", {x}, {a2}, /*recompute=*/true);
  b.kernel("add", {a, a2}, {y});
  simulatePlan(b.plan, profile);
  const pb::StepTimeBreakdown &bd = b.plan.header().predicted_breakdown();
  const double reluS = elementwise(profile, 4096, 4096);
  EXPECT_DOUBLE_EQ(bd.recompute_s(), reluS);
  EXPECT_DOUBLE_EQ(bd.compute_s(), reluS + elementwise(profile, 8192, 4096));
  EXPECT_DOUBLE_EQ(bd.idle_s(), 0);
  expectBreakdownSums(b.plan);
}

// Matmul kernels cost their FLOPs when those dominate; the plan's int attributes reach the
// cost model (transpose_a picks the contracted dimension).
TEST(Simulate, KernelCostUsesShapesAndAttributes) {
  DeviceProfile profile = testProfile();
  Builder b;
  auto matrix = [&](const char *name, int64_t rows, int64_t cols, uint64_t offset) {
    uint32_t id = b.tensor(name, rows * cols, pb::ACTIVATION, kDevice, offset);
    pb::Tensor &t = *b.plan.mutable_tensors(static_cast<int>(id));
    t.clear_shape();
    t.add_shape(rows);
    t.add_shape(cols);
    return id;
  };
  uint32_t a = matrix("a", 512, 64, 0);   // used transposed: [64, 512]
  uint32_t w = matrix("w", 512, 256, 1 << 20);
  uint32_t y = matrix("y", 64, 256, 2 << 20);
  b.plan.mutable_tensors(static_cast<int>(a))->set_role(pb::INPUT);
  b.plan.mutable_tensors(static_cast<int>(w))->set_role(pb::INPUT);
  int mm = b.kernel("matmul", {a, w}, {y});
  pb::Attribute *attr = b.plan.mutable_steps(mm)->mutable_kernel()->add_attributes();
  attr->set_name("transpose_a");
  attr->set_i(1);
  simulatePlan(b.plan, profile);
  const double flops = 2.0 * 64 * 256 * 512;
  EXPECT_DOUBLE_EQ(b.end(mm) - b.start(mm), flops / profile.matmulFp32 + profile.launchS);
}

// Peaks are over predicted time: x and a live during the first kernel, a and b during the
// second, b and c during the third, plus dev:w from the start of its fetch (which runs
// beside the first kernel) to the end of its reader.
TEST(Simulate, PeakBytesOverPredictedTime) {
  const DeviceProfile profile = testProfile();
  Builder b;
  uint32_t x = b.tensor("x", 4096, pb::INPUT, kDevice, 0);          // 16 KiB
  uint32_t a = b.tensor("a", 2048, pb::ACTIVATION, kDevice, 16384); // 8 KiB
  uint32_t bb = b.tensor("b", 1024, pb::ACTIVATION, kDevice, 24576);
  uint32_t c = b.tensor("c", 1024, pb::ACTIVATION, kDevice, 28672);
  uint32_t w = b.tensor("w", 1024, pb::PARAMETER, kHost, 0);
  uint32_t dw = b.tensor("dev:w", 1024, pb::PARAMETER_COPY, kDevice, 32768);
  b.tensor("adam_m:w", 1024, pb::OPTIMIZER_STATE, kHost, 4096);
  b.copy("h2d", w, dw);
  b.kernel("relu", {x}, {a});
  b.kernel("reduce_sum", {a}, {bb});
  b.kernel("mul", {bb, dw}, {c});
  simulatePlan(b.plan, profile);
  EXPECT_EQ(b.peak(kDevice), 16384u + 8192u + 4096u);
  EXPECT_EQ(b.peak(kHost), 4096u + 4096u); // persistent: the master and its moment
  // Without the fetch overlapping the first kernel the peak would be lower: check the
  // fetch did start at 0.
  EXPECT_DOUBLE_EQ(b.start(0), 0);
}

TEST(Simulate, WritesTheHeader) {
  Builder b;
  uint32_t x = b.tensor("x", 16, pb::INPUT, kDevice, 0);
  uint32_t y = b.tensor("y", 16, pb::ACTIVATION, kDevice, 64);
  b.kernel("relu", {x}, {y});
  pb::PoolUsage *stale = b.plan.mutable_header()->add_predicted_peak();
  stale->set_pool(kDevice);
  stale->set_peak_bytes(999999);
  simulatePlan(b.plan, testProfile());
  const pb::Header &h = b.plan.header();
  EXPECT_EQ(h.format_minor(), 2u);
  EXPECT_NE(h.device_profile().find("\"name\":\"test-profile\""), std::string::npos)
      << h.device_profile();
  EXPECT_DOUBLE_EQ(h.predicted_step_s(), b.end(0));
  ASSERT_EQ(h.predicted_peak_size(), 2); // one per pool, the stale entry replaced
  EXPECT_EQ(b.peak(kDevice), 128u);
  EXPECT_EQ(b.peak(kHost), 0u);
}

} // namespace
} // namespace megatrain

// ---- attention priced as the CUDA backend runs it: fp32 and tf32 on the GEMM
// path (GEMM FLOPs at the precision's rate plus the row passes over the f32
// scores at HBM bandwidth), bf16 on cuDNN's fused kernels ----
namespace megatrain {
namespace {

KernelDesc attentionDesc(const char *name, int64_t s, int64_t t, bool causal) {
  KernelDesc kernel;
  kernel.kernel = name;
  TensorShape q{{2, 4, s, 64}}, kv{{2, 2, t, 64}}, lse{{2, 4, s}};
  kernel.inputs = {q, kv, kv};
  if (kernel.kernel == "attention_grad")
    kernel.inputs.insert(kernel.inputs.end(), {q, lse, q});
  kernel.intAttrs["causal"] = causal ? 1 : 0;
  return kernel;
}

TEST(OpCost, AttentionIsGemmsPlusRowPasses) {
  DeviceProfile profile = testProfile();
  profile.matmulTf32 = 4e12;
  profile.matmulBf16 = 8e12;
  const double full = 2.0 * 2.0 * (2 * 4) * 1024.0 * 1024.0 * 64; // S and PV, every score
  KernelCost forward = estimateKernel(attentionDesc("attention", 1024, 1024, false), profile);
  EXPECT_DOUBLE_EQ(forward.flops, full);
  // Causal rows in blocks of 512: the first block stops at key 512, the second at 1024.
  KernelCost causal = estimateKernel(attentionDesc("attention", 1024, 1024, true), profile);
  EXPECT_DOUBLE_EQ(causal.flops, 0.75 * full);
  KernelCost backward = estimateKernel(attentionDesc("attention_grad", 1024, 1024, true), profile);
  EXPECT_DOUBLE_EQ(backward.flops, 2.5 * causal.flops);
  // The row passes move more bytes than the operands: far above a roofline of q, k, v, y, lse.
  double operands = 4.0 * (2 * 2 * 2 * 1024 * 64 + 2 * 2 * 4 * 1024 * 64 + 2 * 4 * 1024);
  EXPECT_GT(forward.bytes, 10 * operands);
  for (const KernelCost &cost : {forward, causal, backward})
    EXPECT_DOUBLE_EQ(cost.seconds, cost.flops / profile.matmulFp32 + cost.bytes / profile.hbmBytesPerS +
                                       profile.launchS);
  // Cheaper precisions: faster GEMMs, and bf16 fused (no score bytes at all).
  KernelCost tf32 = estimateKernel(attentionDesc("attention", 1024, 1024, true), profile, Precision::TF32);
  KernelCost bf16 = estimateKernel(attentionDesc("attention", 1024, 1024, true), profile, Precision::BF16);
  EXPECT_LT(tf32.seconds, causal.seconds);
  EXPECT_LT(bf16.seconds, tf32.seconds);
  EXPECT_LT(bf16.bytes, causal.bytes);
}

// The profile's kernel_efficiency divides a family's roofline time (not the
// launch); other families keep theirs.
TEST(OpCost, KernelEfficiencyScalesOnlyItsFamily) {
  DeviceProfile profile = testProfile();
  KernelDesc add;
  add.kernel = "add";
  add.inputs = {TensorShape{{1024, 1024}}, TensorShape{{1024, 1024}}};
  add.outputs = {TensorShape{{1024, 1024}}};
  KernelDesc attention = attentionDesc("attention", 1024, 1024, true);
  const KernelCost addBefore = estimateKernel(add, profile);
  const KernelCost attentionBefore = estimateKernel(attention, profile, Precision::BF16);
  profile.kernelEfficiency["add"] = 0.5;
  profile.kernelEfficiency["attention"] = 0.8;
  const KernelCost addAfter = estimateKernel(add, profile);
  EXPECT_DOUBLE_EQ(addAfter.bytes, addBefore.bytes);
  EXPECT_DOUBLE_EQ(addAfter.seconds - profile.launchS, 2.0 * (addBefore.seconds - profile.launchS));
  EXPECT_DOUBLE_EQ(estimateKernel(attention, profile, Precision::BF16).seconds - profile.launchS,
                   (attentionBefore.seconds - profile.launchS) / 0.8);
  add.kernel = "mul";
  profile.kernelEfficiency.erase("add");
  EXPECT_DOUBLE_EQ(estimateKernel(add, profile).seconds, addBefore.seconds);
}

// bf16: the visible (query, key) pairs' products at a fraction of the bf16
// rate, then the operands' and results' bf16 copies (6 bytes an element, 4 of
// them the f32 operand or result itself): bytes grow with S, not S^2.
TEST(OpCost, Bf16AttentionIsFused) {
  DeviceProfile profile = testProfile();
  profile.matmulBf16 = 8e12;
  const double heads = 2 * 4, s = 1024, d = 64;
  const double visible = s * (s + 1) / 2; // causal: row i sees i + 1 keys
  const double qElements = 2 * 4 * 1024 * 64, kvElements = 2 * 2 * 1024 * 64, lse = 2 * 4 * 1024;
  KernelDesc forwardDesc = attentionDesc("attention", 1024, 1024, true);
  forwardDesc.outputs = {TensorShape{{2, 4, 1024, 64}}, TensorShape{{2, 4, 1024}}};
  KernelCost forward = estimateKernel(forwardDesc, profile, Precision::BF16);
  EXPECT_DOUBLE_EQ(forward.flops, 2.0 * 2.0 * heads * visible * d);
  EXPECT_DOUBLE_EQ(forward.bytes, 4.0 * (qElements + 2 * kvElements) + 4.0 * (qElements + lse) +
                                      2.0 * (2 * qElements + 2 * kvElements));
  // The efficiency: between a tenth of the rate and the rate itself.
  const double arithmetic = forward.seconds - forward.bytes / profile.hbmBytesPerS - profile.launchS;
  EXPECT_GT(arithmetic, forward.flops / profile.matmulBf16);
  EXPECT_LT(arithmetic, 10 * forward.flops / profile.matmulBf16);
  // Not causal: every pair; more keys than queries: causal rows still see i + 1.
  EXPECT_DOUBLE_EQ(estimateKernel(attentionDesc("attention", 1024, 2048, false), profile, Precision::BF16).flops,
                   2.0 * 2.0 * heads * s * 2048 * d);
  EXPECT_DOUBLE_EQ(estimateKernel(attentionDesc("attention", 1024, 2048, true), profile, Precision::BF16).flops,
                   forward.flops);
  // Backward: five products over the same pairs, slower per FLOP than forward.
  KernelCost backward = estimateKernel(attentionDesc("attention_grad", 1024, 1024, true), profile, Precision::BF16);
  EXPECT_DOUBLE_EQ(backward.flops, 2.5 * forward.flops);
  const double backwardArithmetic = backward.seconds - backward.bytes / profile.hbmBytesPerS - profile.launchS;
  EXPECT_GT(backwardArithmetic / backward.flops, arithmetic / forward.flops);
  // Doubling S quadruples the FLOPs but only doubles the bytes.
  KernelDesc longer = attentionDesc("attention", 2048, 2048, true);
  longer.outputs = {TensorShape{{2, 4, 2048, 64}}, TensorShape{{2, 4, 2048}}};
  KernelCost twice = estimateKernel(longer, profile, Precision::BF16);
  EXPECT_DOUBLE_EQ(twice.bytes, 2 * forward.bytes);
  EXPECT_GT(twice.flops, 3.9 * forward.flops);
}

// bf16 operands and results (--precision bf16: everything but lse bf16) go to
// cuDNN as they are: the bytes are the operands' and results' own, no copies;
// the FLOPs and the rate are the f32 form's, so it is cheaper by the copies alone.
TEST(OpCost, Bf16OperandAttentionHasNoCopies) {
  DeviceProfile profile = testProfile();
  profile.matmulBf16 = 8e12;
  const double qElements = 2 * 4 * 1024 * 64, kvElements = 2 * 2 * 1024 * 64, lse = 2 * 4 * 1024;
  auto bf16 = [](KernelDesc d) {
    for (TensorShape &t : d.inputs)
      if (t.dims.size() == 4)
        t.elementBytes = 2;
    for (TensorShape &t : d.outputs)
      if (t.dims.size() == 4)
        t.elementBytes = 2;
    return d;
  };
  KernelDesc f32Forward = attentionDesc("attention", 1024, 1024, true);
  f32Forward.outputs = {TensorShape{{2, 4, 1024, 64}}, TensorShape{{2, 4, 1024}}};
  const KernelCost f32 = estimateKernel(f32Forward, profile, Precision::BF16);
  const KernelCost forward = estimateKernel(bf16(f32Forward), profile, Precision::BF16);
  EXPECT_DOUBLE_EQ(forward.bytes, 2.0 * (qElements + 2 * kvElements) + 2.0 * qElements + 4.0 * lse);
  EXPECT_DOUBLE_EQ(forward.flops, f32.flops);
  const double copies = (f32.bytes - forward.bytes) / profile.hbmBytesPerS;
  EXPECT_NEAR(f32.seconds - forward.seconds, copies, 1e-9 * copies);

  KernelDesc f32Backward = attentionDesc("attention_grad", 1024, 1024, true);
  f32Backward.outputs = {TensorShape{{2, 4, 1024, 64}}, TensorShape{{2, 2, 1024, 64}}, TensorShape{{2, 2, 1024, 64}}};
  const KernelCost backward = estimateKernel(bf16(f32Backward), profile, Precision::BF16);
  EXPECT_DOUBLE_EQ(backward.bytes, 2.0 * (3 * qElements + 2 * kvElements) + 4.0 * lse +
                                       2.0 * (qElements + 2 * kvElements));
  // The f32 form: the same reads and writes at 4 bytes, plus 2 of copy per element of each.
  const KernelCost f32Grad = estimateKernel(f32Backward, profile, Precision::BF16);
  EXPECT_DOUBLE_EQ(f32Grad.bytes, 4.0 * (3 * qElements + 2 * kvElements) + 4.0 * lse +
                                      4.0 * (qElements + 2 * kvElements) + 2.0 * (4 * qElements + 4 * kvElements));
  // Results not given take their operands' types: still no copies.
  KernelDesc noResults = bf16(attentionDesc("attention_grad", 1024, 1024, true));
  EXPECT_DOUBLE_EQ(estimateKernel(noResults, profile, Precision::BF16).bytes,
                   2.0 * (3 * qElements + 2 * kvElements) + 4.0 * lse);
  // Layouts [B, S, H, D] (bshd) are the same work.
  KernelDesc bshd = bf16(f32Forward);
  for (TensorShape &t : bshd.inputs)
    std::swap(t.dims[1], t.dims[2]);
  std::swap(bshd.outputs[0].dims[1], bshd.outputs[0].dims[2]);
  bshd.intAttrs["bshd"] = 15;
  EXPECT_DOUBLE_EQ(estimateKernel(bshd, profile, Precision::BF16).bytes, forward.bytes);
}

// linear_ce: one product over the logits forward, three backward (the logits recomputed,
// dhidden, dweight), plus the tile passes and the launches of each chunk; the products at the
// matmul family's efficiency, the passes at the op's own.
TEST(OpCost, LinearCeRecomputesTheLogitsInItsGradient) {
  DeviceProfile profile = testProfile();
  profile.matmulBf16 = 8e12;
  const double rows = 4 * 256, h = 512, v = 1000, logits = rows * v;
  auto desc = [&](const char *name, int64_t chunk) {
    KernelDesc d;
    d.kernel = name;
    d.inputs = {TensorShape{{4, 256, 512}, 2}, TensorShape{{1000, 512}, 2}, TensorShape{{4, 256}, 8}};
    if (std::string(name) == "linear_ce") {
      d.outputs = {TensorShape{{}}, TensorShape{{4, 256}}};
    } else {
      d.inputs.push_back(TensorShape{{4, 256}});
      d.inputs.push_back(TensorShape{{}});
      d.outputs = {TensorShape{{4, 256, 512}}, TensorShape{{1000, 512}}};
    }
    d.intAttrs["chunk"] = chunk;
    return d;
  };
  const KernelCost forward = estimateKernel(desc("linear_ce", 256), profile, Precision::BF16);
  const KernelCost backward = estimateKernel(desc("linear_ce_grad", 256), profile, Precision::BF16);
  EXPECT_DOUBLE_EQ(forward.flops, 2.0 * logits * h);
  EXPECT_DOUBLE_EQ(backward.flops, 3 * forward.flops);
  // The f32 tile written and read (8 bytes a logit); backward also its bf16 gradient (6).
  const double operands = 2 * (rows * h + v * h) + 8 * rows;
  EXPECT_DOUBLE_EQ(forward.bytes, operands + 4 + 4 * rows + 8 * logits);
  // 4 chunks (the last 232 rows): 2 launches each and 3 more forward.
  EXPECT_DOUBLE_EQ(forward.seconds, forward.flops / 8e12 + forward.bytes / 1e12 + 11 * profile.launchS);
  EXPECT_GT(backward.seconds, 2.5 * forward.seconds);
  // Smaller chunks: the same work in more launches.
  EXPECT_NEAR(estimateKernel(desc("linear_ce", 128), profile, Precision::BF16).seconds - forward.seconds,
              8 * profile.launchS, 1e-15);
  // The family efficiencies: matmul's scales the products, linear_ce's the tile passes.
  profile.kernelEfficiency["matmul"] = 0.5;
  profile.kernelEfficiency["linear_ce"] = 0.25;
  EXPECT_DOUBLE_EQ(estimateKernel(desc("linear_ce", 256), profile, Precision::BF16).seconds,
                   forward.flops / 4e12 + forward.bytes / 0.25e12 + 11 * profile.launchS);
}

// A fused pointwise chain (mt-fuse-pointwise) costs its inputs read once (a broadcast one
// at its own size, bf16 at 2 bytes) and its outputs written once, and one launch: less
// than the chain it replaces, which wrote and read back every intermediate value.
TEST(OpCost, PointwiseIsItsBytesOnce) {
  DeviceProfile profile = testProfile();
  KernelDesc fused{"pointwise", {{{64, 1024}}, {{1024}}}, {{{64, 1024}}, {{64, 1024}, 2}}, {}};
  KernelCost cost = estimateKernel(fused, profile);
  const double bytes = 4.0 * 64 * 1024 + 4.0 * 1024 + 4.0 * 64 * 1024 + 2.0 * 64 * 1024;
  EXPECT_DOUBLE_EQ(cost.bytes, bytes);
  EXPECT_DOUBLE_EQ(cost.flops, 0);
  EXPECT_DOUBLE_EQ(cost.seconds, bytes / profile.hbmBytesPerS + profile.launchS);
  // The same work unfused: add(x, b), then a cast of the sum to bf16.
  KernelCost add = estimateKernel({"add", {{{64, 1024}}, {{1024}}}, {{{64, 1024}}}, {}}, profile);
  KernelCost cast = estimateKernel({"cast", {{{64, 1024}}}, {{{64, 1024}, 2}}, {}}, profile);
  EXPECT_LT(cost.seconds, add.seconds + cast.seconds);
}

// A matmul with the residual add in its epilogue (mt-fuse-matmul-epilogues): the product's
// FLOPs, its operands' and result's bytes plus the addend's read, one launch; less than the
// product and the add kernel that read the product back from memory.
TEST(OpCost, MatmulAddIsTheProductWithTheAddendRead) {
  DeviceProfile profile = testProfile();
  const TensorShape x{{8, 512, 2048}, 2}, w{{2048, 2048}, 2}, y{{8, 512, 2048}};
  KernelDesc fused{"matmul_add", {x, w, y}, {y}, {{"transpose_b", 1}}};
  KernelCost cost = estimateKernel(fused, profile, Precision::BF16);
  EXPECT_DOUBLE_EQ(cost.flops, 2.0 * 8 * 512 * 2048 * 2048);
  EXPECT_DOUBLE_EQ(cost.bytes, static_cast<double>(x.bytes() + w.bytes() + 2 * y.bytes()));
  KernelCost product = estimateKernel({"matmul", {x, w}, {y}, {{"transpose_b", 1}}}, profile, Precision::BF16);
  KernelCost add = estimateKernel({"add", {y, y}, {y}, {}}, profile);
  EXPECT_DOUBLE_EQ(cost.flops, product.flops);
  EXPECT_LT(cost.seconds, product.seconds + add.seconds);
  // The addend's bytes do count: a memory-bound product pays for them.
  const TensorShape thin{{8, 512, 8}, 2}, wThin{{8, 2048}, 2};
  KernelCost thinFused = estimateKernel({"matmul_add", {thin, wThin, y}, {y}, {}}, profile, Precision::BF16);
  KernelCost thinProduct = estimateKernel({"matmul", {thin, wThin}, {y}, {}}, profile, Precision::BF16);
  EXPECT_GT(thinFused.seconds, thinProduct.seconds);
}

} // namespace
} // namespace megatrain
