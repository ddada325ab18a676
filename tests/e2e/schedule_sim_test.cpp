// schedule_sim_test.cpp - compiled plans trained with their streams interleaved adversarially.
//
// The schedule verifier claims a plan's events order every conflicting access, so
// that the streams may run concurrently. This checks the claim directly: the plans
// the compiler emits for the committed models (the demo at the budgets the GPU
// streams test uses, every model at its smallest budget, micro-batches) train a few
// steps on the CPU backend through ScheduleBackend (tests/runtime/ScheduleBackend.h:
// each stream's entries in order, across streams any order the events allow, dead
// tensors poisoned on the stream of their last use, as the CUDA backend does) under
// seeded random, furthest-behind, furthest-ahead and one-stream-starved schedules;
// losses and weights must equal plan order's bit for bit.
#include "megatrain/Dialect/MtDialect.h"
#include "megatrain/Frontend/OnnxImporter.h"
#include "megatrain/Pipeline.h"
#include "megatrain/Plan/PlanEmitter.h"
#include "megatrain/plan/PlanVerifier.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/HostArray.h"
#include "megatrain/runtime/OnnxWeights.h"
#include "megatrain/runtime/PlanLoader.h"

#include "ScheduleBackend.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <random>
#include <regex>
#include <set>

namespace {

namespace pb = megatrain::plan;
namespace rt = megatrain::runtime;
using rt::testing::ScheduleBackend;
using rt::testing::ScheduleOptions;
using rt::testing::SchedulePolicy;

struct Model {
  std::string path;
  std::vector<int64_t> inputShape;  // input_ids
};

struct Compiled {
  pb::Plan plan;
  std::string error;  // the pipeline's diagnostics when it failed
};

Compiled compile(const Model &model, uint64_t budget, int64_t microbatches) {
  mlir::MLIRContext context;
  context.getOrLoadDialect<megatrain::mt::MtDialect>();
  context.getOrLoadDialect<mlir::func::FuncDialect>();
  Compiled result;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    // Errors only: llama_opt.onnx's merged norm scales are a warning.
    if (diag.getSeverity() == mlir::DiagnosticSeverity::Error)
      result.error += diag.str() + "\n";
    return mlir::success();
  });
  megatrain::OnnxImportOptions import;
  import.shapes["input_ids"] = model.inputShape;
  auto module = megatrain::importOnnxModel(context, model.path, import);
  if (!module)
    throw std::runtime_error("import failed: " + model.path);
  megatrain::PipelineOptions options;
  options.lossMode = "next-token-ce";
  options.lr = 3e-3;
  options.deviceMemory = budget;
  options.microbatches = microbatches;
  options.precision = "fp32";
  mlir::PassManager pm(&context);
  megatrain::buildPipeline(pm, options, megatrain::EmitStage::Plan);
  if (mlir::failed(pm.run(*module))) {
    if (result.error.empty())
      result.error = "pipeline failed";
    return result;
  }
  auto plan = megatrain::emitPlan(*module, {});
  if (mlir::failed(plan))
    throw std::runtime_error("emission failed: " + model.path);
  result.plan = *plan;
  return result;
}

// The smallest budget the tiering planner reaches: what a 1-byte budget's error names.
uint64_t smallestBudget(const Model &model, int64_t microbatches) {
  const Compiled tiny = compile(model, 1, microbatches);
  std::smatch match;
  static const std::regex pattern("the smallest budget that fits is [^(]*\\(([0-9]+) bytes\\)");
  if (!std::regex_search(tiny.error, match, pattern))
    throw std::runtime_error("no smallest budget named for " + model.path + ": " + tiny.error);
  return std::stoull(match[1].str());
}

struct Run {
  std::vector<double> losses;
  std::vector<std::vector<std::byte>> weights;  // every PARAMETER, in tensor order
  uint64_t entries = 0, overtaking = 0;
};

