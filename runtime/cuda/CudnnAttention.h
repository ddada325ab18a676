// CudnnAttention.h - bf16 attention and attention_grad as cuDNN fused scaled-dot-product attention, graphs built once per shape at prepare time.
//
// A step of `attention` or `attention_grad` with the `precision` "bf16" runs
// as one cuDNN SDPA graph (the flash-attention algorithm: the S x S scores
// are never stored) instead of attention_gemm.cu's GEMMs through materialized
// scores. bf16 operands and results (the --precision bf16 form: every operand
// but lse bf16) are read and written in place; f32 ones are rounded to bf16
// copies in the step's scratch (cast.cu's conversion) and the bf16 results
// widened back into the f32 outputs, so both forms give the same bits for
// the same bf16 values. cuDNN computes with fp32 accumulation; lse is cuDNN's
// Stats, the fp32 natural-log logsumexp of each row's scaled, masked scores
// (what the CPU twin's lse means), read and written in place.
//
// CudaBackend::prepare() hands each such step to prepare() (through the
// attention kernels' scratch functions): it builds or finds the step's graph
// in a cache keyed by everything the graph depends on (forward or backward,
// the batch of one execution, heads, sequence lengths, head dim, causal,
// scale), and returns the scratch the step needs: its bf16 copies (none for
// bf16 operands) and the graph's workspace. A step whose scratch would not
// fit the attention workspace budget (attentionWorkspaceBudget(),
// AttentionGemm.h) runs as several executions over slices of the batch. At
// launch run() converts (f32 operands), executes and converts back on the
// compute stream: nothing is built, chosen or allocated in the training loop.
//
// MEGATRAIN_ATTENTION (read at every prepare) picks the path of bf16 steps:
//   auto (or unset)  cuDNN where it takes the step, else the GEMM path;
//   cudnn            cuDNN, and a step it declines is an Error saying why;
//   gemm             the GEMM path always (attention_gemm.cu).
// fp32 and tf32 steps always keep the exact GEMM path, F64 the warp kernels;
// a bf16-operand step off cuDNN runs the GEMM path on f32 copies (AttentionBf16.h).
// MEGATRAIN_ATTENTION_LOG=1 prints each bf16 step's path at prepare, and why
// cuDNN declined one (stderr).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>

#include "CudaKernel.h"

namespace megatrain::runtime::cuda {

enum class AttentionPath { Auto, Cudnn, Gemm };

// MEGATRAIN_ATTENTION as above; any other value is an Error naming it.
AttentionPath attentionPathSetting();

class CudnnAttention {
 public:
  // Whether this binary was built with cuDNN and the frontend headers
  // (third_party/CudnnFrontend.cmake); without them every step keeps the GEMM path.
  static bool built();

  // Launches go to `stream`; the cuDNN handle is made, and bound to it, when
  // the first step asks for cuDNN.
  explicit CudnnAttention(cudaStream_t stream);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Forgets the previous plan's steps; the graph cache stays.
  void beginPlan();
  // Plans an attention or attention_grad step (shape rule already checked).
  // Returns the scratch bytes the step needs on the cuDNN path, or 0 when it
  // keeps the GEMM path (another precision, MEGATRAIN_ATTENTION=gemm, or cuDNN
  // declined: an Error instead under MEGATRAIN_ATTENTION=cudnn). 0 may also
  // mean a step on the cuDNN path that needs no scratch (bf16 operands, a
  // graph without workspace): takes() tells the two apart.
  size_t prepare(const Launch& launch);
  // Whether prepare() put this step on the cuDNN path.
  bool takes(const Launch& launch) const;
  // Runs a step prepare() took, in launch.device->scratch.
  void run(const Launch& launch) const;
  // Why cuDNN declined the step ("" when it took it or was not asked).
  std::string declined(const Launch& launch) const;
  // Distinct graphs built (or declined) so far.
  size_t cachedGraphs() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace megatrain::runtime::cuda
