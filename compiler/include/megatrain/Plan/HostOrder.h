//===- HostOrder.h - the order of the host updates that run on into the next step ===//
//
// The host AdamW updates after a plan's READ_LOSS run on beside the next step
// (docs/runtime.md, "Host updates across steps"), each until that step first
// touches its parameter's bytes. The backward hands them their gradients from
// the last layer to the first, and the next step's forward wants them back from
// the first layer to the last: in the order the gradients come, the host works
// on the last layers while the forward waits for the first ones.
// orderHostUpdates reorders those host tasks, earliest deadline first among
// those whose inputs are there (docs/tiering.md, "The host update order").
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_PLAN_HOSTORDER_H
#define MEGATRAIN_PLAN_HOSTORDER_H

#include "megatrain/plan/DeviceProfile.h"
#include "megatrain/plan/plan.pb.h"

#include <cstddef>
#include <string>

namespace megatrain {

struct HostOrderResult {
  /// Whether the plan's host tasks were reordered.
  bool applied = false;
  /// Host tasks after the READ_LOSS, and how many of them changed place in
  /// the host stream's order.
  std::size_t tasks = 0, moved = 0;
  /// The plan simulator's step (seconds) in plan order and in the order found.
  double before = 0, after = 0;
  /// Why the order was kept, when it was.
  std::string why;
};

/// Reorders the host tasks (ADAMW, ACCUMULATE) after the host stream's
/// READ_LOSS in `plan`, which must not have events yet (emitPlan calls it
/// right before insertEvents). The plan simulator (Simulate.h) on `profile`
/// times the plan as it is; from those times each task gets a release (the
/// end of the last step on another stream that writes what it reads), a
/// duration and a deadline (the start of the first step on another stream
/// that touches its bytes: in the next step where it comes before the task
/// in plan order, else in this one), and the host's list schedule takes, each
/// time it is free, the released task with the earliest deadline (a task after
/// the host tasks it depends on). The tasks move later in plan order to run
/// in that order, each past no step that touches its bytes; the tensors'
/// last_use_step follow. The new order is kept only where the simulator
/// predicts a shorter step with it. A task moves no bytes and computes the
/// same operations: the plan trains to the same bits.
HostOrderResult orderHostUpdates(plan::Plan &plan, const DeviceProfile &profile);

} // namespace megatrain

#endif // MEGATRAIN_PLAN_HOSTORDER_H
