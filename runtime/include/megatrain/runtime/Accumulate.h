// Accumulate.h - the host ACCUMULATE task (micro-batch gradients, docs/runtime.md).
#pragma once

#include <cstddef>

#include "megatrain/plan/plan.pb.h"

namespace megatrain::runtime {

// acc[i] += addend[i] for i = 0 .. count-1 in index order, in the tensor
// dtype (F32 or F64; an F32 sum is rounded to f32 at every element, never
// carried in double), so every backend that runs it on the host gives the
// same bits. Error on another dtype.
void accumulate(plan::DType dtype, void* acc, const void* addend, size_t count);

}  // namespace megatrain::runtime
