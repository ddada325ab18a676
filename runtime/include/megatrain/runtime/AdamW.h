// AdamW.h - the host optimizer update (torch.optim.AdamW semantics, docs/ops.md).
#pragma once

#include <cstddef>
#include <cstdint>

#include "megatrain/plan/plan.pb.h"

namespace megatrain::runtime {

// One AdamW step over `count` elements of dtype F32 or F64, in place on param,
// m and v; t is the 1-based optimizer step. F32 elements are computed in f32
// (as torch's fused CPU AdamW does for f32 parameters; per-call constants in
// double, rounded to f32 once), F64 elements in double; the stored m and v are
// the ones the parameter update reads (docs/runtime.md, "Host AdamW").
// Error on another dtype or t < 1.
//
// bf16Copy, when given (F32 only), receives the updated parameter rounded to
// bfloat16 (floatToBf16, DType.h): the compute-precision copy that the device
// fetches under --precision bf16, written in the same pass over the data.
void adamwUpdate(plan::DType dtype, void* param, const void* grad, void* m, void* v,
                 size_t count, const plan::AdamW& hyper, int64_t t, uint16_t* bf16Copy = nullptr);

}  // namespace megatrain::runtime
