// megatrain-run.cpp - trains a model by executing its plan for a number of steps.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "RunExports.h"
#include "Training.h"
#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/Format.h"
#include "megatrain/plan/ToolCli.h"
#include "megatrain/plan/ToolMain.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/Evaluation.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/Microbatch.h"
#include "megatrain/runtime/Npy.h"
#include "megatrain/runtime/OnnxWeights.h"
#include "megatrain/runtime/PlanLoader.h"
#include "megatrain/runtime/PlanStats.h"
#include "megatrain/runtime/Preflight.h"
#include "megatrain/runtime/TokenData.h"
#ifdef MEGATRAIN_WITH_CUDA
#include "CudaBackend.h"
#endif

namespace megatrain::runtime::tools {
namespace {

const char kUsage[] = "usage: megatrain-run MODEL.plan --weights PATH --steps N [options]\n";

const char kDescription[] =
    "Trains a model: loads the plan, loads the initial weights, and executes the plan's training "
    "step until step --steps.";

const char kExamples[] = R"(Examples:
  megatrain-run tiny.plan --weights tiny.onnx --data train.bin --steps 100
  megatrain-run tiny.plan --weights tiny.onnx --data train.bin --steps 1000 --save runs/a \
      --save-every 100 --metrics runs/a/metrics.jsonl
  megatrain-run tiny.plan --resume runs/a --data train.bin --steps 2000
  megatrain-run tiny.plan --weights tiny.onnx --data train.bin --steps 1000 \
      --eval-plan tiny-eval.plan --eval-data val.bin --eval-every 100
)";

struct Options {
  std::string plan;
  std::string weights;
  std::string backend = "auto";
  int64_t steps = 10;
  std::vector<std::pair<std::string, std::string>> inputs;  // name, file
  TrainingOptions training;
  std::string metrics;
  bool quiet = false;
  RunExports exports;
  RunReportOptions report;
};

// Parses the command line; std::nullopt when --help or --version was printed.
std::optional<Options> parseOptions(int argc, char** argv) {
  Options options;
  std::vector<std::string> positional;
  CLI::App app;
  setupToolApp(app, "megatrain-run", {kUsage, kDescription, kExamples});
  app.add_option("MODEL.plan", positional, "the plan megatrain-compile wrote")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);

  const std::string run = "Run";
  addValueOption(app, "--weights", "PATH",
                 "the initial weights, matched to the plan's parameters by name: an ONNX model (its "
                 "initializers), a .safetensors file, or a Hugging Face model directory (model.safetensors "
                 "or the shards of model.safetensors.index.json); F32, BF16, F16 and F64 become fp32 "
                 "masters (required unless --init is given or --resume finds a checkpoint)",
                 run, [&](const std::string& v) { options.weights = v; });
  addValueOption(app, "--backend", "auto|cpu|cuda",
                 "where to run (default auto: cuda when this binary has the CUDA backend and a GPU is "
                 "present, else cpu; the choice is printed)",
                 run, [&](const std::string& v) { options.backend = v; });
  addValueOption(app, "--steps", "N", "train until step N, resumed steps included (default 10)", run,
                 [&](const std::string& v) { options.steps = parsePositive(v, "--steps"); });
  repeatable(addValueOption(
      app, "--input", "NAME=FILE.npy",
      "feed this array to graph input NAME at every step (repeatable); with micro-batches also to "
      "every NAME@k not given its own",
      run, [&](const std::string& spec) {
        const size_t equals = spec.find('=');
        if (equals == std::string::npos || equals == 0 || equals + 1 == spec.size())
          throw Error("--input needs NAME=FILE.npy, got '" + spec + "'");
        options.inputs.emplace_back(spec.substr(0, equals), spec.substr(equals + 1));
      }));
  addValueOption(app, "--metrics", "FILE.jsonl",
                 "write one JSON object per step (step, loss, tokens_per_s, step_time_s, tokens, lr, "
                 "grad_norm, eval_loss, eval_ppl, eval_time_s, elapsed_s)",
                 run, [&](const std::string& v) { options.metrics = v; });
  addFlagOption(app, "--quiet", "print only the final summary", run, [&] { options.quiet = true; });
  addTrainingOptions(app, options.training);
  addRunExportOptions(app, options.exports);
  addRunReportOptions(app, options.report);

  if (parseToolCommandLine(app, argc, argv)) return std::nullopt;
  if (positional.empty()) throw Error("missing MODEL.plan (see --help)");
  if (positional.size() > 1)
    throw Error("unexpected argument '" + positional[1] + "' (one plan file only)");
  options.plan = positional[0];
  if (options.weights.empty() && options.training.init.empty() && options.training.resume.empty())
    throw Error("missing --weights (MODEL.onnx, MODEL.safetensors or a Hugging Face model directory) or --init "
                "normal:STD");
  checkEvaluationFlags(options.training);
  checkRunReportFlags(options.report);
  return options;
}

