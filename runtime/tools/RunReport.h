// RunReport.h - megatrain-run's measurements: median step time against the plan's prediction,
// the device memory report, and --trace (the measured schedule of one step, or of a window of
// consecutive steps on one clock, as Chrome trace JSON).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "megatrain/plan/ToolCli.h"
#include "megatrain/plan/plan.pb.h"
#include "megatrain/runtime/Backend.h"

namespace megatrain::runtime::tools {

// The flags of this file (docs/runtime.md lists them).
struct RunReportOptions {
  std::string trace;                 // --trace FILE.json
  std::optional<int64_t> traceStep;  // --trace-step N (default: the last step)
  uint32_t traceSteps = 1;           // --trace-steps K: the window ending at the traced step
  bool poison = false;               // --poison (cuda; always on for cpu)
  std::string stepGraphs = "auto";   // --step-graphs auto|on|off (cuda); --no-step-graphs is off
  bool hostOverlap = true;           // off with --no-host-overlap (cuda)
  std::string report;                // --report FILE.json
};

// Adds the flags above to megatrain-run's command line (group "Measurements").
void addRunReportOptions(CLI::App& app, RunReportOptions& options);
// What the flags alone get wrong, before anything is loaded: --trace-step(s) without --trace.
void checkRunReportFlags(const RunReportOptions& options);

// One measured step, or a window of them, against the plan's prediction.
struct TraceSummary {
  // One step: the latest measured end. A window: the mean time from one
  // step's first start to the next's (the period the steps repeat with).
  double measuredStepS = 0;
  double predictedStepS = 0;  // Header.predicted_step_s
  // A window (more than one step): per step, its first start, when its
  // device work ended (every stream but the host's) and when its host tasks
  // ended, on the window's clock.
  struct WindowStep {
    double startS = 0, deviceEndS = 0, hostEndS = 0;
  };
  std::vector<WindowStep> window;
  struct Stream {
    std::string name;
    double measuredBusyS = 0;   // summed durations of its timed kernels, copies and host tasks
    double predictedBusyS = 0;  // the same steps' predicted durations
  };
  std::vector<Stream> streams;  // in plan.streams order, then any other step stream; a window's per step
  struct Step {
    uint32_t index = 0;
    uint32_t trainStep = 0;  // in a window: which of its steps (from 0)
    std::string name;
    double measuredS = 0;
    double predictedS = 0;
  };
  std::vector<Step> slowest;  // up to 5, by measured - predicted, largest first
};

// Summarizes `spans` (one per plan step, NaN where not timed; a window of K steps: K x plan
// steps, Backend::endStepTrace); names label the steps.
TraceSummary summarizeTrace(const plan::Plan& plan, const std::vector<StepSpan>& spans,
                            const std::vector<std::string>& names);
std::string formatTraceSummary(const TraceSummary& summary);

// The median of the step times after the first (warm-up); the one time when
// there is only one; 0 when there are none.
double medianStepTime(const std::vector<double>& seconds);

// The device memory report as text lines and as a JSON object's members
// (no braces); `peakUsed` (0: unknown) is the device's used bytes after the first step.
std::string formatMemoryReport(const DeviceMemoryReport& report, uint64_t peakUsed);
std::string memoryReportJson(const DeviceMemoryReport& report, uint64_t peakUsed);

// What megatrain-run measures over a run. Not thread-safe; one per run.
class RunReport {
 public:
  RunReport(const plan::Plan& plan, Backend& backend, const RunReportOptions& options, int64_t firstStep,
            int64_t lastStep);

  // Whether step `step` is traced, and its place in the traced window (from 0).
  bool traceThisStep(int64_t step) const {
    return !options_.trace.empty() && step <= traceStep_ && step > traceStep_ - options_.traceSteps;
  }
  uint32_t traceIndex(int64_t step) const {
    return static_cast<uint32_t>(step - (traceStep_ - options_.traceSteps + 1));
  }
  uint32_t traceSteps() const { return options_.traceSteps; }
  // After each step: its wall time and, after the traced window's last step, its spans.
  void afterStep(int64_t step, double seconds, const std::vector<StepSpan>& trace);
  // After the run: prints the summary lines and writes --trace and --report.
  void finish(bool quiet);

 private:
  const plan::Plan& plan_;
  Backend& backend_;
  RunReportOptions options_;
  int64_t firstStep_ = 1;
  int64_t traceStep_ = 0;
  std::vector<double> seconds_;
  uint64_t peakUsed_ = 0;
  std::vector<StepSpan> trace_;
  bool traced_ = false;
};

}  // namespace megatrain::runtime::tools
