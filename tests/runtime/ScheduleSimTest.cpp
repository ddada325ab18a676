// ScheduleSimTest.cpp - ScheduleBackend on hand-built plans: sound plans give plan order's bits
// under every interleaving, a missing event is found.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <cstring>
#include <random>

#include "MicrobatchPlans.h"
#include "ScheduleBackend.h"
#include "TinyPlans.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/PlanVerifier.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/OnnxWeights.h"

namespace megatrain::runtime::testing {
namespace {

struct Result {
  std::vector<double> losses;
  std::vector<std::byte> weights, output;
};

class ScheduleSim : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = makeTempDir();
    std::mt19937 rng(11);
    writeModel(dir_ + "/linear.onnx", {{"W", randomTensor({3, 2}, plan::F64, rng)}});
  }

  Result run(const plan::Plan& plan, std::unique_ptr<Backend> backend) {
    Executor executor(plan, std::move(backend));
    executor.loadWeights(OnnxWeights(dir_ + "/linear.onnx"));
    HostArray x = HostArray::zeros(ElementType::F64, {4, 3});
    for (int i = 0; i < 12; ++i) x.data<double>()[i] = 0.3 * i - 1.5;
    executor.setInput("x", x);
    Result result;
    for (int s = 0; s < 3; ++s) result.losses.push_back(executor.runStep());
    result.weights = executor.readBytes("W");
    if (executor.hasTensor("output:y")) result.output = executor.readBytes("output:y");
    return result;
  }

  static std::unique_ptr<Backend> scheduled(ScheduleOptions options) {
    return std::make_unique<ScheduleBackend>(std::make_unique<CpuBackend>(), std::move(options));
  }

  static std::vector<ScheduleOptions> schedules() {
    std::vector<ScheduleOptions> all;
    for (uint64_t seed = 1; seed <= 8; ++seed) all.push_back({SchedulePolicy::Random, seed, ""});
    all.push_back({SchedulePolicy::Behind, 0, ""});
    all.push_back({SchedulePolicy::Ahead, 0, ""});
    for (const char* stream : {"h2d", "fetch", "compute", "d2h", "host"})
      all.push_back({SchedulePolicy::Starve, 3, stream});
    return all;
  }

  // How many schedules give other bits than plan order.
  int differing(const plan::Plan& plan) {
    const Result reference = run(plan, std::make_unique<CpuBackend>());
    for (double loss : reference.losses) EXPECT_TRUE(std::isfinite(loss));
    int count = 0;
    for (const ScheduleOptions& options : schedules()) {
      const Result result = run(plan, scheduled(options));
      const bool same = std::memcmp(result.losses.data(), reference.losses.data(),
                                    reference.losses.size() * sizeof(double)) == 0 &&
                        result.weights == reference.weights && result.output == reference.output;
      count += same ? 0 : 1;
    }
    return count;
  }

  std::string dir_;
};

TEST_F(ScheduleSim, SoundPlanGivesPlanOrderBitsUnderEverySchedule) {
  for (bool keepOutput : {false, true}) {
    const plan::Plan plan = linearPlan(plan::F64, keepOutput);
    ASSERT_EQ(verifySchedule(plan), std::vector<std::string>{});
    EXPECT_EQ(differing(plan), 0);
  }
}

TEST_F(ScheduleSim, SchedulesLeavePlanOrder) {
  auto* backend = new ScheduleBackend(std::make_unique<CpuBackend>(), {SchedulePolicy::Ahead, 0, ""});
  Executor executor(linearPlan(plan::F64), std::unique_ptr<Backend>(backend));
  executor.loadWeights(OnnxWeights(dir_ + "/linear.onnx"));
  executor.setInput("x", HostArray::zeros(ElementType::F64, {4, 3}));
  executor.runStep();
  EXPECT_GT(backend->entriesRun(), 20u);
  EXPECT_GT(backend->entriesOvertaking(), 0u);
}