// `auto`: cuda when the binary has it and the driver reports a device, else cpu.
std::string resolveBackend(const std::string& name) {
  if (name != "auto") return name;
#ifdef MEGATRAIN_WITH_CUDA
  if (cudaDeviceCount() > 0) return "cuda";
#endif
  return "cpu";
}

std::unique_ptr<Backend> makeBackend(const std::string& name, const RunReportOptions& report) {
  if (name == "cpu") return std::make_unique<CpuBackend>();
#ifdef MEGATRAIN_WITH_CUDA
  CudaOptions cuda;
  cuda.poison = report.poison;
  cuda.overlapHostTasks = report.hostOverlap;
  cuda.stepGraphs = report.stepGraphs == "on"    ? CudaOptions::StepGraphs::On
                    : report.stepGraphs == "off" ? CudaOptions::StepGraphs::Off
                                                 : CudaOptions::StepGraphs::Auto;
  if (name == "cuda") return makeCudaBackend(0, cuda);
#else
  if (name == "cuda") throw Error("the CUDA backend is not built into this binary");
#endif
  throw Error("unknown backend '" + name + "' (expected auto, cpu or cuda)");
}

void printSummary(const Options& options, const plan::Plan& plan, const PlanStats& stats,
                  const std::string& backend, bool recordsSteps, const Evaluator* evaluator) {
  const plan::Header& header = plan.header();
  std::printf("plan      %s (%s, from %s)\n", options.plan.c_str(),
              header.generator().empty() ? "unknown generator" : header.generator().c_str(),
              header.source_model().empty() ? "unknown model" : header.source_model().c_str());
  std::printf("params    %s tensors, %s elements; trainable %s tensors, %s elements\n",
              formatCount(stats.parameterTensors).c_str(),
              formatCount(stats.parameterElements).c_str(),
              formatCount(stats.trainableTensors).c_str(),
              formatCount(stats.trainableElements).c_str());
  std::string pools;
  for (const plan::Pool& pool : plan.pools())
    pools += (pools.empty() ? "" : ", ") + pool.name() + " " + formatBytes(pool.size_bytes()) +
             " (" + tierName(pool.tier()) + ")";
  std::printf("pools     %s\n", pools.c_str());
  std::printf("steps     %d per training step, %s backend", plan.steps_size(), backend.c_str());
  if (options.backend == "auto")
    std::printf(" (--backend auto: %s)",
                backend == "cuda" ? "a GPU is present" : "no usable GPU, or no CUDA backend in this binary");
  if (backend == "cuda") {
    // Step graphs (docs/runtime.md): what --step-graphs made of this plan.
    const double perStep = plan.steps_size() > 0 ? header.predicted_step_s() / plan.steps_size() : 0;
    const char* env = std::getenv("MEGATRAIN_CUDA_GRAPHS");
    const std::string mode = env && *env ? std::string("MEGATRAIN_CUDA_GRAPHS=") + env
                                         : "--step-graphs " + options.report.stepGraphs;
    std::printf("; %s (%s", recordsSteps ? "replayed as a CUDA graph from step 3" : "issued call by call",
                mode.c_str());
    if (perStep > 0) std::printf(", %.1f us of predicted device time a plan step", perStep * 1e6);
    std::printf(")");
  }
  std::printf("\n");
  if (stats.tokensPerStep)
    std::printf("tokens    %s per step\n", formatCount(stats.tokensPerStep).c_str());
  std::printf("training  %lld steps\n", static_cast<long long>(options.steps));
  if (evaluator) {
    const plan::Tensor& tokens = evaluator->executor().tensor(evaluator->executor().plan().header().token_input());
    std::string when = options.training.evalEvery > 0
                           ? "after every " + std::to_string(options.training.evalEvery) + " steps and the last"
                           : std::string("after the last step");
    std::printf("eval      %s: %lld batches of %s tokens, %s\n", options.training.evalPlan.c_str(),
                static_cast<long long>(evaluator->batches()), formatShape(tokens.shape()).c_str(), when.c_str());
  }
  std::fflush(stdout);
}

