// TraceWriterTest.cpp - megatrain-run --trace's writer and summary: the measured schedule as
// Chrome trace JSON on megatrain-inspect's tracks, and measured against predicted times.
#include <algorithm>
#include <cstdio>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "InspectOutputs.h"
#include "RunReport.h"
#include "StepLabels.h"
#include "TinyPlans.h"
#include "megatrain/plan/Json.h"

namespace megatrain::runtime::testing {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The linear plan with a predicted schedule: step s on [s, s + 1) ms.
plan::Plan predictedPlan() {
  plan::Plan plan = linearPlan(plan::F32);
  for (int s = 0; s < plan.steps_size(); ++s) {
    plan.mutable_steps(s)->set_predicted_start_s(s * 1e-3);
    plan.mutable_steps(s)->set_predicted_end_s((s + 1) * 1e-3);
  }
  plan.mutable_header()->set_predicted_step_s(plan.steps_size() * 1e-3);
  return plan;
}

// Measured spans: every kernel, copy and host task timed, twice its prediction
// for kernels, records and waits not timed.
std::vector<StepSpan> measuredSpans(const plan::Plan& plan) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<StepSpan> spans(static_cast<size_t>(plan.steps_size()), StepSpan{nan, nan});
  double t = 0;
  for (int s = 0; s < plan.steps_size(); ++s) {
    const plan::Step& step = plan.steps(s);
    if (step.has_record() || step.has_wait()) continue;
    const double duration = step.has_kernel() ? 2e-3 : 0.5e-3;
    spans[static_cast<size_t>(s)] = {t, t + duration};
    t += duration;
  }
  return spans;
}

TEST(TraceWriter, MeasuredTraceHasEveryStreamTrackAndThePredictedTimes) {
  const plan::Plan plan = predictedPlan();
  const std::vector<StepSpan> spans = measuredSpans(plan);
  const std::vector<std::string> names = tools::traceStepNames(plan);
  const std::string measured = tools::chromeTrace(plan, names, nullptr, &spans);
  const std::string predicted = tools::chromeTrace(plan, names, nullptr);
  // Both are one well-formed JSON object (parseJson: strict, no duplicate keys) of trace events.
  for (const std::string* trace : {&measured, &predicted}) {
    nlohmann::json parsed;
    ASSERT_NO_THROW(parsed = parseJson(*trace, "trace")) << *trace;
    ASSERT_TRUE(parsed.is_object() && parsed.contains("traceEvents") && parsed["traceEvents"].is_array()) << *trace;
  }

  // The same tracks, named as megatrain-inspect names them.
  ASSERT_GE(plan.streams_size(), 4);
  for (const std::string& stream : plan.streams()) {
    const std::string track = "\"args\":{\"name\":\"" + stream + "\"}";
    EXPECT_EQ(count(measured, track), 1u) << stream;
    EXPECT_EQ(count(predicted, track), 1u) << stream;
  }
  EXPECT_NE(measured.find("megatrain run (measured)"), std::string::npos);
  EXPECT_NE(predicted.find("megatrain plan (predicted)"), std::string::npos);

  // One event per timed step, at its measured time, with its predicted times;
  // the untimed records and waits are left out.
  size_t timed = 0;
  for (int s = 0; s < plan.steps_size(); ++s) {
    const StepSpan& span = spans[static_cast<size_t>(s)];
    const std::string key = "\"args\":{\"step\":" + std::to_string(s) + ",";
    if (!std::isfinite(span.start)) {
      EXPECT_EQ(count(measured, key), 0u) << "step " << s;
      continue;
    }
    ++timed;
    ASSERT_EQ(count(measured, key), 1u) << "step " << s;
    const size_t at = measured.rfind("{\"name\":", measured.find(key));
    const std::string event = measured.substr(at, measured.find('\n', at) - at);
    char ts[64], dur[64], pstart[64], pend[64];
    std::snprintf(ts, sizeof ts, "\"ts\":%.3f", span.start * 1e6);
    std::snprintf(dur, sizeof dur, "\"dur\":%.3f", (span.end - span.start) * 1e6);
    std::snprintf(pstart, sizeof pstart, "\"predicted_start_us\":%.3f", s * 1e3);
    std::snprintf(pend, sizeof pend, "\"predicted_end_us\":%.3f", (s + 1) * 1e3);
    for (const char* field : {ts, dur, pstart, pend}) EXPECT_NE(event.find(field), std::string::npos) << event << " lacks " << field;
    // The linear plan's labels need no escaping.
    EXPECT_NE(event.find("{\"name\":\"" + names[static_cast<size_t>(s)] + "\""), std::string::npos) << event;
  }
  EXPECT_GT(timed, 4u);
  EXPECT_EQ(count(predicted, "\"predicted_start_us\""), 0u);
}

