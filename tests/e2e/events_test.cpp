// events_test.cpp - insertEvents on small hand-built plans, and the schedule verifier on every plan
// the compiler emits for the committed models, as emitted and broken on purpose.
#include "megatrain/Dialect/MtDialect.h"
#include "megatrain/Frontend/OnnxImporter.h"
#include "megatrain/Pipeline.h"
#include "megatrain/Plan/Events.h"
#include "megatrain/Plan/PlanEmitter.h"
#include "megatrain/plan/PlanVerifier.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/HostArray.h"
#include "megatrain/runtime/OnnxWeights.h"

#include "TestUtil.h"
#include "TinyPlans.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>

namespace {

namespace pb = megatrain::plan;
namespace rt = megatrain::runtime;
using rt::testing::PlanBuilder;
using Failures = std::vector<std::string>;

// "h2d copy", "compute wait e0", "compute record e1", "compute relu", "host ADAMW".
std::vector<std::string> describe(const pb::Plan &plan) {
  std::vector<std::string> out;
  for (const pb::Step &step : plan.steps()) {
    std::string what;
    if (step.has_kernel())
      what = step.kernel().kernel();
    else if (step.has_copy())
      what = "copy";
    else if (step.has_record())
      what = "record " + step.record().event();
    else if (step.has_wait())
      what = "wait " + step.wait().event();
    else if (step.has_host_task())
      what = pb::HostTask::Kind_Name(step.host_task().kind());
    out.push_back(step.stream() + " " + what);
  }
  return out;
}

void expectIndexed(const pb::Plan &plan) {
  for (int i = 0; i < plan.steps_size(); ++i)
    EXPECT_EQ(plan.steps(i).index(), static_cast<uint32_t>(i));
}

// A copy to the device read twice by compute: one record/wait pair, and
// last_use_step follows its step to the new index.
TEST(InsertEvents, ReadAfterWriteAcrossStreamsGetsOnePair) {
  PlanBuilder b;
  const uint32_t w = b.tensor("W", {4}, pb::F32, pb::PARAMETER);
  const uint32_t x = b.tensor("x", {4}, pb::F32, pb::INPUT);
  const uint32_t devW = b.tensor("dev:W", {4}, pb::F32, pb::PARAMETER_COPY);
  const uint32_t y = b.tensor("y", {4}, pb::F32, pb::ACTIVATION);
  const uint32_t z = b.tensor("z", {4}, pb::F32, pb::ACTIVATION);
  b.copy(w, devW, "h2d");
  b.kernel("add", {x, devW}, {y});
  b.kernel("add", {devW, y}, {z}); // a second read on the same stream
  pb::Plan plan = b.build();
  ASSERT_EQ(plan.tensors(devW).last_use_step(), 2);

  EXPECT_EQ(megatrain::insertEvents(plan), 1u);
  EXPECT_EQ(describe(plan), (std::vector<std::string>{"h2d copy", "h2d record e0", "compute wait e0",
                                                      "compute add", "compute add"}));
  expectIndexed(plan);
  EXPECT_EQ(plan.tensors(devW).last_use_step(), 4);
  EXPECT_EQ(plan.tensors(y).last_use_step(), 4);
  EXPECT_EQ(plan.tensors(z).last_use_step(), 4);
  EXPECT_EQ(megatrain::verifySchedule(plan), Failures{});
}

// The arena reuses y's bytes for a parameter copy: the copy (h2d) must wait
// for compute's last read of y (write after read).
TEST(InsertEvents, WriteAfterReadOnReusedBytesGetsAnEvent) {
  PlanBuilder b;
  const uint32_t w = b.tensor("W", {4}, pb::F32, pb::PARAMETER);
  const uint32_t x = b.tensor("x", {4}, pb::F32, pb::INPUT);
  const uint32_t y = b.tensor("y", {4}, pb::F32, pb::ACTIVATION);
  const uint32_t z = b.tensor("z", {4}, pb::F32, pb::ACTIVATION);
  const uint32_t devW = b.tensor("dev:W", {4}, pb::F32, pb::PARAMETER_COPY);
  b.kernel("relu", {x}, {y});
  b.kernel("relu", {y}, {z});
  b.copy(w, devW, "h2d");
  pb::Plan plan = b.build();
  plan.mutable_tensors(devW)->mutable_buffer()->set_offset(plan.tensors(y).buffer().offset());
  EXPECT_EQ(megatrain::verifySchedule(plan).size(), 1u); // the race, before events

  EXPECT_EQ(megatrain::insertEvents(plan), 1u);
  EXPECT_EQ(describe(plan), (std::vector<std::string>{"compute relu", "compute relu",
                                                      "compute record e0", "h2d wait e0",
                                                      "h2d copy"}));
  EXPECT_EQ(megatrain::verifySchedule(plan), Failures{});
  // Without the reuse there is nothing to order.
  pb::Plan apart = b.build();
  EXPECT_EQ(megatrain::insertEvents(apart), 0u);
  EXPECT_EQ(apart.steps_size(), 3);
}

// d2h's wait for compute already covers compute's wait for h2d: reading
// dev:W on d2h, or the host update of W that h2d read, needs no event of
// its own (vector clocks carry the order).
TEST(InsertEvents, OrderThroughEarlierEventsAddsNone) {
  PlanBuilder b;
  const uint32_t w = b.tensor("W", {4}, pb::F32, pb::PARAMETER);
  const uint32_t grad = b.tensor("grad:W", {4}, pb::F32, pb::GRADIENT);
  const uint32_t m = b.tensor("adam_m:W", {4}, pb::F32, pb::OPTIMIZER_STATE);
  const uint32_t v = b.tensor("adam_v:W", {4}, pb::F32, pb::OPTIMIZER_STATE);
  const uint32_t out = b.tensor("output:W", {4}, pb::F32, pb::OUTPUT_READOUT);
  const uint32_t devW = b.tensor("dev:W", {4}, pb::F32, pb::PARAMETER_COPY);
  const uint32_t g = b.tensor("g", {4}, pb::F32, pb::ACTIVATION);
  b.copy(w, devW, "h2d");        // 0
  b.kernel("relu", {devW}, {g}); // 1: waits for 0
  b.copy(g, grad, "d2h");        // 2: waits for 1, so for 0 too
  b.copy(devW, out, "d2h");      // 3: reads what 0 wrote: implied
  b.adamw(w, grad, m, v);        // 4: waits for 2 (grad); its write of W after 0's read: implied
  pb::Plan plan = b.build();

  EXPECT_EQ(megatrain::insertEvents(plan), 3u);
  EXPECT_EQ(describe(plan),
            (std::vector<std::string>{"h2d copy", "h2d record e0", "compute wait e0", "compute relu",
                                      "compute record e1", "d2h wait e1", "d2h copy", "d2h record e2",
                                      "d2h copy", "host wait e2", "host ADAMW"}));
  expectIndexed(plan);
  EXPECT_EQ(megatrain::verifySchedule(plan), Failures{});
}

// A plan that is already ordered keeps its events and gets none.
TEST(InsertEvents, AnOrderedPlanIsLeftAlone) {
  pb::Plan plan = rt::testing::linearPlan(pb::F32);
  const std::string before = plan.SerializeAsString();
  EXPECT_EQ(megatrain::insertEvents(plan), 0u);
  EXPECT_EQ(plan.SerializeAsString(), before);
}

// linearPlan without its hand-written events: insertEvents orders it again,
// and training gives the same bits (the CPU backend's poisoning follows the
// remapped last_use_step).
TEST(InsertEvents, StrippedPlanTrainsAsTheHandOrderedOne) {
  const pb::Plan ordered = rt::testing::linearPlan(pb::F64);
  pb::Plan stripped = ordered;
  stripped.clear_steps();
  std::vector<int64_t> newIndex;
  for (const pb::Step &step : ordered.steps()) {
    newIndex.push_back(stripped.steps_size());
    if (step.has_record() || step.has_wait())
      continue;
    pb::Step *copy = stripped.add_steps();
    *copy = step;
    copy->set_index(static_cast<uint32_t>(stripped.steps_size() - 1));
  }
  for (pb::Tensor &t : *stripped.mutable_tensors())
    if (t.last_use_step() >= 0)
      t.set_last_use_step(newIndex[static_cast<size_t>(t.last_use_step())]);
  ASSERT_FALSE(megatrain::verifySchedule(stripped).empty());

  EXPECT_EQ(megatrain::insertEvents(stripped), 5u);
  EXPECT_EQ(megatrain::verifySchedule(stripped), Failures{});
  expectIndexed(stripped);

  const std::string dir = rt::testing::makeTempDir();
  std::mt19937 rng(7);
  rt::testing::writeModel(dir + "/linear.onnx",
                          {{"W", rt::testing::randomTensor({3, 2}, pb::F64, rng)}});
  rt::HostArray x = rt::HostArray::zeros(rt::ElementType::F64, {4, 3});
  for (int i = 0; i < 12; ++i)
    x.data<double>()[i] = 0.25 * i - 1.0;
  auto run = [&](const pb::Plan &plan) {
    rt::Executor executor(plan, std::make_unique<rt::CpuBackend>());
    executor.loadWeights(rt::OnnxWeights(dir + "/linear.onnx"));
    executor.setInput("x", x);
    std::vector<double> losses{executor.runStep(), executor.runStep()};
    for (double value : executor.readTensor("W"))
      losses.push_back(value);
    return losses;
  };
  const std::vector<double> a = run(ordered), b = run(stripped);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(double)), 0);
  for (double value : a)
    EXPECT_TRUE(std::isfinite(value));
}