int run(int argc, char** argv) {
  const std::optional<Options> parsed = parseOptions(argc, argv);
  if (!parsed) return 0;  // --help or --version
  const Options& options = *parsed;
  RunExports exports = options.exports;  // checkRunExports fills in --hf-source's default

  plan::Plan plan = loadPlan(options.plan);
  if (plan.header().evaluation())
    throw Error(options.plan +
                " is an evaluation plan (megatrain-compile --forward-only): it has no gradients or updates, so it "
                "cannot train; compile the training plan without --forward-only and pass this one as --eval-plan");
  // The evaluation plan is checked against the training plan before anything is allocated.
  std::optional<plan::Plan> evalPlan;
  if (!options.training.evalPlan.empty()) {
    evalPlan = loadPlan(options.training.evalPlan);
    checkEvaluationPlan(*evalPlan, options.training.evalPlan, plan, options.plan);
  }
  const std::string chosen = resolveBackend(options.backend);
  std::unique_ptr<Backend> backend = makeBackend(chosen, options.report);
  validatePlan(plan, *backend, options.plan);
  for (const plan::Pool& pool : plan.pools())
    if (pool.tier() == plan::DISK && options.training.diskDir.empty())
      throw Error(options.plan + ": the plan keeps optimizer state on disk (pool '" + pool.name() + "', " +
                  formatBytes(pool.size_bytes()) + "); pass --disk-dir DIR (or recompile with a larger --host-memory)");
  backend->setDiskDirectory(options.training.diskDir);
  const PlanStats stats = computePlanStats(plan);
  const std::string backendName = backend->name();
  // Before any pool is allocated: say what is short rather than fail half-way.
  if (!options.training.skipPreflight) runPreflight(plan, *backend, options.training.save, options.training.diskDir);

  const auto prepareStart = std::chrono::steady_clock::now();
  Executor executor(std::move(plan), std::move(backend));
  // Pinning a big host pool takes a while: say where the time before the weights went.
  const double prepareSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - prepareStart).count();
  if (prepareSeconds >= 2.0 && !options.quiet) {
    std::fprintf(stderr, "setup     pools allocated and the plan prepared in %.1f s\n", prepareSeconds);
    std::fflush(stderr);
  }
  const plan::Plan* planView = &executor.plan();  // the executor owns the plan now
  // The evaluation plan gets its own backend and pools, allocated after the
  // training plan's (so preflight sees what is left) and only read from it.
  std::unique_ptr<Evaluator> evaluator;
  if (evalPlan) {
    std::unique_ptr<Backend> evalBackend = makeBackend(chosen, options.report);
    validatePlan(*evalPlan, *evalBackend, options.training.evalPlan);
    if (!options.training.skipPreflight) runPreflight(*evalPlan, *evalBackend, "");
    evaluator = std::make_unique<Evaluator>(std::move(*evalPlan), std::move(evalBackend), options.training.evalData,
                                            options.training.dataDType, options.training.evalBatches);
  }
  TrainingSetup setup;
  setup.planPath = options.plan;
  setup.weights = options.weights;
  setup.steps = options.steps;
  setup.metrics = options.metrics;
  setup.quiet = options.quiet;
  setup.stats = stats;
  setup.report = options.report;
  setup.evaluator = evaluator.get();
  // Loads the weights, or the newest checkpoint of --resume.
  TrainingSession training(executor, setup, options.training);

  // --input NAME=FILE feeds NAME and, in a plan with micro-batches, every
  // "NAME@k" that no --input names itself (docs/runtime.md).
  const std::string& tokenInput = planView->header().token_input();
  const std::string& targetInput = planView->header().target_input();
  auto given = [&](const std::string& name) {
    for (const auto& input : options.inputs)
      if (input.first == name) return true;
    return false;
  };
  for (const auto& [name, file] : options.inputs) {
    if (!options.training.data.empty() && !tokenInput.empty() &&
        microbatchIndex(name, tokenInput) >= 0)
      throw Error("--input " + name + " conflicts with --data, which feeds the same input");
    if (!options.training.data.empty() && !targetInput.empty() && microbatchIndex(name, targetInput) >= 0)
      throw Error("--input " + name + " conflicts with --data, which fills the targets input from its tokens and loss mask");
    try {
      const HostArray array = readNpy(file);
      executor.setInput(name, array);
      for (const std::string& copy : microbatchInputs(*planView, name))
        if (copy != name && !given(copy)) executor.setInput(copy, array);
    } catch (const Error& e) {
      throw Error("--input " + name + ": " + e.what());
    }
  }

  checkRunExports(exports, *planView, options.weights);

  // Every graph input needs a feed before anything runs.
  for (const plan::Tensor& tensor : planView->tensors()) {
    if (tensor.role() != plan::INPUT) continue;
    const std::string& name = inputName(tensor);
    // --data feeds the token input and, in a plan with one, the targets input.
    bool fed = false;
    for (const std::string* fromData : {&tokenInput, &targetInput})
      fed = fed || (training.feedsTokenInput() && !fromData->empty() &&
                    (microbatchIndex(tensor.source(), *fromData) >= 0 || tensor.name() == *fromData));
    for (const auto& input : options.inputs)
      fed = fed || input.first == tensor.source() || input.first == tensor.name() ||
            microbatchIndex(name, input.first) > 0;
    if (!fed)
      throw Error("graph input '" + name + "' is not fed (give --input " + name + "=FILE.npy" +
                  (name == tokenInput || name == targetInput ? " or --data TOKENS.bin)" : ")"));
  }

  if (!options.quiet)
    printSummary(options, *planView, stats, backendName, executor.backend().canRecordSteps(), evaluator.get());

  // Ctrl-C stops between steps with exit code 130 (after a checkpoint, with --save).
  const int status = training.run();
  if (status != 0) return status;
  writeRunExports(exports, executor, options.weights);
  return 0;
}

}  // namespace
}  // namespace megatrain::runtime::tools

int main(int argc, char** argv) {
  return megatrain::runTool(
      "megatrain-run", [&] { return megatrain::runtime::tools::run(argc, argv); });
}
