// PointwiseJitParams.h - the one parameter of a run-time compiled pointwise kernel, laid out alike for the host (g++) and the kernel (NVRTC).
//
// Plain integers and pointers only, so both compilers lay it out the same; the
// kernel receives it by value (under 1 KiB of the 4 KiB parameter space).
// Included by PointwiseJit.cpp and, as embedded text, by every kernel
// PointwiseSource.cpp writes.
#ifndef MEGATRAIN_RUNTIME_CUDA_POINTWISEJITPARAMS_H
#define MEGATRAIN_RUNTIME_CUDA_POINTWISEJITPARAMS_H

namespace megatrain::runtime::cuda {

struct PointwiseJitParams {
  static constexpr int kOperands = 8;  // pointwise::kMaxOperands
  static constexpr int kRank = 8;      // kernels::kMaxRank
  const void* in[kOperands];
  void* out[kOperands];
  long long n;  // elements of the output
  // The broadcast path's index space (StridedSpace after coalesce): the
  // output's dims, each input's strides in elements (0 where it broadcasts),
  // and the count below which 32-bit index arithmetic covers it.
  long long narrowBelow;
  int rank;
  long long dims[kRank];
  long long strides[kOperands][kRank];
};

}  // namespace megatrain::runtime::cuda

#endif  // MEGATRAIN_RUNTIME_CUDA_POINTWISEJITPARAMS_H