// ---------------------------------------------------------------------------
// Compiled models.

struct Model {
  std::string path;
  std::map<std::string, std::vector<int64_t>> shapes;
  std::string lossOutput; // empty: next-token cross-entropy
};

pb::Plan compile(const Model &model, bool noMemoryReuse = false) {
  mlir::MLIRContext context;
  context.getOrLoadDialect<megatrain::mt::MtDialect>();
  context.getOrLoadDialect<mlir::func::FuncDialect>();
  megatrain::OnnxImportOptions import;
  for (const auto &[name, shape] : model.shapes)
    import.shapes[name] = shape;
  auto module = megatrain::importOnnxModel(context, model.path, import);
  if (!module)
    throw std::runtime_error("import failed: " + model.path);
  megatrain::PipelineOptions options;
  options.lossMode = model.lossOutput.empty() ? "next-token-ce" : "output";
  options.lossOutput = model.lossOutput;
  options.noMemoryReuse = noMemoryReuse;
  mlir::PassManager pm(&context);
  megatrain::buildPipeline(pm, options, megatrain::EmitStage::Plan);
  if (mlir::failed(pm.run(*module)))
    throw std::runtime_error("pipeline failed: " + model.path);
  auto plan = megatrain::emitPlan(*module, {});
  if (mlir::failed(plan))
    throw std::runtime_error("emission failed: " + model.path);
  return *plan;
}

