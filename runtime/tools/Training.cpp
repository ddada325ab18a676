// Training.cpp - megatrain-run's training loop: data sampling, lr schedule, clipping, checkpoints, resume, Ctrl-C.
#include "Training.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "Progress.h"
#include "WeightLoading.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/Format.h"
#include "megatrain/runtime/Checkpoint.h"
#include "megatrain/runtime/Checksum.h"
#include "megatrain/runtime/Evaluation.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/HostArray.h"
#include "megatrain/runtime/Microbatch.h"
#include "megatrain/runtime/TokenSampler.h"

namespace megatrain::runtime::tools {
namespace {

// Set by SIGINT/SIGTERM; the loop stops after the step in flight. A handler
// may only touch a volatile sig_atomic_t.
volatile std::sig_atomic_t gStopSignal = 0;

extern "C" void onStopSignal(int signal) { gStopSignal = signal; }

double parseReal(const std::string& text, const std::string& flag) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || !std::isfinite(value))
    throw Error(flag + " needs a number, got '" + text + "'");
  return value;
}

int64_t parseCount(const std::string& text, const std::string& flag) {
  if (text == "0") return 0;
  return parsePositive(text, flag);
}

uint64_t parseSeed(const std::string& text) {
  size_t used = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || text[0] == '-')
    throw Error("--seed needs a non-negative integer, got '" + text + "'");
  return value;
}

const char* signalName(int signal) { return signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "a signal"; }

// "a.bin,b.bin" appended to `files`; an empty name is an error naming `flag`.
void appendFileList(const std::string& flag, const std::string& list, std::vector<std::string>& files) {
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    if (comma == start) throw Error(flag + " has an empty file name in '" + list + "'");
    files.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
}

}  // namespace

