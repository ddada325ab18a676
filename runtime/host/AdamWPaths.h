// AdamWPaths.h - internal: the host AdamW's instruction-set paths and chunking, for tests and benchmarks.
//
// adamwUpdate (megatrain/runtime/AdamW.h) is the entry point; it picks the best
// path this CPU supports and the default chunking. These let a test force each
// path and chunk count; every combination gives bitwise the same result (f32
// in f32 arithmetic, f64 in double; see AdamW.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "megatrain/plan/plan.pb.h"

namespace megatrain::runtime {

enum class AdamWIsa { kScalar, kAvx2, kAvx512 };

// "scalar", "avx2", "avx512".
const char* adamwIsaName(AdamWIsa isa);
// Whether this CPU runs `isa` (scalar: always).
bool adamwIsaSupported(AdamWIsa isa);
// The path adamwUpdate takes: AVX-512F, else AVX2, else scalar.
AdamWIsa adamwBestIsa();
// The number of chunks adamwUpdate splits `count` elements into: 1 below
// kAdamWParallelMin elements, else up to kAdamWChunksPerThread *
// hostThreadCount(), each at least kAdamWParallelMin / 2 elements. Several
// chunks per thread, claimed dynamically, keep every thread busy to the end
// when one of them runs slower (another process on its core).
constexpr size_t kAdamWParallelMin = size_t(64) << 10;
constexpr unsigned kAdamWChunksPerThread = 4;
unsigned adamwDefaultChunks(size_t count);
// How far ahead of the current element the vector paths prefetch each input
// stream (see AdamW.cpp).
constexpr size_t kAdamWPrefetchBytes = 2048;

// adamwUpdate with the path and chunk count given: `count` split into `chunks`
// contiguous pieces whose boundaries are multiples of 16 elements (a 64-byte
// cache line of f32), run on the host thread pool (hostParallelFor). Error on
// an unsupported isa, chunks == 0, another dtype or t < 1.
void adamwUpdateWith(AdamWIsa isa, unsigned chunks, plan::DType dtype, void* param, const void* grad,
                     void* m, void* v, size_t count, const plan::AdamW& hyper, int64_t t,
                     uint16_t* bf16Copy = nullptr);

}  // namespace megatrain::runtime