std::vector<Model> committedModels() {
  const std::string demo = MEGATRAIN_DEMO_MODELS_DIR, llm = MEGATRAIN_LLM_MODELS_DIR;
  const std::string frontends = MEGATRAIN_TEST_MODELS_DIR;
  std::vector<Model> models{
      {demo + "/tiny_transformer.onnx", {{"input_ids", {2, 64}}}, ""},
      {demo + "/mlp.onnx", {{"x", {32, 16}}, {"labels", {32}}}, "loss"},
      // The importer's test models that have a scalar output to minimize.
      {frontends + "/softmax_ce.onnx", {}, "loss"},
      {frontends + "/softmax_ce.onnx", {}, "loss3"},
      {frontends + "/reduce_opset17.onnx", {}, "sum_all"},
  };
  std::vector<std::string> llms;
  for (const auto &entry : std::filesystem::directory_iterator(llm))
    if (entry.path().extension() == ".onnx")
      llms.push_back(entry.path().string());
  std::sort(llms.begin(), llms.end());
  for (const std::string &path : llms)
    models.push_back({path, {{"input_ids", {2, 32}}}, ""});
  return models;
}

size_t countEvents(const pb::Plan &plan) {
  return std::count_if(plan.steps().begin(), plan.steps().end(),
                       [](const pb::Step &s) { return s.has_record() || s.has_wait(); });
}