void addTrainingOptions(CLI::App& app, TrainingOptions& options) {
  const std::string data = "Data";
  repeatable(addValueOption(
      app, "--data", "TOKENS.bin[,...]",
      "token files (repeatable) sampled as [batch, seq] windows into the plan's token input, in a "
      "seeded shuffle redrawn every epoch (each micro-batch's copy NAME@k gets its own windows)",
      data, [&options](const std::string& list) { appendFileList("--data", list, options.data); }));
  addValueOption(app, "--data-dtype", "uint16|uint32",
                 "token width of --data (default uint16; a sidecar TOKENS.bin.json "
                 "{\"dtype\": ..., \"vocab\": ...} wins)",
                 data, [&options](const std::string& v) { options.dataDType = parseTokenDType(v); });
  addValueOption(app, "--seed", "N", "seed of the data order (default 0)", data,
                 [&options](const std::string& v) { options.seed = parseSeed(v); });

  const std::string eval = "Evaluation (docs/runtime.md)";
  addValueOption(app, "--eval-plan", "EVAL.plan",
                 "evaluate with this plan (megatrain-compile --forward-only of the same model) on the weights "
                 "being trained",
                 eval, [&options](const std::string& v) { options.evalPlan = v; });
  repeatable(addValueOption(app, "--eval-data", "TOKENS.bin[,...]",
                            "token files of the eval set (repeatable): cut into windows in order, the same "
                            "batches every evaluation",
                            eval, [&options](const std::string& list) {
                              appendFileList("--eval-data", list, options.evalData);
                            }));
  addValueOption(app, "--eval-every", "N",
                 "evaluate after every N-th step (default: only after the last); eval loss and perplexity go "
                 "to the progress line and --metrics (eval_loss, eval_ppl)",
                 eval, [&options](const std::string& v) { options.evalEvery = parsePositive(v, "--eval-every"); });
  addValueOption(app, "--eval-batches", "K",
                 "evaluate on the first K batches (default: every whole batch of --eval-data)", eval,
                 [&options](const std::string& v) { options.evalBatches = parsePositive(v, "--eval-batches"); });

  const std::string lr = "Learning rate";
  addValueOption(app, "--lr", "F", "peak learning rate (default: the plan's)", lr, [&options](const std::string& v) {
    options.lr = parseReal(v, "--lr");
    if (*options.lr <= 0) throw Error("--lr must be positive");
  });
  addValueOption(app, "--lr-schedule", "constant|cosine|linear",
                 "after warmup, hold the lr or decay it to --min-lr (default constant)", lr,
                 [&options](const std::string& v) { options.schedule = parseLrScheduleKind(v); });
  addValueOption(app, "--warmup-steps", "N", "raise the lr linearly from 0 over the first N steps (default 0)", lr,
                 [&options](const std::string& v) { options.warmupSteps = parseCount(v, "--warmup-steps"); });
  addValueOption(app, "--min-lr", "F", "where the decay ends (default 0)", lr, [&options](const std::string& v) {
    options.minLr = parseReal(v, "--min-lr");
    if (options.minLr < 0) throw Error("--min-lr must not be negative");
  });
  addValueOption(app, "--decay-steps", "N", "the step at which the decay reaches --min-lr (default --steps)", lr,
                 [&options](const std::string& v) { options.decaySteps = parsePositive(v, "--decay-steps"); });
  addValueOption(app, "--clip-grad-norm", "F",
                 "clip the global L2 norm of the gradients to F, as torch's clip_grad_norm_ (the host "
                 "optimizer then waits for backward)",
                 lr, [&options](const std::string& v) {
                   options.clipGradNorm = parseReal(v, "--clip-grad-norm");
                   if (*options.clipGradNorm <= 0) throw Error("--clip-grad-norm must be positive");
                 });

  const std::string checkpoints = "Checkpoints";
  addValueOption(app, "--save", "DIR",
                 "write checkpoints into DIR: at the end, on Ctrl-C or SIGTERM, and every --save-every steps",
                 checkpoints, [&options](const std::string& v) { options.save = v; });
  addValueOption(app, "--save-every", "N", "also save after every N-th step", checkpoints,
                 [&options](const std::string& v) { options.saveEvery = parsePositive(v, "--save-every"); });
  addValueOption(app, "--keep-checkpoints", "N",
                 "after each save, delete all but the N newest (largest step) of this plan's step-*.ckpt "
                 "files in DIR, never the one DIR/latest names (N >= 1; default: keep every one)",
                 checkpoints, [&options](const std::string& v) {
                   options.keepCheckpoints = parsePositive(v, "--keep-checkpoints");
                 });
  addValueOption(app, "--resume", "DIR", "continue from DIR's newest valid checkpoint", checkpoints,
                 [&options](const std::string& v) { options.resume = v; });

  const std::string run = "Run";
  addValueOption(app, "--log-every", "N", "without a terminal, print a progress line every N steps (default 1)",
                 run, [&options](const std::string& v) { options.logEvery = parsePositive(v, "--log-every"); });
  addFlagOption(app, "--skip-preflight", "allocate even if memory or disk look too small", run,
                [&options] { options.skipPreflight = true; });
  addValueOption(app, "--init", "normal:STD",
                 "start from scratch instead of --weights: every parameter from N(0, STD^2), norm weights 1, "
                 "biases 0 (docs/runtime.md has the rule)",
                 run, [&options](const std::string& v) { options.init = v; });
  addValueOption(app, "--init-seed", "N", "seed of --init (default --seed)", run,
                 [&options](const std::string& v) { options.initSeed = parseSeed(v); });
  addValueOption(app, "--disk-dir", "DIR",
                 "where a plan with disk-resident optimizer state keeps it: one file per DISK pool, read and "
                 "written with O_DIRECT (required by such plans; docs/tiering.md \"State homes\")",
                 run, [&options](const std::string& v) { options.diskDir = v; });
}

void checkEvaluationFlags(const TrainingOptions& options) {
  if (!options.evalPlan.empty() && options.evalData.empty())
    throw Error("--eval-plan needs --eval-data TOKENS.bin (the token files to evaluate on)");
  if (options.evalPlan.empty()) {
    if (!options.evalData.empty())
      throw Error("--eval-data needs --eval-plan EVAL.plan (compile one with megatrain-compile --forward-only)");
    if (options.evalEvery > 0) throw Error("--eval-every needs --eval-plan EVAL.plan and --eval-data TOKENS.bin");
    if (options.evalBatches > 0) throw Error("--eval-batches needs --eval-plan EVAL.plan and --eval-data TOKENS.bin");
  }
}