// Runs one training step of `plan` straight on `backend` (no executor, so no
// verifier: the plan may be broken on purpose), poisoning each dead DEVICE
// tensor after its last_use_step on that step's stream; returns W after it.
std::vector<double> stepDirectly(const plan::Plan& plan, Backend& backend) {
  backend.prepare(plan);
  auto byName = [&](const std::string& name) -> const plan::Tensor& {
    for (const plan::Tensor& t : plan.tensors())
      if (t.name() == name) return t;
    throw Error("no tensor " + name);
  };
  std::vector<double> w{0.5, -0.25, 1.0, 0.75, -1.0, 0.125}, x(12), zeros(6, 0.0);
  for (int i = 0; i < 12; ++i) x[static_cast<size_t>(i)] = 0.2 * i - 1.0;
  backend.write(byName("W"), w.data(), 48);
  backend.write(byName("x"), x.data(), 96);
  backend.write(byName("adam_m:W"), zeros.data(), 48);
  backend.write(byName("adam_v:W"), zeros.data(), 48);
  double loss = 0;
  plan::AdamW hyper;
  hyper.set_lr(0.1);
  hyper.set_beta1(0.9);
  hyper.set_beta2(0.999);
  hyper.set_eps(1e-8);
  for (const plan::Step& step : plan.steps()) {
    backend.setCurrentStep(step.index());
    if (step.has_kernel()) backend.launchKernel(step.index());
    if (step.has_copy())
      backend.copy(plan.tensors(static_cast<int>(step.copy().src())), plan.tensors(static_cast<int>(step.copy().dst())));
    if (step.has_record()) backend.recordEvent(step.record().event(), step.stream());
    if (step.has_wait()) backend.waitEvent(step.wait().event(), step.stream());
    if (step.has_host_task()) {
      auto operand = [&](int k) -> const plan::Tensor& {
        return plan.tensors(static_cast<int>(step.host_task().tensors(k)));
      };
      if (step.host_task().kind() == plan::HostTask::ADAMW)
        backend.runAdamW(operand(0), operand(1), operand(2), operand(3), hyper, 1);
      else
        backend.readLoss(operand(0), &loss);
    }
    for (const plan::Tensor& t : plan.tensors())
      if (t.last_use_step() == static_cast<int64_t>(step.index()) && t.role() != plan::CONSTANT &&
          plan.pools(static_cast<int>(t.buffer().pool())).tier() == plan::DEVICE)
        backend.poisonOnStream(t, step.stream());
  }
  backend.synchronize();
  std::vector<double> result(6);
  backend.read(byName("W"), result.data(), 48);
  return result;
}

// Without the wait that orders d2h's gradient copy after the compute step that
// writes dW, a schedule that runs d2h early copies poison into the gradient.
TEST_F(ScheduleSim, FindsAMissingWait) {
  plan::Plan plan = linearPlan(plan::F64);
  ASSERT_TRUE(plan.steps(19).has_wait());
  ASSERT_EQ(plan.steps(19).wait().event(), "dw_ready");
  plan.mutable_steps(19)->mutable_wait()->set_event("loss_ready");  // orders nothing new for d2h here
  ASSERT_FALSE(verifySchedule(plan).empty());
  CpuBackend reference;
  const std::vector<double> expected = stepDirectly(plan, reference);
  for (double value : expected) ASSERT_TRUE(std::isfinite(value));
  int differing = 0;
  for (const ScheduleOptions& options : schedules()) {
    ScheduleBackend backend(std::make_unique<CpuBackend>(), options);
    differing += stepDirectly(plan, backend) == expected ? 0 : 1;
  }
  EXPECT_GT(differing, 0);
  // The intact plan: every schedule agrees.
  const plan::Plan intact = linearPlan(plan::F64);
  CpuBackend again;
  const std::vector<double> intactExpected = stepDirectly(intact, again);
  for (const ScheduleOptions& options : schedules()) {
    ScheduleBackend backend(std::make_unique<CpuBackend>(), options);
    EXPECT_EQ(stepDirectly(intact, backend), intactExpected);
  }
}

// Host tasks across steps (Backend::overlapsHostTasks, docs/runtime.md): a step ends once
// every stream but the host's is done and the loss is read; the host's AdamW (and, with
// micro-batches, its ACCUMULATEs) may still be queued when the next step's copies read the
// master and write the gradients. The executor's waits on the previous step's host tasks
// keep the plan order's bits under every schedule, over several steps; without them a
// schedule that starves the host stream reads a master before its update.
class HostOverlap : public ScheduleSim {
 protected:
  struct Run {
    std::vector<double> losses;
    std::vector<std::byte> weights;
    uint64_t hostLeft = 0;  // the most host entries a step left queued
    std::vector<uint64_t> hostAtTracedStarts;  // ScheduleBackend::hostQueuedAtTracedStarts
  };

