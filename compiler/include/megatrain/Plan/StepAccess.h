//===- StepAccess.h - what a plan step reads and writes ---------------------===//
//
// The tensors each step of a plan reads and writes, and the tensors whose
// bytes overlap in a pool: what insertEvents orders the streams by
// (docs/tiering.md, "Streams and events"), and what the host update order
// (HostOrder.h) checks a move against.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_PLAN_STEPACCESS_H
#define MEGATRAIN_PLAN_STEPACCESS_H

#include "megatrain/plan/plan.pb.h"

#include <cstdint>
#include <vector>

namespace megatrain {

struct StepAccess {
  std::vector<uint32_t> reads, writes;
};

/// A kernel reads its inputs and writes its outputs; a copy reads src and
/// writes dst; ADAMW (param, grad, m, v[, compute copy]) reads the first
/// four and writes param, m, v and the copy; READ_LOSS reads its tensor;
/// ACCUMULATE (acc, addend) reads both and writes acc; a host task of
/// another shape reads and writes all of its tensors. Records and waits
/// touch nothing.
StepAccess accessOf(const plan::Step &step);

/// For every tensor, itself and the tensors whose bytes overlap it in the
/// same pool.
std::vector<std::vector<uint32_t>> overlappingTensors(const plan::Plan &plan);

} // namespace megatrain

#endif // MEGATRAIN_PLAN_STEPACCESS_H