struct TrainingSession::Impl {
  Impl(Executor& executor, const TrainingSetup& setup, const TrainingOptions& options)
      : executor(executor), setup(setup), options(options) {}

  std::string save(int64_t step, ProgressReporter& progress);

  Executor& executor;
  TrainingSetup setup;
  TrainingOptions options;
  uint64_t planHash = 0;  // of the plan file: reads version 1 checkpoints
  LrSchedule schedule;
  int64_t startStep = 0;           // steps done before this run (from the checkpoint)
  std::vector<std::string> notes;  // printed when run() starts

  std::optional<TokenSampler> sampler;
  std::string tokenInput;
  std::vector<std::string> tokenInputs;  // tokenInput and its micro-batch copies, each a window per step
  int64_t batch = 0;
  HostArray tokens;  // [batch, seq], refilled every step
  // A plan whose loss reads a targets input (header.target_input): its inputs
  // in micro-batch order, the tokens' loss mask and the targets made of them.
  std::vector<std::string> targetInputs;
  int64_t ignoreIndex = 0;
  std::vector<uint8_t> mask;  // [batch * seq]
  HostArray targets;          // [batch, seq]: tokens, or ignoreIndex where mask is 0

  std::unique_ptr<MetricsLog> metrics;
  std::unique_ptr<CheckpointWriter> writer;
  int64_t lastSaved = -1;
  std::string lastCheckpoint;  // the newest good checkpoint: resumed from or saved; empty if none
  int64_t saves = 0;
  int64_t crashInSave = 0;  // MEGATRAIN_TEST_CRASH_IN_SAVE: the save that SIGKILLs itself
};