  // `accumulate`: accumulatePlan (three gradient parts through one staging tensor), else linearPlan.
  // `options(s)`: the StepOptions of step s (from 0); `traces`: each step's StepResult::trace.
  Run train(bool accumulate, std::unique_ptr<Backend> backend,
            const std::function<StepOptions(int)>& options = nullptr,
            std::vector<std::vector<StepSpan>>* traces = nullptr) {
    auto* scheduled = dynamic_cast<ScheduleBackend*>(backend.get());
    const plan::Plan plan = accumulate ? accumulatePlan(plan::F64) : linearPlan(plan::F64);
    Executor executor(plan, std::move(backend));
    executor.loadWeights(OnnxWeights(dir_ + "/linear.onnx"));
    std::mt19937 rng(17);
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    auto array = [&](std::vector<int64_t> shape) {
      HostArray a = HostArray::zeros(ElementType::F64, shape);
      for (int64_t i = 0; i < a.elements(); ++i) a.data<double>()[i] = dist(rng);
      return a;
    };
    executor.setInput("x", array({4, 3}));
    if (accumulate)
      for (int k = 0; k < 3; ++k) executor.setInput("g" + std::to_string(k), array({3, 2}));
    Run run;
    for (int s = 0; s < 4; ++s) {
      const StepResult result = executor.runStep(options ? options(s) : StepOptions{});
      run.losses.push_back(result.loss);
      if (traces) traces->push_back(result.trace);
      if (scheduled) run.hostLeft = std::max(run.hostLeft, scheduled->hostEntriesLeft());
    }
    run.weights = executor.readBytes("W");
    if (scheduled) run.hostAtTracedStarts = scheduled->hostQueuedAtTracedStarts();
    return run;
  }
};

TEST_F(HostOverlap, TheNextStepWaitsForThePreviousStepsHostTasks) {
  for (bool accumulate : {false, true}) {
    SCOPED_TRACE(accumulate ? "accumulatePlan" : "linearPlan");
    const Run reference = train(accumulate, std::make_unique<CpuBackend>());
    for (double loss : reference.losses) ASSERT_TRUE(std::isfinite(loss));
    uint64_t mostLeft = 0;
    for (ScheduleOptions options : schedules()) {
      options.overlapHost = true;
      const Run run = train(accumulate, scheduled(options));
      EXPECT_EQ(std::memcmp(run.losses.data(), reference.losses.data(), reference.losses.size() * sizeof(double)), 0)
          << "schedule policy " << static_cast<int>(options.policy) << " seed " << options.seed << " " << options.starved;
      EXPECT_EQ(run.weights, reference.weights)
          << "schedule policy " << static_cast<int>(options.policy) << " seed " << options.seed << " " << options.starved;
      mostLeft = std::max(mostLeft, run.hostLeft);
    }
    // Some schedule did leave host tasks running into the next step.
    EXPECT_GT(mostLeft, 0u);
  }
}

TEST_F(HostOverlap, WithoutTheWaitsAStarvedHostStreamIsOvertaken) {
  for (bool accumulate : {false, true}) {
    SCOPED_TRACE(accumulate ? "accumulatePlan" : "linearPlan");
    const Run reference = train(accumulate, std::make_unique<CpuBackend>());
    ScheduleOptions options{SchedulePolicy::Starve, 3, "host"};
    options.overlapHost = true;
    options.ignoreHostWaits = true;
    const Run run = train(accumulate, scheduled(options));
    EXPECT_TRUE(run.losses != reference.losses || run.weights != reference.weights);
  }
}

// A traced window of steps 2 to 4 (StepOptions::traceSteps): its first step starts with
// nothing queued, the later ones beside the previous step's host tasks (a starved host
// stream leaves them queued); only the last step returns the spans, three steps' worth,
// each step's host tasks timed in its own part, ending after its device work and before
// the next step's (they ran during it); the bits are those of untraced steps.
TEST_F(HostOverlap, ATracedWindowKeepsTheHostTasksRunningIntoTheNextStep) {
  for (bool accumulate : {false, true}) {
    SCOPED_TRACE(accumulate ? "accumulatePlan" : "linearPlan");
    const Run reference = train(accumulate, std::make_unique<CpuBackend>());
    ScheduleOptions options{SchedulePolicy::Starve, 5, "host"};
    options.overlapHost = true;
    options.trace = true;
    std::vector<std::vector<StepSpan>> traces;
    const Run run = train(accumulate, scheduled(options), [](int s) {
      StepOptions step;
      step.trace = s >= 1;
      step.traceSteps = 3;
      step.traceIndex = s >= 1 ? static_cast<uint32_t>(s - 1) : 0;
      return step;
    }, &traces);
    EXPECT_EQ(run.losses, reference.losses);
    EXPECT_EQ(run.weights, reference.weights);
    ASSERT_EQ(traces.size(), 4u);
    EXPECT_TRUE(traces[0].empty() && traces[1].empty() && traces[2].empty());
    const plan::Plan plan = accumulate ? accumulatePlan(plan::F64) : linearPlan(plan::F64);
    const size_t steps = static_cast<size_t>(plan.steps_size());
    ASSERT_EQ(traces[3].size(), 3 * steps);
    ASSERT_EQ(run.hostAtTracedStarts.size(), 3u);
    EXPECT_EQ(run.hostAtTracedStarts[0], 0u);
    EXPECT_GT(run.hostAtTracedStarts[1], 0u);
    EXPECT_GT(run.hostAtTracedStarts[2], 0u);
    int hostTasks = 0;
    for (const plan::Step& step : plan.steps()) hostTasks += step.has_host_task() ? 1 : 0;
    ASSERT_GT(hostTasks, 0);
    std::vector<double> deviceEnd(3, -1), hostEnd(3, -1);
    for (size_t w = 0; w < 3; ++w) {
      int hostTimed = 0;
      for (size_t s = 0; s < steps; ++s) {
        const StepSpan& span = traces[3][w * steps + s];
        const plan::Step& step = plan.steps(static_cast<int>(s));
        if (!std::isfinite(span.end)) continue;
        if (step.stream() == "host") {
          hostTimed += step.has_host_task() ? 1 : 0;
          hostEnd[w] = std::max(hostEnd[w], span.end);
        } else {
          deviceEnd[w] = std::max(deviceEnd[w], span.end);
        }
      }
      EXPECT_EQ(hostTimed, hostTasks) << "window step " << w;
      EXPECT_GT(hostEnd[w], deviceEnd[w]) << "window step " << w;
    }
    EXPECT_LT(hostEnd[0], deviceEnd[1]);
    EXPECT_LT(hostEnd[1], deviceEnd[2]);
  }
}

