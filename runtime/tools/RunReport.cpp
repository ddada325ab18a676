// RunReport.cpp - megatrain-run's measurements: median step time, device memory report, --trace.
#include "RunReport.h"

#include "megatrain/plan/ToolCli.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "InspectOutputs.h"
#include "StepLabels.h"
#include "megatrain/plan/AtomicFile.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/Format.h"
#include "megatrain/plan/Streams.h"

namespace megatrain::runtime::tools {
namespace {

bool busyKind(const plan::Step& step) {
  return step.op_case() == plan::Step::kKernel || step.op_case() == plan::Step::kCopy ||
         step.op_case() == plan::Step::kHostTask;
}

std::string ms(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f ms", seconds * 1e3);
  return text;
}

std::string jsonNumber(double value) {
  if (!std::isfinite(value)) return "null";
  char text[40];
  std::snprintf(text, sizeof text, "%.9g", value);
  return text;
}

}  // namespace

void addRunReportOptions(CLI::App& app, RunReportOptions& options) {
  const std::string group = "Measurements";
  addFlagOption(app, "--poison",
                "on cuda, fill each dead device tensor with NaN after its last use (a memset per tensor "
                "per step; always on for cpu; also MEGATRAIN_POISON=1)",
                group, [&options] { options.poison = true; });
  addValueOption(app, "--step-graphs", "auto|on|off",
                 "on cuda, record the second training step as a CUDA graph and replay it in later steps: "
                 "auto (default) for plans whose steps are short on the device (under 20 us of predicted "
                 "step time a plan step), where the host's issue would hold the device back; on for every "
                 "plan; off issues every step call by call (also MEGATRAIN_CUDA_GRAPHS=0, 1 or auto)",
                 group, [&options](const std::string& v) {
                   if (v != "auto" && v != "on" && v != "off")
                     throw Error("--step-graphs: expected auto, on or off, got '" + v + "'");
                   options.stepGraphs = v;
                 });
  addFlagOption(app, "--no-step-graphs", "the same as --step-graphs off", group,
                [&options] { options.stepGraphs = "off"; });
  addFlagOption(app, "--no-host-overlap",
                "on cuda, end each step issued call by call only when the host's AdamW updates are done, "
                "rather than once the loss is read with the updates after it running beside the next step "
                "(also MEGATRAIN_CUDA_HOST_OVERLAP=0)",
                group, [&options] { options.hostOverlap = false; });
  addValueOption(app, "--trace", "FILE.json",
                 "time every kernel, copy and host task of one step on the device (cuda) and write Chrome "
                 "trace events with the tracks of megatrain-inspect --trace and the predicted times in "
                 "args; print measured against predicted step and stream busy times",
                 group, [&options](const std::string& v) { options.trace = v; });
  addValueOption(app, "--trace-step", "N", "the step --trace times (default: the last)", group,
                 [&options](const std::string& v) { options.traceStep = parsePositive(v, "--trace-step"); });
  addValueOption(app, "--trace-steps", "K",
                 "time K consecutive steps, ending at --trace-step, on one clock: the first starts on an idle "
                 "device, the later ones beside the previous step's host updates as untraced steps do, so the "
                 "trace shows the updates running into the next step (default 1)",
                 group, [&options](const std::string& v) {
                   const int64_t k = parsePositive(v, "--trace-steps");
                   if (k > 64) throw Error("--trace-steps: at most 64, got " + v);
                   options.traceSteps = static_cast<uint32_t>(k);
                 });
  addValueOption(app, "--report", "FILE.json",
                 "after the run, write the median step time (after the first), the plan's predicted step "
                 "time and the device memory report",
                 group, [&options](const std::string& v) { options.report = v; });
}

void checkRunReportFlags(const RunReportOptions& options) {
  if (options.trace.empty() && (options.traceSteps != 1 || options.traceStep))
    throw Error(std::string(options.traceStep ? "--trace-step" : "--trace-steps") + " needs --trace FILE.json");
}

TraceSummary summarizeTrace(const plan::Plan& plan, const std::vector<StepSpan>& spans,
                            const std::vector<std::string>& names) {
  TraceSummary summary;
  summary.predictedStepS = plan.header().predicted_step_s();
  const size_t planSteps = static_cast<size_t>(plan.steps_size());
  const size_t windows = planSteps ? std::max<size_t>(1, spans.size() / planSteps) : 1;
  std::map<std::string, size_t> streamAt;
  auto stream = [&](const std::string& name) -> TraceSummary::Stream& {
    auto [it, added] = streamAt.emplace(name, summary.streams.size());
    if (added) summary.streams.push_back({name, 0, 0});
    return summary.streams[it->second];
  };
  for (const std::string& name : plan.streams()) stream(name);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<TraceSummary::WindowStep> window(windows, {nan, nan, nan});
  auto earliest = [](double& at, double t) { at = std::isnan(at) ? t : std::min(at, t); };
  auto latest = [](double& at, double t) { at = std::isnan(at) ? t : std::max(at, t); };
  std::vector<TraceSummary::Step> timed;
  double lastEnd = 0;
  for (size_t w = 0; w < windows; ++w)
    for (size_t s = 0; s < planSteps; ++s) {
      const plan::Step& step = plan.steps(static_cast<int>(s));
      TraceSummary::Stream& track = stream(step.stream());
      if (!busyKind(step)) continue;
      const double predicted = std::max(0.0, step.predicted_end_s() - step.predicted_start_s());
      if (w == 0) track.predictedBusyS += predicted;
      const size_t at = w * planSteps + s;
      if (at >= spans.size()) continue;
      const StepSpan& span = spans[at];
      if (!std::isfinite(span.start) || !std::isfinite(span.end)) continue;
      const double measured = std::max(0.0, span.end - span.start);
      track.measuredBusyS += measured / static_cast<double>(windows);
      lastEnd = std::max(lastEnd, span.end);
      earliest(window[w].startS, span.start);
      latest(step.stream() == plan::kHostStream ? window[w].hostEndS : window[w].deviceEndS, span.end);
      timed.push_back({static_cast<uint32_t>(s), static_cast<uint32_t>(w), s < names.size() ? names[s] : "",
                       measured, predicted});
    }
  summary.measuredStepS = lastEnd;
  if (windows > 1) {
    summary.window = window;
    if (std::isfinite(window.front().startS) && std::isfinite(window.back().startS))
      summary.measuredStepS = (window.back().startS - window.front().startS) / static_cast<double>(windows - 1);
  }
  std::stable_sort(timed.begin(), timed.end(), [](const TraceSummary::Step& a, const TraceSummary::Step& b) {
    return a.measuredS - a.predictedS > b.measuredS - b.predictedS;
  });
  timed.resize(std::min<size_t>(timed.size(), 5));
  summary.slowest = std::move(timed);
  return summary;
}

std::string formatTraceSummary(const TraceSummary& summary) {
  const bool window = summary.window.size() > 1;
  std::string text;
  if (!window) {
    text = "trace     step " + ms(summary.measuredStepS) + " measured, " + ms(summary.predictedStepS) + " predicted\n";
  } else {
    text = "trace     " + std::to_string(summary.window.size()) + " steps on one clock, " +
           ms(summary.measuredStepS) + " from one step's start to the next's (mean), " +
           ms(summary.predictedStepS) + " predicted\n";
    for (size_t w = 0; w < summary.window.size(); ++w) {
      const TraceSummary::WindowStep& step = summary.window[w];
      text += "  step " + std::to_string(w + 1) + "  starts " + ms(step.startS) + ", device done " +
              ms(step.deviceEndS);
      if (std::isfinite(step.hostEndS)) {
        text += ", host done " + ms(step.hostEndS);
        if (w + 1 < summary.window.size() && std::isfinite(summary.window[w + 1].startS))
          text += " (" + ms(step.hostEndS - summary.window[w + 1].startS) + " into the next step)";
      }
      text += "\n";
    }
  }
  for (const TraceSummary::Stream& stream : summary.streams)
    text += "  busy    " + stream.name + ": " + ms(stream.measuredBusyS) + " measured" +
            (window ? " (a step's mean)" : "") + ", " + ms(stream.predictedBusyS) + " predicted\n";
  if (!summary.slowest.empty()) text += "  over the prediction most:\n";
  for (const TraceSummary::Step& step : summary.slowest)
    text += "    step " + std::to_string(step.index) + (window ? " of step " + std::to_string(step.trainStep + 1) : "") +
            " " + step.name + ": " + ms(step.measuredS) + " vs " + ms(step.predictedS) + "\n";
  return text;
}

double medianStepTime(const std::vector<double>& seconds) {
  if (seconds.empty()) return 0;
  if (seconds.size() == 1) return seconds[0];
  std::vector<double> rest(seconds.begin() + 1, seconds.end());
  std::sort(rest.begin(), rest.end());
  const size_t n = rest.size();
  return n % 2 ? rest[n / 2] : 0.5 * (rest[n / 2 - 1] + rest[n / 2]);
}

std::string formatMemoryReport(const DeviceMemoryReport& r, uint64_t peakUsed) {
  const uint64_t own = r.arenaBytes + r.scratchBytes + r.workspaceBytes;
  std::string text = "device    " + formatBytes(own) + " of ours: arena " + formatBytes(r.arenaBytes) + ", scratch " +
                     formatBytes(r.scratchBytes) + ", cuBLAS workspace " + formatBytes(r.workspaceBytes) +
                     "; context and libraries " + formatBytes(r.contextBytes) + "\n";
  text += "  budget  " + (r.budgetBytes ? formatBytes(r.budgetBytes) : std::string("none")) + " + fixed workspace " +
          formatBytes(r.fixedWorkspaceBytes) + "; device in use " + formatBytes(r.beforePrepare) + " before prepare, " +
          formatBytes(r.afterPrepare) + " after";
  if (peakUsed) text += ", " + formatBytes(peakUsed) + " after the first step";
  text += " (of " + formatBytes(r.totalBytes) + ")\n";
  return text;
}

std::string memoryReportJson(const DeviceMemoryReport& r, uint64_t peakUsed) {
  auto field = [](const char* name, uint64_t value) {
    return std::string("\"") + name + "\": " + std::to_string(value);
  };
  return field("device_total_bytes", r.totalBytes) + ", " + field("device_context_bytes", r.contextBytes) + ", " +
         field("device_used_before_prepare_bytes", r.beforePrepare) + ", " +
         field("device_used_after_prepare_bytes", r.afterPrepare) + ", " +
         field("device_used_after_first_step_bytes", peakUsed) + ", " + field("device_arena_bytes", r.arenaBytes) +
         ", " + field("device_scratch_bytes", r.scratchBytes) + ", " +
         field("device_workspace_bytes", r.workspaceBytes) + ", " + field("device_budget_bytes", r.budgetBytes) +
         ", " + field("device_fixed_workspace_bytes", r.fixedWorkspaceBytes);
}

RunReport::RunReport(const plan::Plan& plan, Backend& backend, const RunReportOptions& options, int64_t firstStep,
                     int64_t lastStep)
    : plan_(plan), backend_(backend), options_(options), firstStep_(firstStep) {
  traceStep_ = options.traceStep ? *options.traceStep : lastStep;
  if (!options.trace.empty()) {
    if (traceStep_ < firstStep || traceStep_ > lastStep)
      throw Error("--trace-step " + std::to_string(traceStep_) + " is not run (this run trains steps " +
                  std::to_string(firstStep) + " to " + std::to_string(lastStep) + ")");
    if (traceStep_ - options.traceSteps + 1 < firstStep)
      throw Error("--trace-steps " + std::to_string(options.traceSteps) + " ending at step " +
                  std::to_string(traceStep_) + " would start before step " + std::to_string(firstStep) +
                  ", the first this run trains");
    if (!backend.canTraceSteps())
      throw Error("--trace needs --backend cuda (the " + backend.name() + " backend cannot time a step)");
  }
}

void RunReport::afterStep(int64_t step, double seconds, const std::vector<StepSpan>& trace) {
  seconds_.push_back(seconds);
  if (step == firstStep_) {
    if (const std::optional<DeviceMemory> memory = backend_.deviceMemory()) peakUsed_ = memory->total - memory->free;
  }
  if (traceThisStep(step) && traceIndex(step) + 1 == options_.traceSteps) {
    trace_ = trace;
    traced_ = true;
  }
}

void RunReport::finish(bool quiet) {
  const double median = medianStepTime(seconds_);
  const double predicted = plan_.header().predicted_step_s();
  std::string text = "timing    median step " + ms(median) + " over " +
                     std::to_string(seconds_.size() > 1 ? seconds_.size() - 1 : seconds_.size()) +
                     " steps (after the first), predicted " + (predicted > 0 ? ms(predicted) : std::string("none")) + "\n";
  const std::optional<DeviceMemoryReport> memory = backend_.memoryReport();
  if (memory) text += formatMemoryReport(*memory, peakUsed_);
  std::string traceJson;
  if (traced_) {
    const std::vector<std::string> names = traceStepNames(plan_);
    const TraceSummary summary = summarizeTrace(plan_, trace_, names);
    text += formatTraceSummary(summary);
    writeFileAtomically(options_.trace, chromeTrace(plan_, names, nullptr, &trace_));
    text += options_.traceSteps == 1
                ? "  trace of step " + std::to_string(traceStep_) + " in " + options_.trace + "\n"
                : "  trace of steps " + std::to_string(traceStep_ - options_.traceSteps + 1) + " to " +
                      std::to_string(traceStep_) + " in " + options_.trace + "\n";
    traceJson = ", \"trace_step\": " + std::to_string(traceStep_) +
                ", \"trace_steps\": " + std::to_string(options_.traceSteps) +
                ", \"trace_step_s\": " + jsonNumber(summary.measuredStepS);
  }
  (void)quiet;  // the measurements are part of the final summary, printed even with --quiet
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  if (!options_.report.empty()) {
    std::string json = "{\"backend\": \"" + backend_.name() + "\", \"steps\": " + std::to_string(seconds_.size()) +
                       ", \"median_step_time_s\": " + jsonNumber(median) +
                       ", \"predicted_step_s\": " + jsonNumber(predicted);
    if (memory) json += ", " + memoryReportJson(*memory, peakUsed_);
    json += traceJson + "}\n";
    writeFileAtomically(options_.report, json);
  }
}

}  // namespace megatrain::runtime::tools
