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

// The per-call constants of the update, as adamwUpdate computes them (in
// double, the f32 ones rounded once), for a device twin that must give its
// bits (runtime/cuda/adamw.cu). Per element, f32:
//   m' = beta1 * m + oneMinusBeta1 * g;  v' = beta2 * v + (oneMinusBeta2 * g) * g
//   p' = p * decay - (stepSize * m') / (sqrt(v') * invSqrtCorrection2 + eps)
// f64: m', v' as above in double; p1 = p - lrWeightDecay * p;
//   p' = p1 - (lr * (m' / correction1)) / (sqrt(v' / correction2) + eps)
struct AdamWConstantsF32 {
  float beta1, oneMinusBeta1, beta2, oneMinusBeta2, decay, stepSize, invSqrtCorrection2, eps;
};
struct AdamWConstantsF64 {
  double lr, beta1, beta2, eps, oneMinusBeta1, oneMinusBeta2, lrWeightDecay, correction1, correction2;
};
// Throws on t < 1, as adamwUpdate does.
AdamWConstantsF32 adamwConstantsF32(const plan::AdamW& hyper, int64_t t);
AdamWConstantsF64 adamwConstantsF64(const plan::AdamW& hyper, int64_t t);

}  // namespace megatrain::runtime
