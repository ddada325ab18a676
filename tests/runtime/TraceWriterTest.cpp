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

TEST(TraceWriter, MedianStepTimeLeavesOutTheFirstStep) {
  EXPECT_EQ(tools::medianStepTime({}), 0);
  EXPECT_EQ(tools::medianStepTime({5.0}), 5.0);
  EXPECT_EQ(tools::medianStepTime({9.0, 1.0, 3.0, 2.0}), 2.0);
  EXPECT_EQ(tools::medianStepTime({9.0, 4.0, 1.0}), 2.5);
}

}  // namespace
}  // namespace megatrain::runtime::testing