TrainingSession::TrainingSession(Executor& executor, const TrainingSetup& setup, const TrainingOptions& options)
    : impl_(std::make_unique<Impl>(executor, setup, options)) {
  Impl& s = *impl_;
  const plan::Plan& plan = executor.plan();
  if (options.saveEvery > 0 && options.save.empty()) throw Error("--save-every needs --save DIR");
  if (options.keepCheckpoints > 0 && options.save.empty()) throw Error("--keep-checkpoints needs --save DIR");
  s.planHash = hashFile(setup.planPath);

  s.schedule.kind = options.schedule;
  s.schedule.peak = options.lr ? *options.lr : plan.header().optimizer().lr();
  s.schedule.minLr = options.minLr;
  s.schedule.warmupSteps = options.warmupSteps;
  s.schedule.decaySteps = options.decaySteps ? *options.decaySteps : setup.steps;
  if (options.schedule != LrScheduleKind::Constant && s.schedule.minLr > s.schedule.peak)
    throw Error("--min-lr " + std::to_string(s.schedule.minLr) + " is above the peak lr " +
                std::to_string(s.schedule.peak));

  std::optional<ResumePoint> resumed;
  if (!options.resume.empty()) {
    resumed = resumeNewest(options.resume, executor, s.planHash,
                           [](const std::string& why, const std::string& fallback) {
                             if (fallback.empty())
                               std::fprintf(stderr, "megatrain-run: warning: skipping %s\n", why.c_str());
                             else
                               std::fprintf(stderr, "megatrain-run: warning: skipping %s; resuming from %s instead\n",
                                            why.c_str(), fallback.c_str());
                           });
    if (!resumed && setup.weights.empty() && options.init.empty())
      throw Error("--resume " + options.resume +
                  ": no checkpoint (step-N.ckpt) there, and no --weights or --init to start from");
  }
  if (resumed) {
    s.startStep = resumed->state.step;
    s.lastCheckpoint = resumed->path;
    if (s.startStep > setup.steps)
      throw Error(resumed->path + " is at step " + std::to_string(s.startStep) + ", past --steps " +
                  std::to_string(setup.steps));
    s.notes.push_back("resumed   " + resumed->path + " (step " + std::to_string(s.startStep) + ", optimizer step " +
                      std::to_string(resumed->state.optimizerStep) + ")");
    if (resumed->state.lr != s.schedule)
      s.notes.push_back("note      the lr schedule was " + resumed->state.lr.describe() + ", it is now " +
                        s.schedule.describe());
    if (resumed->state.hasData && options.data.empty())
      throw Error(resumed->path + " was written by a run that sampled --data; resume with the same --data");
  } else {
    const std::unique_ptr<WeightSource> weights =
        openInitialWeights(setup.weights, options.init, options.initSeed, options.seed);
    if (!options.resume.empty())
      s.notes.push_back("resume    " + options.resume + " holds no checkpoint yet, starting from " + weights->path());
    loadInitialWeights(executor, *weights, s.notes);
  }

  if (!options.data.empty()) {
    s.tokenInput = plan.header().token_input();
    if (s.tokenInput.empty()) throw Error("--data given but the plan has no token input (header.token_input is empty)");
    int64_t seqLen = 0;
    for (const plan::Tensor& tensor : plan.tensors())
      if (tensor.role() == plan::INPUT && (tensor.source() == s.tokenInput || tensor.name() == s.tokenInput)) {
        if (tensor.shape_size() != 2) throw Error("the token input '" + s.tokenInput + "' is not [batch, seq]");
        s.batch = tensor.shape(0);
        seqLen = tensor.shape(1);
      }
    // With micro-batches, "<token input>@<k>" has the same shape; each gets
    // its own windows, drawn in micro-batch order.
    s.tokenInputs = microbatchInputs(plan, s.tokenInput);
    if (s.tokenInputs.empty()) s.tokenInputs.push_back(s.tokenInput);
    s.sampler.emplace(options.data, options.dataDType, seqLen, options.seed);
    s.tokens = HostArray::zeros(ElementType::I64, {s.batch, seqLen});
    if (!plan.header().target_input().empty()) {
      s.targetInputs = microbatchInputs(plan, plan.header().target_input());
      s.ignoreIndex = plan.header().ignore_index();
      s.mask.assign(static_cast<size_t>(s.batch * seqLen), 1);
      s.targets = HostArray::zeros(ElementType::I64, {s.batch, seqLen});
      if (s.targetInputs.size() != s.tokenInputs.size())
        throw Error("the plan has " + std::to_string(s.targetInputs.size()) + " targets inputs for " +
                    std::to_string(s.tokenInputs.size()) + " token inputs");
    } else if (s.sampler->hasMask()) {
      for (const TokenData& file : s.sampler->files())
        if (!file.maskPath().empty())
          throw Error("--data " + file.path() + " has a loss mask (" + file.maskPath() +
                      ") but the plan's loss reads the tokens themselves; compile with --targets NAME "
                      "(megatrain-compile) so that masked positions contribute no loss");
    }
    if (resumed && resumed->state.hasData) {
      try {
        s.sampler->restore(resumed->state.data);
      } catch (const Error& e) {
        throw Error(resumed->path + ": " + e.what());
      }
    } else if (resumed) {
      s.notes.push_back("note      " + resumed->path + " holds no data position; sampling starts at the beginning");
    }
  }

  if (!setup.metrics.empty()) s.metrics = std::make_unique<MetricsLog>(setup.metrics, resumed ? s.startStep : -1);

  if (!options.save.empty()) {
    for (const std::string& path : removeUnfinishedCheckpoints(options.save))
      s.notes.push_back("removed   " + path + " (a checkpoint a stopped run did not finish)");
    s.writer = std::make_unique<CheckpointWriter>(executor, options.save);
    if (resumed) s.lastSaved = s.startStep;  // do not write the checkpoint just loaded again
    if (const char* crash = std::getenv("MEGATRAIN_TEST_CRASH_IN_SAVE")) s.crashInSave = std::atoll(crash);
  }
}

TrainingSession::~TrainingSession() = default;

bool TrainingSession::feedsTokenInput() const { return impl_->sampler.has_value(); }

