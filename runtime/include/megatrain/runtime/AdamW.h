// AdamW.h - the host optimizer update (torch.optim.AdamW semantics, docs/ops.md).
#pragma once

#include <cstddef>
#include <cstdint>

#include "megatrain/plan/plan.pb.h"

namespace megatrain::runtime {

// One AdamW step over `count` elements of dtype F32 or F64, in place on param,
// m and v; t is the 1-based optimizer step. Each element is computed in double
// and stored back in the tensor dtype; m and v are rounded to that dtype
// before the parameter update reads them, so the stored state is the state.
// Error on another dtype or t < 1.
//
// bf16Copy, when given (F32 only), receives the updated parameter rounded to
// bfloat16 (floatToBf16, DType.h): the compute-precision copy that the device
// fetches under --precision bf16, written in the same pass over the data.
void adamwUpdate(plan::DType dtype, void* param, const void* grad, void* m, void* v,
                 size_t count, const plan::AdamW& hyper, int64_t t, uint16_t* bf16Copy = nullptr);

}  // namespace megatrain::runtime
