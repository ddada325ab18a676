// AttentionGemm.h - attention and attention_grad on f32 tensors through cuBLAS GEMMs (tensor cores) in a fixed workspace.
//
// attention.cu's launchers call these for F32 operands when attentionGemmPlan
// finds a chunking that fits kAttentionWorkspaceBytes; otherwise (F64, an
// empty q or k, a key row too long for the workspace) they keep the
// warp-per-row kernel. See attention_gemm.cu for the method.
#pragma once

#include <cstddef>
#include <cstdint>

#include "CudaKernel.h"

namespace megatrain::runtime::cuda {

// The most device scratch one attention or attention_grad step takes: the
// scores, probabilities and (bf16) operand copies of one chunk of (kv head,
// query rows). Requested through the kernel table's scratch function, so
// prepare() allocates it once with the other kernels' scratch.
inline constexpr size_t kAttentionWorkspaceBytes = size_t{512} << 20;

// The budget the chunking plans for: kAttentionWorkspaceBytes, or a smaller
// MEGATRAIN_ATTENTION_WORKSPACE (bytes) from the environment, read at every
// plan (prepare's scratch request and each launch). Tests set it to reach
// the many-chunk and row-slice paths at small shapes.
size_t attentionWorkspaceBudget();

// Causal row blocks: the products of a block of this many query rows stop at
// the last key the block's last row sees, so about half the fully masked
// score tiles are never computed.
inline constexpr int64_t kAttentionCausalRowBlock = 512;

// The kernel step's `precision` attribute: absent or "fp32" exact fp32
// (CUBLAS_COMPUTE_32F), "tf32" CUBLAS_COMPUTE_32F_FAST_TF32, "bf16" operands
// rounded to bf16 (nearest even) with fp32 accumulation.
enum class AttentionPrecision { Fp32, Tf32, Bf16 };

struct AttentionShape {
  int64_t batch = 0, qHeads = 0, kvHeads = 0, sq = 0, skv = 0, d = 0;
  double scale = 1;
  bool causal = false;
  int64_t group() const { return qHeads / kvHeads; }
};

// How the (kv head, query row) space is cut to fit the workspace: `heads` kv
// heads at a time (with all their group's query heads), and within them
// query rows `rows` at a time (rows == sq unless one kv head's group alone
// does not fit, then heads == 1). bytes: the workspace one chunk uses (0 when
// the GEMM path cannot take the shape).
struct AttentionChunking {
  int64_t heads = 0, rows = 0;
  size_t bytes = 0;
};

AttentionPrecision attentionPrecision(const Launch& launch);
AttentionChunking attentionGemmPlan(const AttentionShape& shape, AttentionPrecision precision, bool backward);

// Launch on launch.device->stream; the scratch must hold plan.bytes.
void attentionGemmForward(const Launch& launch, const AttentionShape& shape);
void attentionGemmBackward(const Launch& launch, const AttentionShape& shape);

}  // namespace megatrain::runtime::cuda
