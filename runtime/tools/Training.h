// Training.h - megatrain-run's training loop: data sampling, lr schedule, clipping, checkpoints, resume, Ctrl-C.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "RunReport.h"
#include "megatrain/plan/ToolCli.h"
#include "megatrain/runtime/LrSchedule.h"
#include "megatrain/runtime/PlanStats.h"
#include "megatrain/runtime/TokenData.h"

namespace megatrain::runtime {
class Evaluator;
class Executor;
}

namespace megatrain::runtime::tools {

// The flags of this file (docs/runtime.md lists them).
struct TrainingOptions {
  std::vector<std::string> data;  // --data, repeatable or comma-separated
  TokenDType dataDType = TokenDType::U16;
  uint64_t seed = 0;
  LrScheduleKind schedule = LrScheduleKind::Constant;
  std::optional<double> lr;  // --lr: the peak lr, instead of the plan's
  int64_t warmupSteps = 0;
  double minLr = 0;
  std::optional<int64_t> decaySteps;  // default --steps
  std::optional<double> clipGradNorm;
  std::string save;
  int64_t saveEvery = 0;  // 0: only at the end (and on Ctrl-C)
  int64_t keepCheckpoints = 0;  // --keep-checkpoints N: after each save, only the N newest stay; 0: all
  std::string resume;
  int64_t logEvery = 1;
  bool skipPreflight = false;
  std::string init;                  // --init normal:STD, instead of --weights
  std::optional<uint64_t> initSeed;  // --init-seed (default --seed)
  // Evaluation (docs/runtime.md "Evaluation"): megatrain-run builds the
  // Evaluator from these and hands it over in TrainingSetup.
  std::string evalPlan;               // --eval-plan: a --forward-only plan
  std::vector<std::string> evalData;  // --eval-data, repeatable or comma-separated
  int64_t evalEvery = 0;              // --eval-every N; 0: only after the last step
  int64_t evalBatches = 0;            // --eval-batches K; 0: every whole batch of --eval-data
  std::string diskDir;  // --disk-dir: the files of the plan's DISK pools
};

// Adds the flags above to megatrain-run's command line, in the groups "Data",
// "Learning rate" and "Checkpoints".
void addTrainingOptions(CLI::App& app, TrainingOptions& options);

// Error for an evaluation flag without the others it needs (--eval-plan and
// --eval-data come together; --eval-every and --eval-batches need them).
void checkEvaluationFlags(const TrainingOptions& options);

// What the loop needs besides TrainingOptions.
struct TrainingSetup {
  std::string planPath;
  std::string weights;  // --weights; may be empty with --resume or --init
  int64_t steps = 0;    // --steps: the step count to reach, counting resumed ones
  std::string metrics;
  bool quiet = false;
  PlanStats stats;
  RunReportOptions report;  // --trace, --trace-step, --report (RunReport.h)
  // With --eval-plan: runs after every --eval-every-th step and the last;
  // its loss goes to the progress line and the metrics row of that step.
  Evaluator* evaluator = nullptr;
};

// Set up before the summary is printed, run after: construction loads the
// weights (or the newest valid checkpoint of --resume), opens the token
// files and the metrics log, and prepares the checkpoint writer; run() then
// trains from the resumed step to --steps.
class TrainingSession {
 public:
  TrainingSession(Executor& executor, const TrainingSetup& setup, const TrainingOptions& options);
  ~TrainingSession();

  // Whether the plan's token input is fed from --data.
  bool feedsTokenInput() const;

  // Trains; returns the exit code: 0, or 128 + the signal after SIGINT or
  // SIGTERM stopped the run between steps (after saving, with --save).
  int run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace megatrain::runtime::tools