TEST(TraceWriter, SummaryComparesMeasuredAndPredicted) {
  const plan::Plan plan = predictedPlan();
  const std::vector<StepSpan> spans = measuredSpans(plan);
  const tools::TraceSummary summary = tools::summarizeTrace(plan, spans, tools::traceStepNames(plan));
  double last = 0, kernels = 0, copies = 0, hostTasks = 0;
  for (const StepSpan& span : spans) last = std::isfinite(span.end) ? std::max(last, span.end) : last;
  for (const plan::Step& step : plan.steps()) {
    kernels += step.has_kernel();
    copies += step.has_copy();
    hostTasks += step.has_host_task();
  }
  EXPECT_DOUBLE_EQ(summary.measuredStepS, last);
  EXPECT_DOUBLE_EQ(summary.predictedStepS, plan.steps_size() * 1e-3);
  double measuredBusy = 0, predictedBusy = 0;
  for (const tools::TraceSummary::Stream& stream : summary.streams) {
    measuredBusy += stream.measuredBusyS;
    predictedBusy += stream.predictedBusyS;
  }
  EXPECT_NEAR(measuredBusy, kernels * 2e-3 + (copies + hostTasks) * 0.5e-3, 1e-12);
  EXPECT_NEAR(predictedBusy, (kernels + copies + hostTasks) * 1e-3, 1e-12);
  // Kernels run 1 ms over their prediction, the rest 0.5 ms under: the five worst are kernels.
  ASSERT_EQ(summary.slowest.size(), std::min<size_t>(5, static_cast<size_t>(kernels)));
  for (const tools::TraceSummary::Step& step : summary.slowest) {
    EXPECT_TRUE(plan.steps(static_cast<int>(step.index)).has_kernel()) << step.name;
    EXPECT_NEAR(step.measuredS - step.predictedS, 1e-3, 1e-12);
  }
  const std::string text = tools::formatTraceSummary(summary);
  for (const std::string& stream : plan.streams()) EXPECT_NE(text.find("  busy    " + stream + ": "), std::string::npos);
}