std::string TrainingSession::Impl::save(int64_t step, ProgressReporter& progress) {
  TrainingState state;
  state.step = step;
  state.optimizerStep = executor.optimizerStep();
  state.hasData = sampler.has_value();
  if (sampler) state.data = sampler->state();
  state.lr = schedule;
  if (++saves == crashInSave) writer->killAfterBytes(writer->fileBytes() / 2);
  const auto start = std::chrono::steady_clock::now();
  const std::string path = writer->save(state);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char timing[64];
  std::snprintf(timing, sizeof timing, " in %.3f s)", seconds);
  progress.note("saved     " + path + " (" + formatBytes(writer->fileBytes()) + timing);
  lastSaved = step;
  lastCheckpoint = path;
  // --keep-checkpoints: the older ones go only once the new one is on disk
  // (and `latest` names it), so a crash in between leaves one more, never less.
  if (options.keepCheckpoints > 0) {
    const CheckpointWriter::Pruned pruned = writer->removeOldCheckpoints(options.keepCheckpoints);
    for (const std::string& removed : pruned.removed)
      progress.note("removed   " + removed + " (--keep-checkpoints " + std::to_string(options.keepCheckpoints) + ")");
    for (const std::string& failed : pruned.failed)
      progress.warning("megatrain-run: warning: --keep-checkpoints: cannot remove " + failed);
  }
  return path;
}

