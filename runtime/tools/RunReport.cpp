// RunReport.cpp - megatrain-run's measurements: median step time, device memory report, --trace.
#include "RunReport.h"

#include "megatrain/plan/ToolCli.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "InspectOutputs.h"
#include "StepLabels.h"
#include "megatrain/plan/AtomicFile.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/Format.h"

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
  addValueOption(app, "--report", "FILE.json",
                 "after the run, write the median step time (after the first), the plan's predicted step "
                 "time and the device memory report",
                 group, [&options](const std::string& v) { options.report = v; });
}

TraceSummary summarizeTrace(const plan::Plan& plan, const std::vector<StepSpan>& spans,
                            const std::vector<std::string>& names) {
  TraceSummary summary;
  summary.predictedStepS = plan.header().predicted_step_s();
  std::map<std::string, size_t> streamAt;
  auto stream = [&](const std::string& name) -> TraceSummary::Stream& {
    auto [it, added] = streamAt.emplace(name, summary.streams.size());
    if (added) summary.streams.push_back({name, 0, 0});
    return summary.streams[it->second];
  };
  for (const std::string& name : plan.streams()) stream(name);
  std::vector<TraceSummary::Step> timed;
  for (int s = 0; s < plan.steps_size(); ++s) {
    const plan::Step& step = plan.steps(s);
    TraceSummary::Stream& track = stream(step.stream());
    if (!busyKind(step)) continue;
    const double predicted = std::max(0.0, step.predicted_end_s() - step.predicted_start_s());
    track.predictedBusyS += predicted;
    if (static_cast<size_t>(s) >= spans.size()) continue;
    const StepSpan& span = spans[static_cast<size_t>(s)];
    if (!std::isfinite(span.start) || !std::isfinite(span.end)) continue;
    const double measured = std::max(0.0, span.end - span.start);
    track.measuredBusyS += measured;
    summary.measuredStepS = std::max(summary.measuredStepS, span.end);
    timed.push_back({static_cast<uint32_t>(s), static_cast<size_t>(s) < names.size() ? names[static_cast<size_t>(s)] : "",
                     measured, predicted});
  }
  std::stable_sort(timed.begin(), timed.end(), [](const TraceSummary::Step& a, const TraceSummary::Step& b) {
    return a.measuredS - a.predictedS > b.measuredS - b.predictedS;
  });
  timed.resize(std::min<size_t>(timed.size(), 5));
  summary.slowest = std::move(timed);
  return summary;
}

std::string formatTraceSummary(const TraceSummary& summary) {
  std::string text = "trace     step " + ms(summary.measuredStepS) + " measured, " + ms(summary.predictedStepS) +
                     " predicted\n";
  for (const TraceSummary::Stream& stream : summary.streams)
    text += "  busy    " + stream.name + ": " + ms(stream.measuredBusyS) + " measured, " + ms(stream.predictedBusyS) +
            " predicted\n";
  if (!summary.slowest.empty()) text += "  over the prediction most:\n";
  for (const TraceSummary::Step& step : summary.slowest)
    text += "    step " + std::to_string(step.index) + " " + step.name + ": " + ms(step.measuredS) + " vs " +
            ms(step.predictedS) + "\n";
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
    if (!backend.canTraceSteps())
      throw Error("--trace needs --backend cuda (the " + backend.name() + " backend cannot time a step)");
    if (traceStep_ < firstStep || traceStep_ > lastStep)
      throw Error("--trace-step " + std::to_string(traceStep_) + " is not run (this run trains steps " +
                  std::to_string(firstStep) + " to " + std::to_string(lastStep) + ")");
  }
}

void RunReport::afterStep(int64_t step, double seconds, const std::vector<StepSpan>& trace) {
  seconds_.push_back(seconds);
  if (step == firstStep_) {
    if (const std::optional<DeviceMemory> memory = backend_.deviceMemory()) peakUsed_ = memory->total - memory->free;
  }
  if (traceThisStep(step)) {
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
    text += "  trace of step " + std::to_string(traceStep_) + " in " + options_.trace + "\n";
    traceJson = ", \"trace_step\": " + std::to_string(traceStep_) +
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
