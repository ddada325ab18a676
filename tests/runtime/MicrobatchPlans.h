// MicrobatchPlans.h - hand-built plans with micro-batch gradient parts (ACCUMULATE), for the
// runtime tests and the CUDA backend's tests.
#pragma once

#include "megatrain/plan/plan.pb.h"

namespace megatrain::runtime::testing {

// A plan shaped like an N = 3 micro-batch step for one parameter W: the loss
// of x W, then three gradient parts (here the inputs g0, g1, g2) go to the
// host as the compiler emits them: g0 into grad:W, g1 and g2 each into the
// one staging tensor grad_part:W followed by ACCUMULATE (grad:W, grad_part:W),
// then ADAMW. `warWait` = false drops the event that holds the copy of g2
// until the first ACCUMULATE has read grad_part:W.
plan::Plan accumulatePlan(plan::DType dtype, bool warWait = true);

}  // namespace megatrain::runtime::testing