// Trains `steps` steps from the model's weights on fixed random tokens.
Run train(const pb::Plan &plan, const Model &model, std::unique_ptr<rt::Backend> backend, int steps) {
  rt::Executor executor(plan, std::move(backend));
  executor.loadWeights(rt::OnnxWeights(model.path));
  std::mt19937 rng(12345);
  for (const pb::Tensor &tensor : plan.tensors()) {
    if (tensor.role() != pb::INPUT)
      continue;
    std::vector<int64_t> shape(tensor.shape().begin(), tensor.shape().end());
    rt::HostArray ids = rt::HostArray::zeros(rt::ElementType::I64, shape);
    for (int64_t i = 0; i < ids.elements(); ++i)
      ids.data<int64_t>()[i] = std::uniform_int_distribution<int64_t>(0, 255)(rng);
    executor.setInput(tensor.name(), ids);
  }
  Run run;
  for (int s = 0; s < steps; ++s)
    run.losses.push_back(executor.runStep());
  for (const pb::Tensor &tensor : plan.tensors())
    if (tensor.role() == pb::PARAMETER)
      run.weights.push_back(executor.readBytes(tensor.name()));
  if (auto *schedule = dynamic_cast<ScheduleBackend *>(&executor.backend())) {
    run.entries = schedule->entriesRun();
    run.overtaking = schedule->entriesOvertaking();
  }
  return run;
}

std::string policyName(const ScheduleOptions &o) {
  switch (o.policy) {
  case SchedulePolicy::Random:
    return "random seed " + std::to_string(o.seed);
  case SchedulePolicy::Behind:
    return "furthest-behind";
  case SchedulePolicy::Ahead:
    return "furthest-ahead";
  case SchedulePolicy::Starve:
    return "starving " + o.starved + " (seed " + std::to_string(o.seed) + ")";
  }
  return "?";
}

// Every schedule of `plan` trains to plan order's bits.
void expectEveryScheduleMatches(const pb::Plan &plan, const Model &model, const std::string &what) {
  ASSERT_EQ(megatrain::verifySchedule(plan), std::vector<std::string>{}) << what;
  constexpr int kSteps = 3;
  const Run reference = train(plan, model, std::make_unique<rt::CpuBackend>(), kSteps);
  for (double loss : reference.losses)
    ASSERT_TRUE(std::isfinite(loss)) << what << ": plan order gives a non-finite loss";

  std::vector<ScheduleOptions> schedules;
  for (uint64_t seed : {1, 2, 3})
    schedules.push_back({SchedulePolicy::Random, seed, ""});
  schedules.push_back({SchedulePolicy::Behind, 0, ""});
  schedules.push_back({SchedulePolicy::Ahead, 0, ""});
  std::set<std::string> streams(plan.streams().begin(), plan.streams().end());
  for (const pb::Step &step : plan.steps())
    streams.insert(step.stream());
  for (const std::string &stream : streams)
    schedules.push_back({SchedulePolicy::Starve, 7, stream});

  uint64_t overtaking = 0;
  for (const ScheduleOptions &options : schedules) {
    const std::string label = what + ", " + policyName(options);
    Run run;
    try {
      run = train(plan, model,
                  std::make_unique<ScheduleBackend>(std::make_unique<rt::CpuBackend>(), options), kSteps);
    } catch (const std::exception &e) {
      ADD_FAILURE() << label << ": " << e.what();
      continue;
    }
    overtaking += run.overtaking;
    ASSERT_EQ(run.losses.size(), reference.losses.size());
    for (size_t i = 0; i < run.losses.size(); ++i)
      EXPECT_EQ(std::memcmp(&run.losses[i], &reference.losses[i], sizeof(double)), 0)
          << label << ": loss of step " << i + 1 << " is " << run.losses[i] << ", plan order gives "
          << reference.losses[i];
    ASSERT_EQ(run.weights.size(), reference.weights.size());
    for (size_t i = 0; i < run.weights.size(); ++i)
      EXPECT_TRUE(run.weights[i] == reference.weights[i]) << label << ": weights of parameter " << i << " differ";
  }
  // The schedules did leave plan order (a plan of one stream could not).
  if (streams.size() > 1)
    EXPECT_GT(overtaking, 0u) << what;
}

