// DeviceAdamW.h - the device-resident parameter's update and gradient accumulation (adamw.cu).
//
// A plan whose parameter lives on the device (docs/tiering.md, "State homes")
// has ADAMW and ACCUMULATE steps on device tensors; the CUDA backend runs
// them with these launchers, on the step's stream, and they give the host
// AdamW's and the host accumulation's bits (runtime/host/AdamW.cpp,
// Accumulate.cpp are their CPU twins).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "megatrain/plan/plan.pb.h"

namespace megatrain::runtime::cuda {

// One fused pass over `count` elements: m, v and the master updated in
// place, and the bf16 compute copy (when `bf16Copy` is not null, f32 only)
// rewritten from the new master. f32 or f64; throws on another dtype or t < 1.
void launchAdamW(plan::DType dtype, void* param, const void* grad, void* m, void* v, size_t count,
                 const plan::AdamW& hyper, int64_t t, uint16_t* bf16Copy, cudaStream_t stream);

// A step graph's replay (docs/runtime.md, "Step graphs"): sets the update
// constants of `node`, a kernel node that a launchAdamW of `dtype` made while
// its stream was captured, to those of `hyper` and t in the instantiated
// graph `exec`; the other arguments stay as launched. Throws if the node is
// not that update kernel.
void setAdamWNodeStep(cudaGraphExec_t exec, cudaGraphNode_t node, plan::DType dtype, const plan::AdamW& hyper,
                      int64_t t);

// acc[i] += addend[i] in the dtype (f32 or f64), each sum rounded once.
void launchAccumulate(plan::DType dtype, void* acc, const void* addend, size_t count, cudaStream_t stream);

}  // namespace megatrain::runtime::cuda