// A window of three steps on one clock (megatrain-run --trace-steps 3): step w's spans are
// the one-step spans shifted by w x 10 ms, its host tasks by 3 ms more (they run on into
// the next step). Each plan step then has three events, `train_step` w in args and its
// prediction shifted by w predicted steps; the summary's step is the mean start-to-start
// time, its busy times a step's mean, and it says how far the host tasks ran into the next.
TEST(TraceWriter, AWindowOfStepsOnOneClock) {
  const plan::Plan plan = predictedPlan();
  const std::vector<StepSpan> one = measuredSpans(plan);
  const size_t steps = one.size();
  std::vector<StepSpan> spans;
  for (int w = 0; w < 3; ++w)
    for (size_t s = 0; s < steps; ++s) {
      const double shift = w * 10e-3 + (plan.steps(static_cast<int>(s)).stream() == "host" ? 3e-3 : 0);
      spans.push_back({one[s].start + shift, one[s].end + shift});
    }
  const std::vector<std::string> names = tools::traceStepNames(plan);
  const std::string trace = tools::chromeTrace(plan, names, nullptr, &spans);
  nlohmann::json parsed;
  ASSERT_NO_THROW(parsed = parseJson(trace, "trace")) << trace;
  size_t timed = 0;
  for (const StepSpan& span : one) timed += std::isfinite(span.start) ? 1 : 0;
  EXPECT_EQ(count(trace, "\"predicted_start_us\""), 3 * timed);
  for (int w = 0; w < 3; ++w) EXPECT_EQ(count(trace, "\"train_step\":" + std::to_string(w) + "}"), timed) << w;
  // The first kernel's third event: 20 ms later than its first, and so is its prediction.
  int kernel = 0;
  while (!plan.steps(kernel).has_kernel()) ++kernel;
  const std::string key = "\"args\":{\"step\":" + std::to_string(kernel) + ",";
  size_t at = trace.find(key);
  for (int w = 1; w < 3; ++w) at = trace.find(key, at + 1);
  ASSERT_NE(at, std::string::npos);
  const std::string event = trace.substr(trace.rfind("{\"name\":", at), trace.find('\n', at) - trace.rfind("{\"name\":", at));
  char ts[64], pstart[64];
  std::snprintf(ts, sizeof ts, "\"ts\":%.3f", (one[static_cast<size_t>(kernel)].start + 20e-3) * 1e6);
  std::snprintf(pstart, sizeof pstart, "\"predicted_start_us\":%.3f", (kernel + 2.0 * plan.steps_size()) * 1e3);
  EXPECT_NE(event.find(ts), std::string::npos) << event << " lacks " << ts;
  EXPECT_NE(event.find(pstart), std::string::npos) << event << " lacks " << pstart;

  const tools::TraceSummary summary = tools::summarizeTrace(plan, spans, names);
  const tools::TraceSummary single = tools::summarizeTrace(plan, one, names);
  ASSERT_EQ(summary.window.size(), 3u);
  EXPECT_TRUE(single.window.empty());
  EXPECT_NEAR(summary.measuredStepS, 10e-3, 1e-12);
  for (size_t k = 0; k < summary.streams.size(); ++k) {
    EXPECT_NEAR(summary.streams[k].measuredBusyS, single.streams[k].measuredBusyS, 1e-12) << summary.streams[k].name;
    EXPECT_NEAR(summary.streams[k].predictedBusyS, single.streams[k].predictedBusyS, 1e-12);
  }
  double hostEnd = 0, deviceEnd = 0, start = 1;
  for (size_t s = 0; s < steps; ++s) {
    if (!std::isfinite(one[s].end)) continue;
    start = std::min(start, one[s].start);
    (plan.steps(static_cast<int>(s)).stream() == "host" ? hostEnd : deviceEnd) =
        std::max(plan.steps(static_cast<int>(s)).stream() == "host" ? hostEnd : deviceEnd, one[s].end);
  }
  for (int w = 0; w < 3; ++w) {
    EXPECT_NEAR(summary.window[w].deviceEndS, deviceEnd + w * 10e-3, 1e-12);
    EXPECT_NEAR(summary.window[w].hostEndS, hostEnd + 3e-3 + w * 10e-3, 1e-12);
  }
  const std::string text = tools::formatTraceSummary(summary);
  EXPECT_NE(text.find("trace     3 steps on one clock, 10.000 ms from one step's start to the next's"), std::string::npos)
      << text;
  char into[64];
  std::snprintf(into, sizeof into, "(%.3f ms into the next step)", (hostEnd + 3e-3 - 10e-3 - start) * 1e3);
  EXPECT_EQ(count(text, into), 2u) << text << " lacks " << into;
  EXPECT_NE(text.find("(a step's mean)"), std::string::npos);
}

TEST(TraceWriter, MedianStepTimeLeavesOutTheFirstStep) {
  EXPECT_EQ(tools::medianStepTime({}), 0);
  EXPECT_EQ(tools::medianStepTime({5.0}), 5.0);
  EXPECT_EQ(tools::medianStepTime({9.0, 1.0, 3.0, 2.0}), 2.0);
  EXPECT_EQ(tools::medianStepTime({9.0, 4.0, 1.0}), 2.5);
}

}  // namespace
}  // namespace megatrain::runtime::testing