TEST(CompiledPlans, EveryCommittedModelPassesTheVerifier) {
  const std::vector<Model> models = committedModels();
  ASSERT_GE(models.size(), 10u);
  for (const Model &model : models) {
    for (bool noReuse : {false, true}) {
      const pb::Plan plan = compile(model, noReuse);
      EXPECT_EQ(megatrain::verifySchedule(plan), Failures{})
          << model.path << (noReuse ? " (no memory reuse)" : "");
      EXPECT_GT(countEvents(plan), 0u) << model.path;
    }
  }
}

// The tiny transformer's plan, broken in the five ways the verifier exists
// to catch. Steps are found by what they do, messages built from the plan.
class BrokenPlan : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    plan_ = new pb::Plan(compile(committedModels().front()));
  }
  static void TearDownTestSuite() { delete plan_; }

  static std::string label(const pb::Plan &plan, int s) {
    const pb::Step &step = plan.steps(s);
    std::string what = step.has_kernel() ? "kernel " + step.kernel().kernel()
                       : step.has_copy() ? "copy"
                       : step.has_wait() ? "wait " + step.wait().event()
                                         : "other";
    return "step " + std::to_string(s) + " (" + step.stream() + ", " + what + ")";
  }

  // The first compute kernel preceded by exactly one wait, whose event is
  // recorded right after the fetch (stream `fetch`) of the one parameter the kernel reads.
  struct Guarded {
    int copy, record, wait, kernel;
    std::string tensor;
  };
  static Guarded firstGuardedKernel(const pb::Plan &plan) {
    for (int k = 2; k < plan.steps_size(); ++k) {
      const pb::Step &kernel = plan.steps(k);
      const pb::Step &wait = plan.steps(k - 1);
      if (!kernel.has_kernel() || !wait.has_wait() || plan.steps(k - 2).has_wait())
        continue;
      // One fetched input, so the failure can only name that one.
      if (std::count_if(kernel.kernel().inputs().begin(), kernel.kernel().inputs().end(),
                        [&](uint32_t id) {
                          return plan.tensors(id).role() == pb::PARAMETER_COPY;
                        }) != 1)
        continue;
      for (int r = 0; r < k - 1; ++r) {
        if (!plan.steps(r).has_record() || plan.steps(r).record().event() != wait.wait().event())
          continue;
        const pb::Step &copy = plan.steps(r - 1);
        if (!copy.has_copy() || (copy.stream() != "fetch" && copy.stream() != "h2d"))
          continue;
        for (uint32_t input : kernel.kernel().inputs())
          if (input == copy.copy().dst())
            return {r - 1, r, k - 1, k, plan.tensors(input).name()};
      }
    }
    throw std::runtime_error("no kernel waits for a parameter copy");
  }

  static pb::Plan *plan_;
};
pb::Plan *BrokenPlan::plan_ = nullptr;

void renumber(pb::Plan &plan) {
  for (int i = 0; i < plan.steps_size(); ++i)
    plan.mutable_steps(i)->set_index(static_cast<uint32_t>(i));
}

TEST_F(BrokenPlan, AsEmittedItIsProven) {
  EXPECT_EQ(megatrain::verifySchedule(*plan_), Failures{});
}

// (a) a missing event: the wait before the kernel deleted.
TEST_F(BrokenPlan, MissingWait) {
  pb::Plan plan = *plan_;
  const Guarded g = firstGuardedKernel(plan);
  plan.mutable_steps()->DeleteSubrange(g.wait, 1);
  renumber(plan);
  for (pb::Tensor &t : *plan.mutable_tensors())
    if (t.last_use_step() > g.wait)
      t.set_last_use_step(t.last_use_step() - 1);
  const Failures failures = megatrain::verifySchedule(plan);
  ASSERT_FALSE(failures.empty());
  EXPECT_EQ(failures.front(), label(plan, g.kernel - 1) + ": reads '" + g.tensor + "' written by step " +
                                  std::to_string(g.copy) + " (" + plan.steps(g.copy).stream() + ") with no event ordering them");
}

