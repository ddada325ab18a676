// InspectOutputs.h - megatrain-inspect's pictures of a plan's predicted schedule: device
// memory over time (SVG and a text plot) and the schedule as Chrome trace events.
#pragma once

#include <string>
#include <vector>

#include "megatrain/plan/PlanTimeline.h"
#include "megatrain/plan/plan.pb.h"
#include "megatrain/runtime/Backend.h"

namespace megatrain::runtime::tools {

// An SVG line chart of `memory` (live bytes over predicted time), axes labelled, with a
// dashed line at `budgetBytes` when it is not 0.
std::string memoryPlotSvg(const PoolTimeline& memory, double stepSeconds, uint64_t budgetBytes,
                          const std::string& title);

// The same as characters: `height` rows of `width` columns, each column the highest live
// bytes within its slice of time; y labels on the left, time below.
std::string memoryPlotText(const PoolTimeline& memory, double stepSeconds, uint64_t budgetBytes,
                           int width, int height);

// Chrome trace-event JSON ("traceEvents"): one thread per stream (named by thread_name
// metadata), a complete ("X") event per kernel, copy and host task and per wait that
// blocks, instant events for records, and a counter of device bytes. `names[i]` names
// step i; times are microseconds.
//
// With `measured` (one span per step, seconds from the step's start, NaN for
// a step not timed: megatrain-run --trace), the same tracks and names hold the
// measured schedule instead: an event per timed step at its measured time,
// with the plan's predicted start and end in args (predicted_start_us,
// predicted_end_us), so measured and predicted traces open side by side. A
// window of K training steps timed on one clock (K x steps spans, step w's
// plan step s at w * steps + s) gives each plan step K events, with
// `train_step` w in args and the prediction shifted by w predicted steps.
std::string chromeTrace(const plan::Plan& plan, const std::vector<std::string>& names,
                        const PoolTimeline* deviceMemory, const std::vector<StepSpan>* measured = nullptr);

}  // namespace megatrain::runtime::tools
