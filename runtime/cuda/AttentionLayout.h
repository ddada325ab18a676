// AttentionLayout.h - attention steps with [B, S, H, D] operands on the paths that read [B, H, S, D] only.
//
// The `bshd` attribute of attention and attention_grad (ShapeRules.h's
// AttentionRole bits) lays chosen operands out as [B, S, H, D]. cuDNN reads
// and writes those strides directly (CudnnAttention.cpp); the GEMM path
// (attention_gemm.cu) and the warp kernels (attention.cu) run on [B, H, S, D]
// copies instead: each such input is transposed into the step's scratch, the
// path runs on the copies with the rest of the scratch, and each such output
// is transposed back. Correct, not fast: these paths serve f32 (fp32, tf32)
// and f64 steps.
#pragma once

#include <cstddef>

#include "CudaKernel.h"

namespace megatrain::runtime::cuda {

// `launch` as the [B, H, S, D] paths see it: the `bshd` operands' shapes with
// dims 1 and 2 swapped and the attribute dropped (data pointers unchanged).
Launch headMajorView(const Launch& launch);

// Scratch bytes of the [B, H, S, D] copies of the `bshd` operands (0 when none).
size_t headMajorCopyBytes(const Launch& launch);

// Runs `run` on the head-major copies in the front of the scratch (the rest
// of it handed on as the inner launch's scratch), then writes the outputs
// back in their layouts.
void runHeadMajor(const Launch& launch, void (*run)(const Launch&));

}  // namespace megatrain::runtime::cuda
