//===- Simulate.h - predict a plan's step times on a device profile -------===//
//
// The plan simulator: replays a plan's steps on the cost model
// (megatrain/plan/OpCost.h) with the stream and event semantics of
// docs/tiering.md and writes its predictions into the plan. docs/tiering.md
// ("Predictions and inspection") describes what each number means.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_PLAN_SIMULATE_H
#define MEGATRAIN_PLAN_SIMULATE_H

#include "megatrain/plan/DeviceProfile.h"
#include "megatrain/plan/plan.pb.h"

#include <string>

namespace megatrain {

/// Replays `plan` on `profile` and writes: every Step's predicted_start_s and
/// predicted_end_s; the header's predicted_step_s, predicted_breakdown,
/// h2d_bytes, d2h_bytes, predicted_peak (one entry per pool, replacing any
/// already there) and device_profile; format_minor becomes at least
/// kPlanMinorTiering (FormatVersion.h). Costs:
///  - kernel: estimateKernel on the plan tensors' shapes and dtypes and the
///    kernel's integer attributes, at the rate its `precision` attribute
///    names (tf32, bf16: matmul and attention steps of mt-precision), else at
///    `precision`;
///  - copy: transferSeconds over h2d or d2h by the tiers of the two pools; a
///    copy within one tier moves its bytes over the HBM (device) or host
///    memory rate;
///  - host task: ADAMW hostAdamWSeconds(parameter elements), ACCUMULATE
///    hostAccumulateSeconds(elements), READ_LOSS nothing;
///  - record / wait: nothing; a wait holds its stream until the latest
///    earlier record of its event was reached.
/// The step time is the period of steps that repeat where the host tasks
/// after the READ_LOSS run on beside the next step (not with a disk pool):
/// docs/tiering.md, "Predictions and inspection".
/// Each stream runs its steps in plan order. A plan without any record or
/// wait step (what the emitter writes before events are inserted) is
/// simulated with the dependencies the event pass would add: a step waits
/// for the writers of what it reads, and a write waits for the last readers
/// and writers of every tensor whose bytes it overlaps.
/// Expects a validated plan (ids in range).
void simulatePlan(plan::Plan &plan, const DeviceProfile &profile,
                  Precision precision = Precision::FP32);

/// How slow a host the plan's prediction holds for: the slowest host AdamW
/// rate (parameters per second) at which the predicted step stays within
/// `tolerance` (a fraction) of its step on `profile`, found by simulating the
/// plan again at rates between the profile's and a 64th of it, to within 1%
/// of the rate. 0 when the plan updates nothing in host memory (no rate moves
/// it); a 64th of the profile's rate when even that keeps the step. `plan` is
/// left as it was.
double hostRateFloor(const plan::Plan &plan, const DeviceProfile &profile,
                     Precision precision = Precision::FP32, double tolerance = 0.01);

/// The summaries' `host rate` line (megatrain-compile, megatrain-inspect):
/// hostRateFloor at 1% on the profile the plan's header records (the one its
/// predictions were made with), as "the step stays within 1% of its prediction
/// down to a host AdamW of 3.50 G params/s (the profile's 4.42)", the floor
/// rounded up to 0.01 G/s (the step holds at the figure shown), with "; the
/// host's updates bound the step" inside the parentheses where the floor is
/// within 3% of the profile's rate. Empty without a recorded profile or
/// where nothing is updated in host memory.
std::string describeHostRateFloor(const plan::Plan &plan);

} // namespace megatrain

#endif // MEGATRAIN_PLAN_SIMULATE_H
