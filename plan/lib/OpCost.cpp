//===- OpCost.cpp - the roofline cost of kernels, copies and host tasks ---===//
#include "megatrain/plan/OpCost.h"

#include <algorithm>

namespace megatrain {

uint64_t TensorShape::elements() const {
  uint64_t count = 1;
  for (int64_t dim : dims)
    count *= static_cast<uint64_t>(std::max<int64_t>(dim, 0));
  return count;
}

namespace {

int64_t attr(const KernelDesc &kernel, const char *name, int64_t fallback) {
  auto it = kernel.intAttrs.find(name);
  return it == kernel.intAttrs.end() ? fallback : it->second;
}

int64_t dimFromEnd(const TensorShape &shape, size_t fromEnd) {
  if (shape.dims.size() < fromEnd)
    return 1;
  return shape.dims[shape.dims.size() - fromEnd];
}

/// FLOPs of the matrix products a kernel performs; 0 for memory-bound ones.
/// matmul_add's addend is one more input: its bytes (read in the epilogue)
/// count with the operands', and no add kernel of its own is priced.
/// matmul_bias_gelu likewise reads its bias and writes y and z; its GELU is
/// part of the epilogue, priced by the bytes of both results. matmul_gelu_grad
/// reads the pre-activation z in its epilogue: one more input's bytes.
double matmulFlops(const KernelDesc &kernel) {
  const std::string &name = kernel.kernel;
  if (((name == "matmul" && kernel.inputs.size() == 2) ||
       ((name == "matmul_add" || name == "matmul_bias_gelu" || name == "matmul_gelu_grad") &&
        kernel.inputs.size() == 3)) &&
      !kernel.outputs.empty()) {
    const TensorShape &a = kernel.inputs[0];
    int64_t k = attr(kernel, "transpose_a", 0) ? dimFromEnd(a, 2) : dimFromEnd(a, 1);
    return 2.0 * static_cast<double>(kernel.outputs[0].elements()) *
           static_cast<double>(k);
  }
  return 0;
}

/// Attention under fp32 and tf32 as the CUDA backend runs it on f32 tensors
/// (runtime/cuda/attention_gemm.cu): cuBLAS GEMMs at the precision's rate over
/// the score matrix, plus row kernels that pass over the f32 scores in HBM.
/// q [B, Hq, S, D], k [B, Hkv, T, D]. Forward: S = QK^T and Y = PV; backward:
/// S, dP = dY V^T, dV, dQ, dK (five products). Causal rows run in blocks of
/// kAttentionRowBlock whose products stop at the block's last visible key.
/// Per computed score element the workspace traffic is, forward, S written
/// and read, P written and read (4 bytes each, 2 for bf16's P); backward, S
/// and dP written and read, P and dS written, P read once and dS twice (bf16:
/// P and dS as 2 bytes); under bf16 the f32 operands are also read and written
/// as bf16 copies (6 bytes per element).
constexpr int64_t kAttentionRowBlock = 512; // runtime/cuda/AttentionGemm.h

/// bf16 attention as the CUDA backend runs it on cuDNN's fused kernels
/// (runtime/cuda/CudnnAttention.cpp): no score matrix in memory. FLOPs over
/// the visible (query, key) pairs (a flash kernel skips fully masked tiles;
/// what the diagonal tiles waste is inside the efficiency), 2 products
/// forward, 5 backward (S recomputed, dP, dV, dQ, dK), at a fraction of the
/// bf16 matmul rate; then, for f32 operands and results only, the bf16
/// copies around the kernel, over HBM: each f32 operand read and written as
/// bf16 (6 bytes an element), each bf16 result read and written as f32 (6).
/// bf16 operands and results (the --precision bf16 plans: q, k, v, y, dy,
/// dq, dk, dv bf16) go to cuDNN as they are: no copies, only their own
/// bytes, which the operands' types already count. lse (f32) is read or
/// written in place. (The kernel's own reads and writes of the copies are
/// inside its efficiency.)
/// The efficiencies make this price equal what gpu_kernel_bench measured on
/// the H200 on 2026-12-01 at the Llama-1.36B shape (B 8, H 16, S 2048,
/// D 128, causal; f32 operands, copies included): forward 488.5 us, backward
/// 1431.7 us (docs/tiering.md). With the copies' measured time taken out
/// (about 236 and 500 us: bf16 -> f32 runs at 2.5 TB/s), the kernels alone
/// reach about 0.69 and 0.46 of the bf16 rate, so the bf16 form is priced
/// high until a traced step fits the family's kernel_efficiency.
constexpr double kFusedAttentionForwardEfficiency = 0.58;
constexpr double kFusedAttentionBackwardEfficiency = 0.41;

struct AttentionWork {
  double flops = 0;
  double workspaceBytes = 0;
  bool fused = false; // cuDNN's kernels: flops at the efficiency's rate, then the copies
  double efficiency = 1;
};

/// The bf16 path's work: visible pairs, and the bytes of the bf16 copies of
/// its f32 operands and results (none for bf16 ones) as workspace.
void fusedAttentionWork(const KernelDesc &kernel, bool forward, AttentionWork &work) {
  const TensorShape &q = kernel.inputs[0], &k = kernel.inputs[1];
  int64_t s = std::max<int64_t>(q.dims[2], 0), t = std::max<int64_t>(k.dims[2], 0);
  double pairs = static_cast<double>(s) * static_cast<double>(t);
  if (attr(kernel, "causal", 1)) {
    // Row i sees keys 0..min(i, t - 1): min(i + 1, t) of them.
    int64_t triangle = std::min(s, t);
    pairs = 0.5 * static_cast<double>(triangle) * static_cast<double>(triangle + 1) +
            static_cast<double>(s - triangle) * static_cast<double>(t);
  }
  double scores = static_cast<double>(q.dims[0] * q.dims[1]) * pairs;
  work.fused = true;
  work.flops = (forward ? 2.0 : 5.0) * 2.0 * scores * static_cast<double>(q.dims[3]);
  work.efficiency = forward ? kFusedAttentionForwardEfficiency : kFusedAttentionBackwardEfficiency;
  // Copied: operands q, k, v (backward: and y, dy) and results y (backward:
  // dq, dk, dv) that are f32; lse in place. A result absent from `kernel`
  // has its operand's type (y and dq q's, dk k's, dv v's), as the op requires.
  // Of the 6 bytes an element, the f32 read or write (4) is the step's own
  // operand or result, which estimateKernel counts already.
  auto copyBytes = [](const TensorShape &t) {
    return t.elementBytes == 4 ? 2.0 * static_cast<double>(t.elements()) : 0.0;
  };
  auto input = [&](size_t i) -> const TensorShape & {
    return i < kernel.inputs.size() ? kernel.inputs[i] : q;
  };
  auto result = [&](size_t i, const TensorShape &like) -> const TensorShape & {
    return i < kernel.outputs.size() ? kernel.outputs[i] : like;
  };
  double bytes = copyBytes(q) + copyBytes(k) + copyBytes(input(2));
  if (forward)
    bytes += copyBytes(result(0, q));
  else
    bytes += copyBytes(input(3)) + copyBytes(input(5)) + copyBytes(result(0, q)) +
             copyBytes(result(1, k)) + copyBytes(result(2, input(2)));
  work.workspaceBytes = bytes;
}

bool attentionWork(const KernelDesc &kernel, Precision precision, AttentionWork &work) {
  bool forward = kernel.kernel == "attention";
  bool backward = kernel.kernel == "attention_grad";
  if (!(forward || backward) || kernel.inputs.size() < 2)
    return false;
  const TensorShape &q = kernel.inputs[0], &k = kernel.inputs[1];
  if (q.dims.size() != 4 || k.dims.size() != 4)
    return false;
  // Operands in [B, S, H, D] (the `bshd` bits of q and k): priced as their
  // [B, H, S, D] form, the same work.
  if (int64_t bshd = attr(kernel, "bshd", 0); bshd & 3) {
    KernelDesc headMajor = kernel;
    headMajor.intAttrs.erase("bshd");
    for (int role = 0; role < 2; ++role)
      if (bshd & (1 << role))
        std::swap(headMajor.inputs[role].dims[1], headMajor.inputs[role].dims[2]);
    return attentionWork(headMajor, precision, work);
  }
  int64_t s = std::max<int64_t>(q.dims[2], 0), t = std::max<int64_t>(k.dims[2], 0);
  double perRow = static_cast<double>(t) * static_cast<double>(s); // computed scores per head
  if (attr(kernel, "causal", 1)) {
    perRow = 0;
    for (int64_t a = 0; a < s; a += kAttentionRowBlock) {
      int64_t end = std::min(a + kAttentionRowBlock, s);
      perRow += static_cast<double>(end - a) * static_cast<double>(std::min(end, t));
    }
  }
  if (precision == Precision::BF16) {
    fusedAttentionWork(kernel, forward, work);
    return true;
  }
  double scores = static_cast<double>(q.dims[0] * q.dims[1]) * perRow;
  double d = static_cast<double>(q.dims[3]);
  bool bf16 = false;
  work.flops = (forward ? 2.0 : 5.0) * 2.0 * scores * d;
  work.workspaceBytes = scores * (forward ? (bf16 ? 12.0 : 16.0) : (bf16 ? 26.0 : 36.0));
  if (bf16)
    work.workspaceBytes += 6.0 * static_cast<double>((forward ? 1 : 2) * q.elements() + 2 * k.elements());
  return true;
}

/// linear_ce and linear_ce_grad as runtime/cuda/linear_cross_entropy.cu runs
/// them: per chunk of `chunk` vocabulary rows, cuBLAS GEMMs over a [rows,
/// chunk] f32 tile in the scratch and row kernels over it, one after
/// another. hidden [B, T, H], weight [V, H]. Forward: one product (the
/// logits) and a pass over the tile (written, read: 8 bytes an element).
/// Backward: the logits recomputed, then dhidden and dweight (three
/// products); the tile written and read (8), the gradient written in the
/// operands' type and read by both products (bf16: 2 + 4; f32, in place in
/// the tile: 4 + 8). Launches: 2 a chunk forward, 4 backward, plus 3 and 1.
struct LinearCeWork {
  double flops = 0;
  double workspaceBytes = 0;
  double launches = 0;
};

bool linearCeWork(const KernelDesc &kernel, LinearCeWork &work) {
  bool forward = kernel.kernel == "linear_ce";
  bool backward = kernel.kernel == "linear_ce_grad";
  if (!(forward || backward) || kernel.inputs.size() < 2)
    return false;
  const TensorShape &hidden = kernel.inputs[0], &weight = kernel.inputs[1];
  if (hidden.dims.size() != 3 || weight.dims.size() != 2)
    return false;
  double rows = static_cast<double>(std::max<int64_t>(hidden.dims[0] * hidden.dims[1], 0));
  int64_t vocab = std::max<int64_t>(weight.dims[0], 0);
  double h = static_cast<double>(std::max<int64_t>(weight.dims[1], 0));
  int64_t chunk = std::max<int64_t>(attr(kernel, "chunk", vocab), 1);
  double chunks = static_cast<double>((vocab + chunk - 1) / chunk);
  double logits = rows * static_cast<double>(vocab);
  double gradBytes = hidden.elementBytes == 2 ? 6.0 : 12.0;
  work.flops = (forward ? 1.0 : 3.0) * 2.0 * logits * h;
  work.workspaceBytes = logits * (forward ? 8.0 : 8.0 + gradBytes);
  work.launches = forward ? 2.0 * chunks + 3.0 : 4.0 * chunks + 1.0;
  return true;
}

} // namespace

KernelCost estimateKernel(const KernelDesc &kernel, const DeviceProfile &profile,
                          Precision precision) {
  KernelCost cost;
  for (const TensorShape &input : kernel.inputs)
    cost.bytes += static_cast<double>(input.bytes());
  for (const TensorShape &output : kernel.outputs)
    cost.bytes += static_cast<double>(output.bytes());
  AttentionWork attention;
  if (attentionWork(kernel, precision, attention)) {
    // GEMMs and row passes (or the fused kernel and its copies) run one
    // after another, not overlapped.
    cost.flops = attention.flops;
    cost.bytes += attention.workspaceBytes;
    cost.seconds = (cost.flops / (attention.efficiency * profile.matmulRate(precision)) +
                    cost.bytes / profile.hbmBytesPerS) /
                       profile.efficiencyOf(kernel.kernel) +
                   profile.launchS;
    return cost;
  }
  LinearCeWork linearCe;
  if (linearCeWork(kernel, linearCe)) {
    // The products and the tile passes run one after another. The products
    // are cuBLAS GEMMs as large as the unfused matmul's, so they reach what
    // the profile's matmul family does; the tile passes what linear_ce's
    // (or linear_ce_grad's) entry says, when a traced step has fitted one.
    cost.flops = linearCe.flops;
    cost.bytes += linearCe.workspaceBytes;
    cost.seconds = cost.flops / (profile.matmulRate(precision) * profile.efficiencyOf("matmul")) +
                   cost.bytes / (profile.hbmBytesPerS * profile.efficiencyOf(kernel.kernel)) +
                   linearCe.launches * profile.launchS;
    return cost;
  }
  cost.flops = matmulFlops(kernel);
  double arithmetic = cost.flops / profile.matmulRate(precision);
  double memory = cost.bytes / profile.hbmBytesPerS;
  // The roofline, then what the family's kernel reaches of it (the profile's
  // kernel_efficiency, fitted from a traced step).
  cost.seconds = std::max(arithmetic, memory) /
                     profile.efficiencyOf(kernel.family.empty() ? kernel.kernel : kernel.family) +
                 profile.launchS;
  return cost;
}

Precision precisionNamed(const std::string &name, Precision fallback) {
  if (name == "tf32")
    return Precision::TF32;
  if (name == "bf16")
    return Precision::BF16;
  if (name == "fp32")
    return Precision::FP32;
  return fallback;
}

double transferSeconds(uint64_t bytes, Link link, const DeviceProfile &profile) {
  double rate = link == Link::HostToDevice ? profile.h2dBytesPerS : profile.d2hBytesPerS;
  return static_cast<double>(bytes) / rate + profile.launchS;
}

double hostAdamWSeconds(uint64_t parameters, const DeviceProfile &profile) {
  return static_cast<double>(parameters) / profile.hostAdamWParamsPerS;
}

double deviceAdamWSeconds(uint64_t parameters, bool computeCopy, const DeviceProfile &profile) {
  const double bytes = static_cast<double>(parameters) * (computeCopy ? 30.0 : 28.0);
  return bytes / profile.hbmBytesPerS + profile.launchS;
}

double deviceAccumulateSeconds(uint64_t elements, const DeviceProfile &profile) {
  return static_cast<double>(elements) * 12.0 / profile.hbmBytesPerS + profile.launchS;
}

double hostAccumulateSeconds(uint64_t elements, const DeviceProfile &profile) {
  // Read the accumulator and the addend, write the accumulator: 12 bytes.
  return static_cast<double>(elements) * 12.0 / profile.hostBytesPerS;
}

} // namespace megatrain
