// PlanTimeline.h - a plan's predicted schedule in time: what each step reads and writes,
// when each tensor is live, and the bytes live in each pool over time.
//
// Shared by the compiler's plan simulator (plan/lib/Simulate.cpp), which fills
// Step.predicted_start_s / predicted_end_s and then takes the pool peaks from here, and by
// megatrain-inspect, which draws the same curve: one definition of "live" for both.
#pragma once

#include <cstdint>
#include <vector>

#include "megatrain/plan/plan.pb.h"

namespace megatrain {

// The tensor ids a step reads and writes. Kernel: inputs / outputs. Copy: src / dst.
// Host task ADAMW: reads param, grad, m, v and writes param, m, v; ACCUMULATE: reads
// accumulator and addend, writes the accumulator; READ_LOSS: reads the readout. Events
// touch no tensor.
void stepReadsWrites(const plan::Step& step, std::vector<uint32_t>& reads,
                     std::vector<uint32_t>& writes);

// Tensors whose contents persist across training steps or are never freed: PARAMETER,
// GRADIENT, OPTIMIZER_STATE, CONSTANT and the readouts. They are live the whole step.
bool isPersistentRole(plan::Role role);

// One stretch of time in which a tensor holds a value someone still needs.
struct LiveInterval {
  uint32_t tensor = 0;
  double start = 0;
  double end = 0;
};

// Live intervals from the predicted step times: a value is live from the start of the
// step that writes it to the end of its last reader before the next write of the tensor
// (a step that reads and writes a tensor extends its value). A tensor read before any
// step writes it (INPUT) is live from time 0; a persistent tensor is live over
// [0, step time]. Tensors no step touches (other than persistent ones) have no interval;
// a view (Tensor.alias_of) has none either: its reads extend its base's interval.
// Expects a validated plan; the step time is the latest predicted end.
std::vector<LiveInterval> liveIntervals(const plan::Plan& plan);

// Bytes live in one pool over predicted time, as a step function: `points[i].bytes` is
// live from `points[i].time` until the next point's time. Intervals are half-open
// [start, end): a value freed at t and one allocated at t do not overlap.
struct PoolTimeline {
  struct Point {
    double time = 0;
    uint64_t bytes = 0;
  };
  uint32_t pool = 0;
  std::vector<Point> points;
  uint64_t peakBytes = 0;
  double peakTime = 0;
};

// One timeline per pool of the plan, in plan.pools order.
std::vector<PoolTimeline> memoryTimelines(const plan::Plan& plan);

// The latest predicted end over all steps (0 for a plan without predictions).
double predictedEnd(const plan::Plan& plan);

}  // namespace megatrain