const std::string kDemo = std::string(MEGATRAIN_DEMO_MODELS_DIR) + "/tiny_transformer.onnx";
const std::string kLlm = MEGATRAIN_LLM_MODELS_DIR;

// The demo as tests/gpu/streams_runs.sh compiles it: no budget, 1100000 and 803328 bytes.
TEST(ScheduleSim, DemoAtTheStreamsTestBudgets) {
  const Model demo{kDemo, {4, 64}};
  for (uint64_t budget : {uint64_t{0}, uint64_t{1100000}, uint64_t{803328}}) {
    const Compiled compiled = compile(demo, budget, 1);
    ASSERT_TRUE(compiled.error.empty()) << compiled.error;
    expectEveryScheduleMatches(compiled.plan, demo, "demo, budget " + std::to_string(budget));
  }
}

// Every committed model at the smallest budget its planner reaches.
TEST(ScheduleSim, ModelsAtTheirSmallestBudgets) {
  const std::vector<Model> models{{kDemo, {2, 64}},
                                  {kLlm + "/llama_opt.onnx", {2, 32}},
                                  {kLlm + "/qwen2_noopt.onnx", {2, 32}},
                                  {kLlm + "/mistral_opt.onnx", {2, 32}},
                                  {kLlm + "/gpt2_opt.onnx", {2, 32}}};
  for (const Model &model : models) {
    const uint64_t budget = smallestBudget(model, 1);
    const Compiled compiled = compile(model, budget, 1);
    ASSERT_TRUE(compiled.error.empty()) << compiled.error;
    expectEveryScheduleMatches(compiled.plan, model, model.path + ", smallest budget " + std::to_string(budget));
  }
}

// Micro-batches (host ACCUMULATE between them), unconstrained and under half the
// unconstrained arena (as tests/e2e/microbatch.sh; the smallest budget of a micro-batched
// plan does not compile yet), compiled by megatrain-compile itself.
TEST(ScheduleSim, MicrobatchPlans) {
  const std::string dir = std::filesystem::temp_directory_path() / ("schedule_sim_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::vector<Model> models{{kDemo, {4, 64}}, {kLlm + "/llama_opt.onnx", {2, 32}}};
  int index = 0;
  for (const Model &model : models) {
    uint64_t arena = 0;
    for (bool half : {false, true}) {
      const std::string base = dir + "/mb" + std::to_string(index++);
      std::string compile = std::string(MEGATRAIN_COMPILE) + " " + model.path + " --shape input_ids=" +
                            std::to_string(model.inputShape[0]) + "x" + std::to_string(model.inputShape[1]) +
                            " --loss next-token-ce --lr 3e-3 --precision fp32 --microbatches 2 -o " + base + ".plan" +
                            // Every home on the host: the gradients' copies and host tasks are
                            // the streams whose interleavings this test schedules.
                            " --state-home host";
      if (half)
        compile += " --device-memory " + std::to_string(arena / 2);
      ASSERT_EQ(std::system((compile + " > " + base + ".log 2>&1").c_str()), 0) << compile;
      if (!half) {
        std::ifstream log(base + ".log");
        const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
        std::smatch match;
        static const std::regex pattern("device arena [^(]*\\(([0-9]+) bytes\\)");
        ASSERT_TRUE(std::regex_search(text, match, pattern)) << text;
        arena = std::stoull(match[1].str());
      }
      const pb::Plan plan = rt::loadPlan(base + ".plan");
      EXPECT_EQ(plan.header().microbatches(), 2u);
      expectEveryScheduleMatches(plan, model,
                                 model.path + ", 2 micro-batches, budget " + std::to_string(half ? arena / 2 : 0));
    }
  }
  std::filesystem::remove_all(dir);
}

} // namespace
