// megatrain-inspect.cpp - prints a plan: header, cost summary and the step-by-step schedule.
#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "InspectOutputs.h"
#include "StepLabels.h"
#include "megatrain/plan/DeviceProfile.h"
#include "megatrain/plan/Simulate.h"
#include "megatrain/plan/Aliases.h"
#include "megatrain/plan/AtomicFile.h"
#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/Format.h"
#include "megatrain/plan/Json.h"
#include "megatrain/plan/PlanTimeline.h"
#include "megatrain/plan/ProfileJson.h"
#include "megatrain/plan/ToolCli.h"
#include "megatrain/plan/ToolMain.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/PlanLoader.h"
#include "megatrain/runtime/StateHomes.h"
#include "megatrain/runtime/PlanStats.h"

namespace megatrain::runtime::tools {
namespace {

const char kUsage[] =
    "usage: megatrain-inspect MODEL.plan [--max-steps N] [--memory-plot FILE.svg] [--trace FILE.json]\n"
    "                         [--device-profile FILE.json] [--set FIELD=VALUE]...\n";

const char kDescription[] =
    "Prints what a plan does: its header (provenance, optimizer), a summary (parameters, pools, "
    "device memory peak from tensor lifetimes against the compiler's prediction and what it holds, the predicted "
    "step time and its breakdown, bytes per link) and the schedule, one row per step: stream, what "
    "runs, the tensors it touches (for a wait: the record it waits for), the device memory live "
    "after it and, when the plan carries the compiler's predictions, when the step is predicted "
    "to start.";

const char kFooter[] = R"(--memory-plot and --trace need a plan with predictions (format 1.2, written
by megatrain-compile's plan simulator), or --device-profile.

--device-profile runs megatrain-compile's plan simulator again on the plan as
written, with another machine's figures: megatrain-profile's output, or a
profile whose host rate bench/fit_profile.py --host fitted to a traced step.
--set replaces one figure of that profile, or of the compiler's own (recorded
in the plan) without --device-profile: the host AdamW rate megatrain-profile
measured on this machine, with its kernel efficiencies kept. The schedule is
the one the plan holds (planned for the compiler's profile); only its
predicted times change.

Examples:
  megatrain-inspect tiny.plan --max-steps 40
  megatrain-inspect tiny.plan --memory-plot memory.svg --trace trace.json
  megatrain-inspect tiny.plan --max-steps 20 --device-profile measured.json
  megatrain-inspect tiny.plan --max-steps 20 --set host_adamw_params_per_s=3.4e9
)";

// "12.345 ms" style, in the unit that suits the value.
std::string formatSeconds(double seconds) {
  char text[32];
  if (seconds >= 1)
    std::snprintf(text, sizeof text, "%.3f s", seconds);
  else if (seconds >= 1e-3)
    std::snprintf(text, sizeof text, "%.3f ms", seconds * 1e3);
  else
    std::snprintf(text, sizeof text, "%.1f us", seconds * 1e6);
  return text;
}

bool hasPredictions(const plan::Plan& plan) { return plan.header().predicted_step_s() > 0; }

// The plan's own prediction when --device-profile predicted it again.
struct CompiledPrediction {
  std::string profileFile;  // --device-profile
  std::string profileName;  // the compiler's profile
  double stepS = 0;         // the compiler's predicted step; 0: the plan had none
};

void printHeader(const plan::Plan& plan, const std::optional<CompiledPrediction>& compiled) {
  const plan::Header& h = plan.header();
  auto row = [](const char* key, const std::string& value) {
    if (!value.empty()) std::printf("  %-14s %s\n", key, value.c_str());
  };
  std::printf("header\n");
  row("format", std::to_string(h.format_major()) + "." + std::to_string(h.format_minor()));
  row("generator", h.generator());
  row("source model", h.source_model());
  row("source sha256", h.source_sha256());
  std::string options;
  for (const std::string& option : h.compile_options()) options += (options.empty() ? "" : " ") + option;
  row("options", options);
  // The profile's name; the whole text when it is not a JSON object with a string "name".
  row("device", profileName(h.device_profile()).value_or(h.device_profile()));
  if (compiled)
    row("predicted on", compiled->profileFile + " (the plan's schedule predicted again; the compiler's " +
                            (compiled->stepS > 0 ? formatSeconds(compiled->stepS) + " step on " +
                                                       compiled->profileName
                                                 : std::string("plan had no predictions")) +
                            ")");
  // An evaluation plan (format 1.6, --forward-only) has no optimizer to show.
  row("kind", h.evaluation() ? "evaluation (forward and loss only; megatrain-run --eval-plan)" : "training");
  const plan::AdamW& o = h.optimizer();
  if (!h.evaluation())
    row("optimizer", "AdamW lr " + formatDouble(o.lr()) + ", betas (" + formatDouble(o.beta1()) +
                         ", " + formatDouble(o.beta2()) + "), eps " + formatDouble(o.eps()) +
                         ", weight_decay " + formatDouble(o.weight_decay()));
  if (h.loss_tensor() < static_cast<uint32_t>(plan.tensors_size()))
    row("loss", "tensor " + std::to_string(h.loss_tensor()) + " '" +
                    plan.tensors(static_cast<int>(h.loss_tensor())).name() + "'");
  row("token input", h.token_input());
  if (!h.target_input().empty())
    row("targets input", h.target_input() + " (the loss's targets: the tokens, masked to " +
                             std::to_string(h.ignore_index()) + ")");
  if (h.microbatches()) row("microbatches", std::to_string(h.microbatches()));
  if (h.device_budget_bytes()) {
    // The arena's budget; with state on the device (a capacity above it)
    // the rest of the device is the state's (docs/tiering.md, "The fill").
    std::string budget = formatBytes(h.device_budget_bytes()) + " of device memory";
    if (h.device_capacity_bytes() > h.device_budget_bytes())
      budget += " for the arena, of the device's " + formatBytes(h.device_capacity_bytes()) +
                " (the rest for training state)";
    row("budget", budget);
  }
  row("tiering", h.tiering_policy());
  row("precision", h.precision().empty() ? std::string("fp32") : h.precision());
}

// The parameters whose update visits the device (docs/tiering.md "Update
// visits"): a device ADAMW over a STATE_STAGE master, copied from the PARAMETER.
std::set<std::string> updateVisitors(const plan::Plan& plan) {
  std::map<uint32_t, uint32_t> copiedFrom;  // visit tensor -> the PARAMETER copied into it
  for (const plan::Step& step : plan.steps())
    if (step.has_copy()) copiedFrom[step.copy().dst()] = step.copy().src();
  std::set<std::string> names;
  for (const plan::Step& step : plan.steps()) {
    if (!step.has_host_task() || step.host_task().kind() != plan::HostTask::ADAMW ||
        step.host_task().tensors_size() == 0)
      continue;
    const uint32_t first = step.host_task().tensors(0);
    if (first >= static_cast<uint32_t>(plan.tensors_size()) ||
        plan.tensors(static_cast<int>(first)).role() != plan::STATE_STAGE)
      continue;
    auto from = copiedFrom.find(first);
    if (from != copiedFrom.end() && from->second < static_cast<uint32_t>(plan.tensors_size()))
      names.insert(plan.tensors(static_cast<int>(from->second)).name());
  }
  return names;
}

// Where the training state lives (docs/tiering.md "State homes"): the
// capacities, bytes per parameter in each tier, then each parameter's home.
void printStateHomes(const plan::Plan& plan) {
  const StateHomes homes = computeStateHomes(plan);
  const plan::Header& h = plan.header();
  auto capacity = [](uint64_t bytes) { return bytes ? formatBytes(bytes) : std::string("none"); };
  std::printf("\nstate\n");
  std::printf("  %-14s device %s, host %s, disk %s\n", "capacities", capacity(h.device_capacity_bytes()).c_str(),
              capacity(h.host_capacity_bytes()).c_str(), capacity(h.disk_capacity_bytes()).c_str());
  const plan::Tier tiers[] = {plan::DEVICE, plan::HOST_PINNED, plan::DISK};
  const char* names[] = {"device", "host", "disk"};
  // Every pool of each tier (arena, staging and state), exact, against the capacities.
  uint64_t poolBytes[3] = {};
  for (const plan::Pool& pool : plan.pools())
    for (int i = 0; i < 3; ++i)
      if (pool.tier() == tiers[i]) poolBytes[i] += pool.size_bytes();
  std::printf("  %-14s device %llu, host %llu, disk %llu\n", "pool bytes",
              static_cast<unsigned long long>(poolBytes[0]), static_cast<unsigned long long>(poolBytes[1]),
              static_cast<unsigned long long>(poolBytes[2]));
  std::printf("  %-14s", "bytes/param");
  for (int i = 0; i < 3; ++i)
    std::printf("%s %s %.2f", i ? "," : "", names[i], homes.bytesPerParameter(tiers[i]));
  std::printf("\n");
  for (int i = 0; i < 3; ++i)
    std::printf("  %-14s %llu parameters, %s of state\n", names[i],
                static_cast<unsigned long long>(homes.parametersPerTier[tiers[i]]),
                formatBytes(homes.bytesPerTier[tiers[i]]).c_str());
  const std::set<std::string> visitors = updateVisitors(plan);
  if (!visitors.empty())
    std::printf("  %-14s %zu host parameters update on the device (pool update_visit)\n", "update visits",
                visitors.size());
  for (const ParameterHome& home : homes.parameters)
    std::printf("  %-14s %-6s %s (%s elements, %s of state)\n", "home",
                home.tier == plan::DEVICE ? "device"
                : home.tier == plan::DISK ? "disk"
                : visitors.count(home.name) ? "visit"
                                            : "host",
                home.name.c_str(), formatCount(home.elements).c_str(), formatBytes(home.stateBytes).c_str());
}

void printSummary(const plan::Plan& plan, const PlanStats& stats) {
  std::printf("\nsummary\n");
  std::printf("  %-14s %s tensors, %s elements\n", "parameters",
              formatCount(stats.parameterTensors).c_str(), formatCount(stats.parameterElements).c_str());
  std::printf("  %-14s %s tensors, %s elements\n", "trainable",
              formatCount(stats.trainableTensors).c_str(), formatCount(stats.trainableElements).c_str());
  if (stats.tokensPerStep)
    std::printf("  %-14s %s per step\n", "tokens", formatCount(stats.tokensPerStep).c_str());
  for (const plan::Pool& pool : plan.pools()) {
    std::string predicted;
    for (const plan::PoolUsage& usage : plan.header().predicted_peak())
      if (usage.pool() == pool.id()) predicted = ", predicted peak " + formatBytes(usage.peak_bytes());
    std::printf("  %-14s %u '%s' %s %s%s\n", pool.id() == 0 ? "pools" : "", pool.id(),
                pool.name().c_str(), tierName(pool.tier()), formatBytes(pool.size_bytes()).c_str(),
                predicted.c_str());
  }
  if (stats.devicePeakStep >= 0) {
    std::printf("  %-14s %s at step %lld (from tensor lifetimes)\n", "device peak",
                formatBytes(stats.devicePeakBytes).c_str(), static_cast<long long>(stats.devicePeakStep));
    // What the peak holds, by pool, role and (for activations) the kernel
    // that wrote them: where a budget goes.
    const std::vector<DeviceMemoryGroup> groups = deviceMemoryAt(plan, stats.devicePeakStep);
    constexpr size_t kShownGroups = 12;
    for (size_t i = 0; i < groups.size() && i < kShownGroups; ++i)
      std::printf("  %-14s %9s  %5llu %s  %s\n", i == 0 ? "at the peak" : "", formatBytes(groups[i].bytes).c_str(),
                  static_cast<unsigned long long>(groups[i].tensors), groups[i].tensors == 1 ? "tensor " : "tensors",
                  groups[i].what.c_str());
    if (groups.size() > kShownGroups) {
      uint64_t rest = 0, tensors = 0;
      for (size_t i = kShownGroups; i < groups.size(); ++i) {
        rest += groups[i].bytes;
        tensors += groups[i].tensors;
      }
      std::printf("  %-14s %9s  %5llu tensors  %zu more kinds\n", "", formatBytes(rest).c_str(),
                  static_cast<unsigned long long>(tensors), groups.size() - kShownGroups);
    }
  }
  int kernels = 0, copies = 0, events = 0, hostTasks = 0;
  for (const plan::Step& step : plan.steps()) {
    kernels += step.has_kernel();
    copies += step.has_copy();
    events += step.has_record() || step.has_wait();
    hostTasks += step.has_host_task();
  }
  std::printf("  %-14s %d (%d kernels, %d copies, %d events, %d host tasks)\n", "steps",
              plan.steps_size(), kernels, copies, events, hostTasks);
  // Reshapes and order-keeping transposes the compiler made views: no step each.
  if (const size_t views = countAliases(plan))
    std::printf("  %-14s %zu tensors share their base's bytes (no step)\n", "views", views);
  std::string streams;
  for (const std::string& stream : plan.streams()) streams += (streams.empty() ? "" : ", ") + stream;
  std::printf("  %-14s %s\n", "streams", streams.c_str());
  if (!hasPredictions(plan)) return;
  const plan::Header& h = plan.header();
  const plan::StepTimeBreakdown& b = h.predicted_breakdown();
  std::printf("  %-14s %s: compute %s, exposed transfer %s, recompute %s, host optimizer %s, idle %s\n",
              "predicted step", formatSeconds(h.predicted_step_s()).c_str(), formatSeconds(b.compute_s()).c_str(),
              formatSeconds(b.exposed_transfer_s()).c_str(), formatSeconds(b.recompute_s()).c_str(),
              formatSeconds(b.host_optimizer_s()).c_str(), formatSeconds(b.idle_s()).c_str());
  // Busy time per stream from the step predictions: how loaded each link is.
  std::vector<std::pair<std::string, double>> busy;
  for (const std::string& stream : plan.streams()) busy.emplace_back(stream, 0.0);
  for (const plan::Step& step : plan.steps()) {
    if (step.has_record() || step.has_wait()) continue;
    for (auto& [stream, seconds] : busy)
      if (stream == step.stream()) seconds += step.predicted_end_s() - step.predicted_start_s();
  }
  // A link is busy with every stream that copies over it: the parameters' fetches
  // (stream `fetch`) cross the h2d link beside h2d's prefetches.
  auto busyOf = [&](std::initializer_list<const char*> streams) {
    double total = 0;
    for (const auto& [name, seconds] : busy)
      for (const char* stream : streams)
        if (name == stream) total += seconds;
    return formatSeconds(total);
  };
  std::printf("  %-14s h2d %s (busy %s), d2h %s (busy %s)\n", "links", formatBytes(h.h2d_bytes()).c_str(),
              busyOf({"h2d", "fetch"}).c_str(), formatBytes(h.d2h_bytes()).c_str(), busyOf({"d2h"}).c_str());
  std::string loads;
  for (const auto& [stream, seconds] : busy)
    loads += (loads.empty() ? "" : ", ") + stream + " " + formatSeconds(seconds);
  std::printf("  %-14s %s\n", "busy", loads.c_str());
  // How slow a host the prediction holds for: a machine whose host AdamW runs
  // slower than the floor (megatrain-profile measures it) gets a longer step.
  const std::string hostRate = describeHostRateFloor(plan);
  if (!hostRate.empty()) std::printf("  %-14s %s\n", "host rate", hostRate.c_str());
}

void printSchedule(const plan::Plan& plan, const PlanStats& stats, int64_t maxSteps) {
  const int64_t shown = maxSteps > 0 ? std::min<int64_t>(maxSteps, plan.steps_size()) : plan.steps_size();
  std::vector<std::string> whats(static_cast<size_t>(shown)), tensors(static_cast<size_t>(shown));
  size_t streamWidth = 6, whatWidth = 4, tensorsWidth = 7;
  std::map<std::string, int64_t> latestRecord;  // event -> step
  for (int64_t s = 0; s < shown; ++s) {
    const plan::Step& step = plan.steps(static_cast<int>(s));
    describe(plan, step, whats[static_cast<size_t>(s)], tensors[static_cast<size_t>(s)]);
    // A wait: the record it waits for (the validator has proven there is one).
    if (step.has_record()) latestRecord[step.record().event()] = s;
    auto record = step.has_wait() ? latestRecord.find(step.wait().event()) : latestRecord.end();
    if (record != latestRecord.end())
      tensors[static_cast<size_t>(s)] = "record at step " + std::to_string(record->second) + " (" +
                                        plan.steps(static_cast<int>(record->second)).stream() + ")";
    streamWidth = std::max(streamWidth, step.stream().size());
    whatWidth = std::max(whatWidth, whats[static_cast<size_t>(s)].size());
    tensorsWidth = std::max(tensorsWidth, tensors[static_cast<size_t>(s)].size());
  }
  const int indexWidth = std::max<int>(4, static_cast<int>(std::to_string(plan.steps_size()).size()));
  std::printf("\nschedule\n");
  const bool predicted = hasPredictions(plan);
  const int liveWidth = predicted ? 11 : 0;  // no trailing blanks without the last column
  std::printf("  %*s  %-*s  %-*s  %-*s  %-*s%s\n", indexWidth, "step", static_cast<int>(streamWidth),
              "stream", static_cast<int>(whatWidth), "what", static_cast<int>(tensorsWidth), "tensors",
              liveWidth, "device live", predicted ? "  predicted start" : "");
  for (int64_t s = 0; s < shown; ++s) {
    const plan::Step& step = plan.steps(static_cast<int>(s));
    std::printf("  %*lld  %-*s  %-*s  %-*s  %-*s%s\n", indexWidth, static_cast<long long>(s),
                static_cast<int>(streamWidth), step.stream().c_str(), static_cast<int>(whatWidth),
                whats[static_cast<size_t>(s)].c_str(), static_cast<int>(tensorsWidth),
                tensors[static_cast<size_t>(s)].c_str(), liveWidth,
                formatBytes(stats.deviceLiveBytes[static_cast<size_t>(s)]).c_str(),
                predicted ? ("  " + formatSeconds(step.predicted_start_s())).c_str() : "");
  }
  if (shown < plan.steps_size())
    std::printf("  ... %lld more steps (--max-steps)\n",
                static_cast<long long>(plan.steps_size() - shown));
}

// --memory-plot and --trace, from the predicted step times.
void writePictures(const plan::Plan& plan, const std::string& path, const std::string& memoryPlot,
                   const std::string& tracePath) {
  const std::vector<PoolTimeline> timelines = memoryTimelines(plan);
  const PoolTimeline* device = nullptr;
  for (int i = 0; i < plan.pools_size() && !device; ++i)
    if (plan.pools(i).tier() == plan::DEVICE) device = &timelines[static_cast<size_t>(i)];
  const double stepSeconds = plan.header().predicted_step_s();
  const uint64_t budget = plan.header().device_budget_bytes();
  if (!memoryPlot.empty()) {
    if (!device) throw Error(path + ": the plan has no device pool to plot");
    writeFileAtomically(memoryPlot, memoryPlotSvg(*device, stepSeconds, budget,
                                                  "device memory of " + path + " (predicted)"));
    std::printf("\ndevice memory (peak %s at %s; plot in %s)\n", formatBytes(device->peakBytes).c_str(),
                formatSeconds(device->peakTime).c_str(), memoryPlot.c_str());
    std::fputs(memoryPlotText(*device, stepSeconds, budget, 60, 12).c_str(), stdout);
  }
  if (!tracePath.empty()) {
    writeFileAtomically(tracePath, chromeTrace(plan, traceStepNames(plan), device));
    std::printf("\ntrace of %d steps on %d streams in %s\n", plan.steps_size(), plan.streams_size(),
                tracePath.c_str());
  }
}

// The profile --device-profile and --set name: FILE's (or, without it, the one the
// compiler recorded in the plan's header), each FIELD=VALUE of --set replacing a field.
DeviceProfile predictionProfile(const plan::Plan& plan, const std::string& path, const std::string& file,
                                const std::vector<std::string>& overrides) {
  DeviceProfile profile;
  std::string error, label = file;
  if (!file.empty()) {
    if (!loadDeviceProfile(file, profile, error)) throw Error(error);
  } else {
    label = path + ": the plan's device profile";
    if (plan.header().device_profile().empty())
      throw Error(path + ": the plan records no device profile to --set a figure of; give --device-profile FILE");
    if (!parseDeviceProfile(plan.header().device_profile(), profile, error)) throw Error(label + ": " + error);
  }
  if (overrides.empty()) return profile;
  nlohmann::json fields = parseJson(deviceProfileToJson(profile), label);
  for (const std::string& change : overrides) {
    const size_t equals = change.find('=');
    if (equals == std::string::npos || equals == 0)
      throw Error("--set '" + change + "': expected FIELD=VALUE, such as host_adamw_params_per_s=3.4e9");
    const std::string value = change.substr(equals + 1);
    size_t used = 0;
    double number = 0;
    try {
      number = std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != value.size())
      throw Error("--set '" + change + "': '" + value + "' is not a number");
    fields[change.substr(0, equals)] = number;
  }
  if (!parseDeviceProfile(fields.dump(), profile, error)) throw Error("--set: " + error);
  return profile;
}

int inspect(int argc, char** argv) {
  std::vector<std::string> positional;
  int64_t maxSteps = 0;
  std::string memoryPlot, tracePath;
  CLI::App app;
  setupToolApp(app, "megatrain-inspect", {kUsage, kDescription, kFooter});
  app.add_option("MODEL.plan", positional, "the plan to print")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  const std::string group = "Options";
  addValueOption(app, "--max-steps", "N", "print at most N schedule rows (default: all)", group,
                 [&](const std::string& v) { maxSteps = parsePositive(v, "--max-steps"); });
  addValueOption(app, "--memory-plot", "FILE.svg",
                 "draw live device memory over predicted time (with the budget line when the plan has a "
                 "budget) into FILE.svg, and print the same as a text plot",
                 group, [&](const std::string& v) { memoryPlot = v; });
  addValueOption(app, "--trace", "FILE.json",
                 "write the predicted schedule as Chrome trace events, one track per stream (open in "
                 "Perfetto or chrome://tracing)",
                 group, [&](const std::string& v) { tracePath = v; });
  std::string profilePath;
  addValueOption(app, "--device-profile", "FILE.json",
                 "predict the plan's step again on this device profile (megatrain-profile's JSON): every "
                 "predicted time printed, plotted and traced is then this profile's; the header keeps "
                 "the compiler's step beside it",
                 group, [&](const std::string& v) { profilePath = v; });
  std::vector<std::string> overrides;
  repeatable(addValueOption(
      app, "--set", "FIELD=VALUE",
      "predict the plan's step again with one figure of its profile (the plan's own, or "
      "--device-profile's) replaced, such as host_adamw_params_per_s=3.4e9 (repeatable)",
      group, [&](const std::string& v) { overrides.push_back(v); }));
  if (parseToolCommandLine(app, argc, argv)) return 0;  // --help or --version
  if (positional.empty()) throw Error("missing MODEL.plan (see --help)");
  if (positional.size() > 1) throw Error("unexpected argument '" + positional[1] + "' (one plan file only)");
  const std::string path = positional[0];

  plan::Plan plan = loadPlan(path);
  // The CPU backend knows every kernel of docs/ops.md; it allocates nothing here.
  CpuBackend kernels;
  validatePlan(plan, kernels, path);
  std::optional<CompiledPrediction> compiled;
  if (!profilePath.empty() || !overrides.empty()) {
    compiled = CompiledPrediction{profilePath.empty() ? "the plan's profile" : profilePath,
                                  profileName(plan.header().device_profile()).value_or("its profile"),
                                  plan.header().predicted_step_s()};
    for (const std::string& change : overrides) compiled->profileFile += " with " + change;
    // As megatrain-compile does: each matmul and attention step at the rate its
    // `precision` attribute names, exact fp32 otherwise.
    simulatePlan(plan, predictionProfile(plan, path, profilePath, overrides), Precision::FP32);
  }
  if ((!memoryPlot.empty() || !tracePath.empty()) && !hasPredictions(plan))
    throw Error(path + ": the plan has no predicted step times (format " +
                std::to_string(plan.header().format_major()) + "." +
                std::to_string(plan.header().format_minor()) +
                "); recompile it with a megatrain-compile that writes them (format 1.2)");
  const PlanStats stats = computePlanStats(plan);
  printHeader(plan, compiled);
  printSummary(plan, stats);
  printStateHomes(plan);
  printSchedule(plan, stats, maxSteps);
  if (!memoryPlot.empty() || !tracePath.empty()) writePictures(plan, path, memoryPlot, tracePath);
  return 0;
}

}  // namespace
}  // namespace megatrain::runtime::tools

int main(int argc, char** argv) {
  return megatrain::runTool(
      "megatrain-inspect", [&] { return megatrain::runtime::tools::inspect(argc, argv); });
}
