// Progress.h - megatrain-run's report of a training run: the progress line, --metrics rows, memory in use.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "megatrain/runtime/Evaluation.h"
#include "megatrain/runtime/Executor.h"

namespace megatrain::runtime {
class Backend;
}

namespace megatrain::runtime::tools {

// Resident set size of this process in bytes (/proc/self/statm); 0 if unknown.
// Allocates nothing: it runs every logged step.
uint64_t processRssBytes();

// "1:02:03" (h:mm:ss) into `out`.
void formatDuration(double seconds, char* out, size_t size);

// One line per step: step/total, loss, lr, gradient norm when clipping,
// eval loss and perplexity on the steps that evaluated, tokens/s, model TFLOP/s (6 * trainable parameters * tokens per step / step
// time), device memory (the backend's used memory, or the plan's arena when
// the backend cannot say), host memory (pinned pools + process RSS), elapsed
// and ETA. On a terminal the line is redrawn in place (\r) every step;
// otherwise a plain line is printed every `logEvery` steps and at the last.
// Formats into fixed buffers: nothing is allocated per step.
class ProgressReporter {
 public:
  struct Setup {
    int64_t totalSteps = 0;
    int64_t firstStep = 1;  // the first step this run executes (after a resume: checkpoint + 1)
    uint64_t tokensPerStep = 0;
    uint64_t trainableParameters = 0;
    uint64_t hostPinnedBytes = 0;
    uint64_t arenaBytes = 0;
    int64_t logEvery = 1;
    bool quiet = false;
    bool clipping = false;
  };
  ProgressReporter(const Setup& setup, const Backend& backend);

  // With `eval` (a step that evaluated), the line also shows the eval loss
  // and perplexity, and is printed (and kept on a terminal) whatever
  // --log-every says.
  void step(int64_t step, const StepResult& result, double seconds, double elapsed, const EvalResult* eval = nullptr);
  // A line between progress lines (a checkpoint saved, ...); not shown with --quiet.
  void note(const std::string& text);
  // Printed even with --quiet.
  void important(const std::string& text);
  // A line on stderr (after ending an in-place progress line), even with --quiet.
  void warning(const std::string& text);
  // The end-of-run summary line.
  void summary(int64_t lastStep, double elapsed);

  double firstLoss() const { return firstLoss_; }

 private:
  void endInPlaceLine();

  Setup setup_;
  const Backend& backend_;
  bool terminal_ = false;
  bool lineOpen_ = false;  // an in-place line is on screen without its newline
  int width_ = 1;
  double firstLoss_ = 0, lastLoss_ = 0, stepSeconds_ = 0;
  int64_t stepsRun_ = 0;
};

// --metrics FILE.jsonl: one JSON object per step. With `keepThroughStep`
// >= 0 (a resumed run) the rows of steps up to it are kept and the rest
// dropped (a killed run may have logged steps past its last checkpoint);
// otherwise the file starts empty. Every row is flushed as it is written,
// and a failed write or flush (ENOSPC, ...) throws Error naming the file.
class MetricsLog {
 public:
  MetricsLog(const std::string& path, int64_t keepThroughStep);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // step, loss (null if not finite), tokens_per_s, step_time_s, tokens, lr,
  // grad_norm (only when clipping), eval_loss, eval_ppl and eval_time_s
  // (only with `eval`, on the steps that evaluated), elapsed_s; numbers
  // round-trip exactly.
  void write(int64_t step, const StepResult& result, uint64_t tokens, double seconds, double elapsed, bool clipping,
             const EvalResult* eval = nullptr);
  // Closes the file; a close error throws (the destructor only closes).
  void close();

 private:
  // Throws if the stream took an error since it was opened.
  void check(const char* what);

  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace megatrain::runtime::tools