int TrainingSession::run() {
  Impl& s = *impl_;
  const plan::Plan& plan = s.executor.plan();
  ProgressReporter::Setup report;
  report.totalSteps = s.setup.steps;
  report.firstStep = s.startStep + 1;
  report.tokensPerStep = s.setup.stats.tokensPerStep;
  report.trainableParameters = s.setup.stats.trainableElements;
  for (const plan::Pool& pool : plan.pools()) {
    if (pool.tier() == plan::HOST_PINNED) report.hostPinnedBytes += pool.size_bytes();
    if (pool.tier() == plan::DEVICE) report.arenaBytes += pool.size_bytes();
  }
  report.logEvery = s.options.logEvery;
  report.quiet = s.setup.quiet;
  report.clipping = s.options.clipGradNorm.has_value();
  ProgressReporter progress(report, s.executor.backend());

  std::string schedule = "lr        " + s.schedule.describe();
  if (s.options.clipGradNorm) {
    char clip[64];
    std::snprintf(clip, sizeof clip, ", clip grad norm %g", *s.options.clipGradNorm);
    schedule += clip;
  }
  progress.note(schedule);
  for (const std::string& note : s.notes) progress.note(note);
  if (s.startStep >= s.setup.steps) {
    progress.important("done      already at step " + std::to_string(s.startStep) + " of --steps " +
                       std::to_string(s.setup.steps) + ", nothing to run");
    return 0;
  }

  // Ctrl-C (or a scheduler's SIGTERM) ends the run between steps, with a
  // checkpoint. SA_RESETHAND: a second Ctrl-C kills at once, which is safe
  // because checkpoints are written atomically.
  struct sigaction action = {}, oldInt = {}, oldTerm = {};
  action.sa_handler = onStopSignal;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  gStopSignal = 0;
  sigaction(SIGINT, &action, &oldInt);
  sigaction(SIGTERM, &action, &oldTerm);
  struct RestoreSignals {
    const struct sigaction &intAction, &termAction;
    ~RestoreSignals() {
      sigaction(SIGINT, &intAction, nullptr);
      sigaction(SIGTERM, &termAction, nullptr);
    }
  } restore{oldInt, oldTerm};

  // Step times, device memory and --trace (RunReport.h).
  RunReport measurements(plan, s.executor.backend(), s.setup.report, s.startStep + 1, s.setup.steps);
  StepOptions stepOptions;
  stepOptions.clipGradNorm = s.options.clipGradNorm;
  const auto runStart = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - runStart).count(); };
  bool graphNoted = false;
  for (int64_t step = s.startStep + 1; step <= s.setup.steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    if (s.sampler) {
      for (size_t k = 0; k < s.tokenInputs.size(); ++k) {
        if (s.targetInputs.empty()) {
          s.sampler->nextBatch(s.tokens.data<int64_t>(), s.batch);
          s.executor.setInput(s.tokenInputs[k], s.tokens);
          continue;
        }
        // The loss's targets: the tokens, with ignoreIndex where the mask is 0
        // (the cross-entropy shifts them by one, as it shifts the tokens).
        s.sampler->nextBatch(s.tokens.data<int64_t>(), s.batch, s.mask.data());
        const int64_t* token = s.tokens.data<int64_t>();
        int64_t* target = s.targets.data<int64_t>();
        for (size_t i = 0; i < s.mask.size(); ++i) target[i] = s.mask[i] ? token[i] : s.ignoreIndex;
        s.executor.setInput(s.tokenInputs[k], s.tokens);
        s.executor.setInput(s.targetInputs[k], s.targets);
      }
    }
    stepOptions.lr = s.schedule.at(step);
    stepOptions.trace = measurements.traceThisStep(step);
    stepOptions.traceSteps = measurements.traceSteps();
    stepOptions.traceIndex = stepOptions.trace ? measurements.traceIndex(step) : 0;
    const StepResult result = s.executor.runStep(stepOptions);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!graphNoted && !s.executor.backend().stepRecordingFailure().empty()) {
      progress.important("the step could not be recorded as a CUDA graph, steps are issued one by one: " +
                         s.executor.backend().stepRecordingFailure());
      graphNoted = true;
    }
    measurements.afterStep(step, seconds, result.trace);
    // Evaluation reads the weights this step wrote and changes nothing of the
    // training state; it is not counted in the step's time. A non-finite
    // loss stops the run below, with nothing to evaluate.
    std::optional<EvalResult> eval;
    if (s.setup.evaluator && std::isfinite(result.loss) &&
        (step == s.setup.steps || (s.options.evalEvery > 0 && step % s.options.evalEvery == 0)))
      eval = s.setup.evaluator->run(s.executor);
    const EvalResult* evalResult = eval ? &*eval : nullptr;
    const double spent = elapsed();
    progress.step(step, result, seconds, spent, evalResult);
    if (s.metrics)
      s.metrics->write(step, result, s.setup.stats.tokensPerStep, seconds, spent, stepOptions.clipGradNorm.has_value(),
                       evalResult);
    // A non-finite loss or gradient norm means the weights are (or are about
    // to be) poisoned: stop before any checkpoint of this state is written.
    const bool badLoss = !std::isfinite(result.loss);
    if (badLoss || (stepOptions.clipGradNorm && !std::isfinite(result.gradNorm))) {
      char text[32];
      std::snprintf(text, sizeof text, "%g", badLoss ? result.loss : result.gradNorm);
      throw Error(std::string(badLoss ? "loss" : "gradient norm") + " is " + text + " at step " +
                  std::to_string(step) + ", stopping; " +
                  (s.lastCheckpoint.empty() ? std::string("no checkpoint was written")
                                            : "the last good checkpoint, " + s.lastCheckpoint + ", is kept"));
    }
    if (s.writer && s.options.saveEvery > 0 && step % s.options.saveEvery == 0) s.save(step, progress);

    if (const int signal = gStopSignal) {
      std::string what = "interrupted by " + std::string(signalName(signal)) + " after step " + std::to_string(step);
      if (s.writer) {
        const std::string path =
            s.lastSaved == step ? s.writer->dir() + "/step-" + std::to_string(step) + ".ckpt" : s.save(step, progress);
        what += ": checkpoint " + path + " (continue with --resume " + s.writer->dir() + ")";
      } else {
        what += ": nothing saved (no --save)";
      }
      progress.important(what);
      return 128 + signal;
    }
  }
  if (s.writer && s.lastSaved != s.setup.steps) s.save(s.setup.steps, progress);
  if (s.metrics) s.metrics->close();
  progress.summary(s.setup.steps, elapsed());
  measurements.finish(s.setup.quiet);
  return 0;
}

}  // namespace megatrain::runtime::tools
