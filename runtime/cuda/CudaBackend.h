// CudaBackend.h - the CUDA backend's factory: one device arena, pinned host pools, kernels on one stream.
#pragma once

#include <memory>

#include "megatrain/runtime/Backend.h"

namespace megatrain::runtime {

// A backend on CUDA device `device` (0 unless several GPUs are present).
//
// prepare() makes one cudaMalloc per DEVICE pool and one cudaHostAlloc per
// HOST_PINNED pool (both filled with 0xFF bytes, NaN as any float, so that a
// read before the first write shows up), plus the kernels' shared scratch and
// cuBLAS's workspace; nothing is allocated after that. Kernels, copies and
// poisoning run on one compute stream in plan order: the plan has no events
// between streams yet, so this is correct by construction (events are real
// cudaEvents on the stream each plan stream maps to, today all the compute
// stream). AdamW runs on the host over the pinned pools after the stream
// drains (runtime/cpu/adamw.cpp's adamwUpdate). A kernel that meets bad data
// (an index or label out of range) flags it on the device; the next
// synchronize(), read() or AdamW reports it as an Error naming the step.
// Every CUDA and cuBLAS call is checked; failures are Errors with file and line.
// MEGATRAIN_CUDA_SYNC=1 in the environment synchronizes after every kernel,
// so that an asynchronous fault is reported at the step that caused it.
std::unique_ptr<Backend> makeCudaBackend(int device = 0);

}  // namespace megatrain::runtime
