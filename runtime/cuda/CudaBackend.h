// CudaBackend.h - the CUDA backend's factory: device arena, pinned host pools, a CUDA stream per plan stream.
#pragma once

#include <cstdint>
#include <memory>

#include "megatrain/runtime/Backend.h"

namespace megatrain::runtime {

// Device memory the backend may use beyond the plan's device budget: the
// kernels' shared scratch (attention's GEMM path asks for at most 512 MiB of
// it), the cuBLAS workspace (32 MiB, f64 matmuls) and the cuBLASLt workspace
// (64 MiB) together. prepare() fails when they need more, or when the plan's
// device pools exceed its budget (Header.device_budget_bytes, when set).
constexpr uint64_t kCudaFixedWorkspaceBytes = uint64_t{1} << 30;

struct CudaOptions {
  // Poison each dead DEVICE tensor (0xFF bytes, a memset) after its last use,
  // on that use's stream. Off by default (a memset per tensor per step); also
  // on with MEGATRAIN_POISON=1 in the environment.
  bool poison = false;
  // Record the second training step's issue as a CUDA graph and replay it in
  // later steps (docs/runtime.md, "Step graphs"). Auto (the default) records
  // a plan whose steps are short on the device, where issuing them one by one
  // would leave the device waiting for the host: fewer than
  // kIssueBoundStepSeconds of predicted step time per plan step, or no
  // prediction. On records every plan, Off none. MEGATRAIN_CUDA_GRAPHS=0, 1
  // or auto in the environment overrides it (megatrain-run --step-graphs).
  enum class StepGraphs { Auto, On, Off };
  StepGraphs stepGraphs = StepGraphs::Auto;
  // End a training step issued call by call once every stream but the host's
  // is done and the loss is read, leaving the host tasks after the loss (the
  // AdamW of the parameters whose gradients come last) to run beside the next
  // step; each step of the next one that touches their bytes waits for them
  // (Backend::overlapsHostTasks, docs/runtime.md "Host updates across
  // steps"). Off with MEGATRAIN_CUDA_HOST_OVERLAP=0 (megatrain-run
  // --no-host-overlap). Never with a step graph, a disk tier, poisoning or
  // MEGATRAIN_CUDA_SYNC.
  bool overlapHostTasks = true;
};

// StepGraphs::Auto's bound: a plan predicted to take at least this much
// device time per plan step is issued call by call. A launch, copy or event
// costs the host a few microseconds, so the issue of such a plan runs ahead
// of the device, and a replay would only add the graph's launch (about 1.4
// us a node, before its first node runs) to the step: on the H200 the
// 1.36B's steps (136 to 233 us of device time a plan step) ran 0.3% to 2.6%
// faster issued; the demo's (a few us a step) 1.2x to 2.4x faster replayed
// (bench/RESULTS.md).
constexpr double kIssueBoundStepSeconds = 20e-6;

// StepGraphs::Auto's test: whether `plan` is predicted to take at least
// kIssueBoundStepSeconds of device time per plan step (then it is issued).
bool stepIssueKeepsUp(const plan::Plan& plan);

// A backend on CUDA device `device` (0 unless several GPUs are present).
//
// prepare() makes one cudaMalloc per DEVICE pool and one cudaHostAlloc per
// HOST_PINNED pool (both filled with 0xFF bytes, NaN as any float, so that a
// read before the first write shows up), plus the kernels' shared scratch and
// cuBLAS's workspace; nothing is allocated after that. Each plan stream runs
// on a CUDA stream of its own (non-blocking, made once): kernels on the
// compute stream, copies and poisoning on their step's stream, and the host
// tasks (AdamW, ACCUMULATE, READ_LOSS) enqueued on theirs with
// cudaLaunchHostFunc, so the plan's record/wait steps are cudaEventRecord /
// cudaStreamWaitEvent one for one and nothing on the host waits for the device
// within a training step. A host task that throws, or a kernel that meets bad
// data (an index or label out of range), is reported by the next
// synchronize(), read() or hostData() as an Error naming the step. Every CUDA
// and cuBLAS call is checked; failures are Errors with file and line.
// MEGATRAIN_CUDA_SYNC=1 in the environment runs every plan stream on one CUDA
// stream and synchronizes after every kernel, copy and host task, so that an
// asynchronous fault is reported at the step that caused it.
std::unique_ptr<Backend> makeCudaBackend(int device = 0);
std::unique_ptr<Backend> makeCudaBackend(int device, const CudaOptions& options);

// How many CUDA devices the driver reports; 0 when there is no driver or no
// device (never an error: `--backend auto` asks it to choose).
int cudaDeviceCount();

}  // namespace megatrain::runtime