// A window's steps come in order, with no untraced step among them.
TEST_F(HostOverlap, ATracedWindowRefusesItsStepsOutOfOrder) {
  ScheduleOptions options{SchedulePolicy::Behind, 1, ""};
  options.trace = true;
  options.overlapHost = true;
  auto plan = linearPlan(plan::F64);
  Executor executor(plan, scheduled(options));
  executor.loadWeights(OnnxWeights(dir_ + "/linear.onnx"));
  HostArray x = HostArray::zeros(ElementType::F64, {4, 3});
  for (int64_t i = 0; i < x.elements(); ++i) x.data<double>()[i] = 0.25 * static_cast<double>(i % 5) - 0.5;
  executor.setInput("x", x);
  StepOptions first;
  first.trace = true;
  first.traceSteps = 2;
  first.traceIndex = 1;
  try {
    executor.runStep(first);
    FAIL() << "step 1 of a window ran first";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("comes where step 0 was due"), std::string::npos) << e.what();
  }
  first.traceIndex = 0;
  EXPECT_TRUE(executor.runStep(first).trace.empty());
  try {
    executor.runStep(StepOptions{});
    FAIL() << "an untraced step ran inside the window";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("untraced step inside a traced window"), std::string::npos) << e.what();
  }
  StepOptions second = first;
  second.traceIndex = 1;
  EXPECT_EQ(executor.runStep(second).trace.size(), 2 * static_cast<size_t>(plan.steps_size()));
  EXPECT_TRUE(std::isfinite(executor.runStep(StepOptions{}).loss));
}

// A wait that is queued before the record it means waits for nothing
// (cudaStreamWaitEvent's rule): the latest record so far, here none.
TEST_F(ScheduleSim, AWaitQueuedBeforeItsRecordWaitsForNothing) {
  auto* backend = new ScheduleBackend(std::make_unique<CpuBackend>(), {SchedulePolicy::Starve, 1, "h2d"});
  plan::Plan plan = linearPlan(plan::F64);
  Executor executor(plan, std::unique_ptr<Backend>(backend));
  executor.loadWeights(OnnxWeights(dir_ + "/linear.onnx"));
  executor.writeTensor("x", std::vector<double>(12, 0.5));
  // Issue the compute wait before h2d's record: the wait is ready at once, so
  // compute runs its matmul on the 0xFF bytes of dev:W while h2d is starved.
  const plan::Tensor& w = plan.tensors(0);
  const plan::Tensor& devW = plan.tensors(5);
  ASSERT_EQ(devW.name(), "dev:W");
  backend->setCurrentStep(2);
  backend->waitEvent("w_ready", "compute");
  backend->setCurrentStep(3);
  backend->launchKernel(3);
  backend->setCurrentStep(0);
  backend->copy(w, devW);
  backend->setCurrentStep(1);
  backend->recordEvent("w_ready", "h2d");
  backend->synchronize();
  const std::vector<double> y = executor.readTensor("y");
  EXPECT_TRUE(std::isnan(y[0]));
}

}  // namespace
}  // namespace megatrain::runtime::testing