// (b) an activation moved onto the bytes of another one live at the same time.
TEST_F(BrokenPlan, OverlappingOffset) {
  pb::Plan plan = *plan_;
  // Two kernel outputs of one size in the device pool: the first still
  // read when the second is written.
  for (int s = 0; s < plan.steps_size(); ++s) {
    if (!plan.steps(s).has_kernel())
      continue;
    const uint32_t held = plan.steps(s).kernel().outputs(0);
    const pb::Tensor &a = plan.tensors(held);
    for (int later = s + 1; later < a.last_use_step(); ++later) {
      if (!plan.steps(later).has_kernel())
        continue;
      const uint32_t moved = plan.steps(later).kernel().outputs(0);
      pb::Tensor &b = *plan.mutable_tensors(moved);
      if (b.buffer().size_bytes() != a.buffer().size_bytes() || b.role() != pb::ACTIVATION)
        continue;
      const uint64_t offset = a.buffer().offset();
      b.mutable_buffer()->set_offset(offset);
      const std::string expected =
          label(plan, later) + ": writes '" + b.name() + "' into bytes [" + std::to_string(offset) +
          ", " + std::to_string(offset + a.buffer().size_bytes()) + ") of pool 'device' that '" +
          a.name() + "' holds from step " + std::to_string(s) + " to step " +
          std::to_string(a.last_use_step());
      const Failures failures = megatrain::verifySchedule(plan);
      EXPECT_NE(std::find(failures.begin(), failures.end(), expected), failures.end())
          << "expected: " << expected << "\nfirst: " << (failures.empty() ? "" : failures[0]);
      return;
    }
  }
  FAIL() << "no two same-sized activations live together";
}

// (c) a device budget below the arena.
TEST_F(BrokenPlan, BudgetOverrun) {
  pb::Plan plan = *plan_;
  const uint64_t arena = plan.pools(0).size_bytes();
  plan.mutable_header()->set_device_budget_bytes(arena);
  EXPECT_EQ(megatrain::verifySchedule(plan), Failures{});
  plan.mutable_header()->set_device_budget_bytes(arena - 256);
  const Failures failures = megatrain::verifySchedule(plan);
  ASSERT_FALSE(failures.empty());
  EXPECT_EQ(failures.front(), "pool 'device' is " + std::to_string(arena) +
                                  " bytes, over the device budget of " +
                                  std::to_string(arena - 256) + " bytes");
}

// (d) a wait for an event nothing records.
TEST_F(BrokenPlan, WaitWithNoRecord) {
  pb::Plan plan = *plan_;
  const Guarded g = firstGuardedKernel(plan);
  plan.mutable_steps(g.wait)->mutable_wait()->set_event("e_nowhere");
  const Failures failures = megatrain::verifySchedule(plan);
  ASSERT_FALSE(failures.empty());
  EXPECT_EQ(failures.front(), label(plan, g.wait) +
                                  ": waits for event 'e_nowhere', which no earlier step records");
}

// (e) the wait moved after its reader: the read may see the copy unfinished.
TEST_F(BrokenPlan, ReadBeforeItsCopyCompletes) {
  pb::Plan plan = *plan_;
  const Guarded g = firstGuardedKernel(plan);
  plan.mutable_steps()->SwapElements(g.wait, g.kernel);
  renumber(plan);
  const Failures failures = megatrain::verifySchedule(plan);
  ASSERT_FALSE(failures.empty());
  EXPECT_EQ(failures.front(), label(plan, g.wait) + ": reads '" + g.tensor + "' written by step " +
                                  std::to_string(g.copy) + " (" + plan.steps(g.copy).stream() + ") with no event ordering them");
}

} // namespace
