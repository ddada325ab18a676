// MatmulTune.h - device helpers for choosing among cuBLASLt's algorithms at prepare time (matmul.cpp, docs/cuda.md "Matmul algorithms").
//
// MatmulPlanner times the algorithms cuBLASLt's heuristic offers for a product
// on operands of that product's sizes filled here with random values, and
// keeps one only if it writes the same bits as the heuristic's first choice
// (countDifferentWords), so which algorithm a run picks never changes what it
// computes; a bf16 result's candidates must write the bits of the f32
// product's cast, on random operands (and the residual of their sums past
// that cast: splitF32ToBf16) and on operands with special values
// (plantSpecialBf16).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace megatrain::runtime::cuda {

// Fills `elements` values at `data` with uniform values in [-1, 1) drawn from
// a hash of (seed, index): bf16 when `bf16`, else f32. Asynchronous on `stream`.
void fillTuningOperand(void* data, int64_t elements, bool bf16, uint64_t seed, cudaStream_t stream);

// Splits each f32 value w at `wide` into hi, w rounded to bf16 (stored
// negated at `negHi`), and w - hi rounded to bf16 (at `residual`). A bf16-D
// product run with C = -hi and beta 1 writes its own sum's residual: where
// two sums differ in their last f32 bits, their residuals differ in about
// one element in 100 rather than one in 10^4 or 10^5 of their bf16 results.
// Asynchronous on `stream`.
void splitF32ToBf16(const float* wide, void* negHi, void* residual, int64_t elements, cudaStream_t stream);

// Overwrites some of the `elements` bf16 values at `data` with values the
// random fill never gives: +inf, -inf and a NaN at indices 0, 1, 2, 2^127 at
// every index 5 mod 61 (sums past f32's and bf16's range, and infinities of
// both signs meeting: NaN), bf16's largest finite at every index 11 mod 71.
// What a bf16 result's algorithm is also compared on, so that its rounding
// of those is shown to be cast's. Asynchronous on `stream`.
void plantSpecialBf16(void* data, int64_t elements, cudaStream_t stream);

// How many of the `words` 32-bit words at a and b differ; `counter` is one
// device int64 the call zeroes and counts into. Synchronizes `stream`.
int64_t countDifferentWords(const uint32_t* a, const uint32_t* b, int64_t words, unsigned long long* counter,
                            cudaStream_t stream);

}  // namespace megatrain::runtime::cuda
