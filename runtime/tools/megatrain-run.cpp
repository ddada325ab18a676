// megatrain-run.cpp - trains a model by executing its plan for a number of steps.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "RunExports.h"
#include "ToolArgs.h"
#include "Training.h"
#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/Format.h"
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

const char kUsage[] = R"(usage: megatrain-run MODEL.plan --weights PATH [options]

Trains a model: loads the plan, loads the initial weights, and executes the
plan's training step --steps times.

options:
  --weights PATH           the initial weights, matched to the plan's parameters by
                           name: an ONNX model (its initializers), a .safetensors file,
                           or a Hugging Face model directory (model.safetensors or the
                           shards of model.safetensors.index.json); F32, BF16, F16 and
                           F64 become fp32 masters (required unless --init is given or
                           --resume finds a checkpoint)
  --init normal:STD        start from scratch instead: every parameter from N(0, STD^2),
                           norm weights 1, biases 0 (docs/runtime.md has the rule)
  --init-seed N            seed of --init (default --seed)
  --backend auto|cpu|cuda  where to run (default auto: cuda when this binary has the
                           CUDA backend and a GPU is present, else cpu; the choice is
                           printed)
  --steps N                train until step N, resumed steps included (default 10)
  --input NAME=FILE.npy    feed this array to graph input NAME at every step (repeatable);
                           with micro-batches also to every NAME@k not given its own
  --data TOKENS.bin[,...]  token files (repeatable) sampled as [batch, seq] windows into
                           the plan's token input, in a seeded shuffle redrawn every epoch
                           (each micro-batch's copy NAME@k gets its own windows)
  --data-dtype uint16|uint32
                           token width of --data (default uint16; a sidecar
                           TOKENS.bin.json {"dtype": ..., "vocab": ...} wins)
  --seed N                 seed of the data order (default 0)
  --lr F                   peak learning rate (default: the plan's)
  --lr-schedule constant|cosine|linear
                           after warmup, hold the lr or decay it to --min-lr (default constant)
  --warmup-steps N         raise the lr linearly from 0 over the first N steps (default 0)
  --min-lr F               where the decay ends (default 0)
  --decay-steps N          the step at which the decay reaches --min-lr (default --steps)
  --clip-grad-norm F       clip the global L2 norm of the gradients to F, as torch's
                           clip_grad_norm_ (the host optimizer then waits for backward)
  --save DIR               write checkpoints into DIR: at the end, on Ctrl-C or SIGTERM,
                           and every --save-every steps
  --save-every N           also save after every N-th step
  --keep-checkpoints N     after each save, delete all but the N newest (largest step)
                           of this plan's step-*.ckpt files in DIR, never the one
                           DIR/latest names (N >= 1; default: keep every one)
  --resume DIR             continue from DIR's newest valid checkpoint
  --eval-plan EVAL.plan    evaluate with this plan (megatrain-compile --forward-only
                           of the same model) on the weights being trained
  --eval-data TOKENS.bin[,...]
                           token files of the eval set (repeatable): cut into
                           windows in order, the same batches every evaluation
  --eval-every N           evaluate after every N-th step (default: only after
                           the last); eval loss and perplexity go to the progress
                           line and --metrics (eval_loss, eval_ppl)
  --eval-batches K         evaluate on the first K batches (default: every whole
                           batch of --eval-data)
  --metrics FILE.jsonl     write one JSON object per step (step, loss, tokens_per_s,
                           step_time_s, tokens, lr, grad_norm, eval_loss, eval_ppl,
                           eval_time_s, elapsed_s)
  --log-every N            without a terminal, print a progress line every N steps (default 1)
  --skip-preflight         allocate even if memory or disk look too small
  --disk-dir DIR           where a plan with disk-resident optimizer state keeps it:
                           one file per DISK pool, read and written with O_DIRECT
                           (required by such plans; docs/tiering.md "State homes")
  --export-onnx OUT.onnx   after training, write the --weights model with every
                           trainable initializer replaced by its trained values
  --export-external-data auto|always|never
                           keep --export-onnx initializer data in OUT.onnx.data
                           (auto: when the initializers exceed 1 GiB; default auto)
  --export-safetensors OUT.safetensors
                           after training, write every parameter as safetensors
  --export-hf OUT_DIR      after training, write a directory transformers loads:
                           safetensors shards ({"format": "pt"}; an index when more
                           than one) under the Hugging Face names, plus the config,
                           generation config and tokenizer files of --hf-source
  --hf-source HF_DIR       the Hugging Face model the run started from (default:
                           --weights when it is a directory)
  --export-dtype fp32|bf16|fp16
                           dtype of --export-hf (default: --hf-source's, else fp32)
  --export-shard-size SIZE largest --export-hf shard (default 5GB)
  --dump-output NAME=FILE.npy
                           after the last step, write graph output NAME as that
                           step's forward computed it (the plan must keep it:
                           megatrain-compile --keep-output NAME; repeatable)
  --poison                 on cuda, fill each dead device tensor with NaN after its last
                           use (a memset per tensor per step; always on for cpu; also
                           MEGATRAIN_POISON=1)
  --trace FILE.json        time every kernel, copy and host task of one step on the
                           device (cuda) and write Chrome trace events with the tracks
                           of megatrain-inspect --trace and the predicted times in args;
                           print measured against predicted step and stream busy times
  --trace-step N           the step --trace times (default: the last)
  --report FILE.json       after the run, write the median step time (after the first),
                           the plan's predicted step time and the device memory report
  --quiet                  print only the final summary
  --help                   show this help
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
  bool help = false;
  RunExports exports;
  RunReportOptions report;
};

Options parseOptions(int argc, char** argv) {
  Options options;
  ArgReader args(argc, argv);
  while (!args.done()) {
    const std::string arg = args.take();
    if (arg == "--help" || arg == "-h") {
      options.help = true;
    } else if (arg == "--weights") {
      options.weights = args.value(arg);
    } else if (arg == "--backend") {
      options.backend = args.value(arg);
    } else if (arg == "--steps") {
      options.steps = parsePositive(args.value(arg), arg);
    } else if (arg == "--input") {
      const std::string spec = args.value(arg);
      const size_t equals = spec.find('=');
      if (equals == std::string::npos || equals == 0 || equals + 1 == spec.size())
        throw Error("--input needs NAME=FILE.npy, got '" + spec + "'");
      options.inputs.emplace_back(spec.substr(0, equals), spec.substr(equals + 1));
    } else if (parseTrainingFlag(arg, args, options.training)) {
    } else if (arg == "--metrics") {
      options.metrics = args.value(arg);
    } else if (arg == "--quiet") {
      options.quiet = true;
    } else if (parseRunExportFlag(arg, args, options.exports)) {
    } else if (parseRunReportFlag(arg, args, options.report)) {
    } else if (arg.rfind("-", 0) == 0) {
      throw Error("unknown option '" + arg + "' (see --help)");
    } else if (options.plan.empty()) {
      options.plan = arg;
    } else {
      throw Error("unexpected argument '" + arg + "' (one plan file only)");
    }
  }
  if (options.help) return options;
  if (options.plan.empty()) throw Error("missing MODEL.plan (see --help)");
  if (options.weights.empty() && options.training.init.empty() && options.training.resume.empty())
    throw Error("missing --weights (MODEL.onnx, MODEL.safetensors or a Hugging Face model directory) or --init "
                "normal:STD");
  checkEvaluationFlags(options.training);
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

std::unique_ptr<Backend> makeBackend(const std::string& name, bool poison) {
  if (name == "cpu") return std::make_unique<CpuBackend>();
#ifdef MEGATRAIN_WITH_CUDA
  CudaOptions cuda;
  cuda.poison = poison;
  if (name == "cuda") return makeCudaBackend(0, cuda);
#else
  if (name == "cuda") throw Error("the CUDA backend is not built into this binary");
#endif
  throw Error("unknown backend '" + name + "' (expected auto, cpu or cuda)");
}

void printSummary(const Options& options, const plan::Plan& plan, const PlanStats& stats,
                  const std::string& backend, const Evaluator* evaluator) {
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
  const Options options = parseOptions(argc, argv);
  if (options.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
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
  std::unique_ptr<Backend> backend = makeBackend(chosen, options.report.poison);
  validatePlan(plan, *backend, options.plan);
  for (const plan::Pool& pool : plan.pools())
    if (pool.tier() == plan::DISK && options.training.diskDir.empty())
      throw Error(options.plan + ": the plan keeps optimizer state on disk (pool '" + pool.name() + "', " +
                  formatBytes(pool.size_bytes()) + "); pass --disk-dir DIR (or recompile with a larger --host-memory)");
  if (auto* cpu = dynamic_cast<CpuBackend*>(backend.get())) cpu->setDiskDirectory(options.training.diskDir);
  const PlanStats stats = computePlanStats(plan);
  const std::string backendName = backend->name();
  // Before any pool is allocated: say what is short rather than fail half-way.
  if (!options.training.skipPreflight) runPreflight(plan, *backend, options.training.save, options.training.diskDir);

  Executor executor(std::move(plan), std::move(backend));
  const plan::Plan* planView = &executor.plan();  // the executor owns the plan now
  // The evaluation plan gets its own backend and pools, allocated after the
  // training plan's (so preflight sees what is left) and only read from it.
  std::unique_ptr<Evaluator> evaluator;
  if (evalPlan) {
    std::unique_ptr<Backend> evalBackend = makeBackend(chosen, options.report.poison);
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

  if (!options.quiet) printSummary(options, *planView, stats, backendName, evaluator.get());

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
