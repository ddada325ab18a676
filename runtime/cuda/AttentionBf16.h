// AttentionBf16.h - attention steps with bf16 operands on the paths that compute on f32 only.
//
// Under --precision bf16 attention and attention_grad take q, k, v, y, dy
// and give y, dq, dk, dv in bf16, lse in f32 (ShapeRules.h). cuDNN reads and
// writes those directly (CudnnAttention.cpp); the GEMM path
// (attention_gemm.cu), the warp kernels (attention.cu) and the head-major
// copies around them (AttentionLayout.h) take f32 operands. For a step
// cuDNN does not take (a shape it declines, MEGATRAIN_ATTENTION=gemm), each
// bf16 input is widened into an f32 copy in the front of the step's scratch
// (exact), the f32 path runs on the copies with the rest of the scratch, and
// each f32 result is rounded into its bf16 output with cast's conversion
// (nearest even): the step's bf16 results are bit for bit the cast of what
// the f32 path writes for the widened operands. lse is f32 on both sides
// and is read or written in place. Correct, not fast: a fallback.
#pragma once

#include <cstddef>

#include "CudaKernel.h"

namespace megatrain::runtime::cuda {

// `launch` as the f32 paths see it: every bf16 operand's dtype F32 (data
// pointers and shapes unchanged).
Launch widenedView(const Launch& launch);

// Scratch bytes of the f32 copies of the bf16 operands (0 when none).
size_t widenedCopyBytes(const Launch& launch);

// Runs `run` on f32 copies of the bf16 operands in the front of the scratch
// (the rest of it handed on as the inner launch's scratch), then rounds the
// f32 results into the bf16 outputs.
void runWidened(const Launch& launch, void (*run)(const Launch&));

}  // namespace megatrain::runtime::cuda
