// MatmulPlanner.h - cuBLASLt for the f32 and bf16 matmuls: one workspace, algorithms chosen (and timed) once per distinct product at prepare time.
//
// CudaBackend::prepare() hands every resolved kernel step to prepare(); for a
// `matmul`, `matmul_add` (the addend is cuBLASLt's C, with beta 1, or its
// bias), `matmul_bias_gelu` (the GELU_AUX_BIAS epilogue, or the bias form
// and gelu's kernel where cuBLASLt takes no GELU form) or `matmul_gelu_grad`
// (the DGELU epilogue, or the plain form and gelu_grad's kernel) step
// whose operands are F32, or BF16 with an F32 (or, matmul only, BF16) result, it works
// out the product's cuBLASLt form (the strided batch, the host-walked outer
// batch, each operand's actual address alignment) and looks it up in a cache
// keyed by everything that form depends on (shapes, batch strides, dtypes,
// precision, transposes, alignments). A form not seen before gets its matmul
// descriptor, matrix layouts and algorithm (cublasLtMatmulAlgoGetHeuristic,
// allowed the whole workspace; its candidates timed on random operands and
// the fastest that writes the first's bits kept, docs/cuda.md "Matmuls")
// once; the cache lasts as long as the planner,
// so preparing another plan with the same products decides nothing again.
// A BF16 result must be bit for bit the f32-result form's output through
// cast's conversion: its form keeps a bf16-D algorithm only when that writes
// those bits on the tuning operands (random, then with special values);
// else its steps run the f32 form into the step's scratch and convert
// (matmul.cpp, docs/cuda.md "Matmuls").
// At launch the matmul launcher only finds its step's record and calls
// cublasLtMatmul: nothing is chosen or allocated in the training loop.
//
// F64 matmuls stay on cuBLAS's Dgemm (matmul.cpp) and are not planned here.
#pragma once


#include <cstddef>
#include <memory>

#include "CudaKernel.h"

namespace megatrain::runtime::cuda {

class MatmulPlanner {
 public:
  // The one cuBLASLt workspace, allocated when the planner is made and shared
  // by every cuBLASLt call: matmuls must not run on two streams at once.
  static constexpr size_t kWorkspaceBytes = size_t{64} << 20;

  // Makes a cuBLASLt handle and the workspace.
  MatmulPlanner();
  ~MatmulPlanner();
  MatmulPlanner(const MatmulPlanner&) = delete;
  MatmulPlanner& operator=(const MatmulPlanner&) = delete;

  // Forgets the previous plan's steps (the algorithm cache stays) and makes
  // room for `steps` steps.
  void beginPlan(int steps);
  // Plans `launch` if it is an F32 or BF16 matmul, matmul_add, matmul_bias_gelu or matmul_gelu_grad; other steps
  // are ignored. MEGATRAIN_MATMUL_LOG=1 prints how each bf16-result step
  // writes y.
  // Shape, dtype or precision errors and cuBLASLt failures are Errors naming
  // the kernel, the product and the cuBLASLt status.
  void prepare(const Launch& launch);
  // Runs the planned matmul of launch.step on launch.device->stream; an Error
  // if that step was not planned.
  void run(const Launch& launch) const;

  // Distinct products whose algorithm has been chosen so far (a bf16 result
  // counts its f32 form too).
  size_t cachedAlgorithms() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace megatrain::runtime::cuda
