//===- Events.h - order the streams of a plan with record/wait events ------===//
#ifndef MEGATRAIN_PLAN_EVENTS_H
#define MEGATRAIN_PLAN_EVENTS_H

#include "megatrain/plan/plan.pb.h"

#include <cstddef>

namespace megatrain {

/// Adds the `record` and `wait` steps that make the plan's streams run its
/// steps as plan order says they depend on each other (docs/tiering.md,
/// "Streams and events"). For every dependency between two steps on
/// different streams -- read after write, write after read, write after write,
/// on tensors and on tensors whose bytes overlap in a pool -- it records an
/// event right after the earlier step on its stream and waits for it right
/// before the later step on its stream, unless the dependency is already
/// implied (same stream, or ordered through events already present or
/// inserted). New events are named `e0`, `e1`, ... (skipping names the plan
/// already uses). Steps are renumbered and every tensor's last_use_step is
/// moved to the new index of the same step. Returns the number of records
/// added (each may be waited for by several steps).
std::size_t insertEvents(plan::Plan &plan);

} // namespace megatrain

#endif // MEGATRAIN_PLAN_EVENTS_H
