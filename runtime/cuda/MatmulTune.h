// MatmulTune.h - device helpers for choosing among cuBLASLt's algorithms at prepare time (matmul.cpp, docs/cuda.md "Matmul algorithms").
//
// MatmulPlanner times the algorithms cuBLASLt's heuristic offers for a product
// on operands of that product's sizes filled here with random values, and
// keeps one only if it writes the same bits as the heuristic's first choice
// (countDifferentWords), so which algorithm a run picks never changes what it
// computes.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace megatrain::runtime::cuda {

// Fills `elements` values at `data` with uniform values in [-1, 1) drawn from
// a hash of (seed, index): bf16 when `bf16`, else f32. Asynchronous on `stream`.
void fillTuningOperand(void* data, int64_t elements, bool bf16, uint64_t seed, cudaStream_t stream);

// How many of the `words` 32-bit words at a and b differ; `counter` is one
// device int64 the call zeroes and counts into. Synchronizes `stream`.
int64_t countDifferentWords(const uint32_t* a, const uint32_t* b, int64_t words, unsigned long long* counter,
                            cudaStream_t stream);

}  // namespace megatrain::runtime::cuda
