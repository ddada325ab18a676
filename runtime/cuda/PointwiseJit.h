// PointwiseJit.h - the compiled path of the `pointwise` kernel: a CUDA kernel per distinct program, compiled with NVRTC at prepare time and cached.
//
// MEGATRAIN_POINTWISE chooses (docs/cuda.md, "Compiled pointwise programs"):
// auto (the default) compiles each program and runs the interpreter, with a
// note, for one that NVRTC or the driver cannot take; jit makes that an
// error; interp runs the interpreter (pointwise.cu) everywhere. The
// interpreter stays the reference: both paths give the same bits.
#pragma once

#include <memory>

#include "CudaKernel.h"
#include "PointwiseJitParams.h"

namespace megatrain::runtime::cuda {

enum class PointwiseMode { Auto, Jit, Interp };

// MEGATRAIN_POINTWISE, read once (unset or empty: auto; anything but auto,
// jit or interp is an Error), unless setPointwiseMode chose first.
PointwiseMode pointwiseMode();
// For the tests and the kernel bench, which run both paths in one process;
// takes effect at the next prepare.
void setPointwiseMode(PointwiseMode mode);

// What prepare leaves in Launch::prepared for a compiled step: the kernel
// and its parameter, bound to the step's addresses and shape.
struct PointwiseJitLaunch {
  void* function = nullptr;  // CUfunction
  PointwiseJitParams params{};
  unsigned blocks = 1;
  bool vectorized = false;
};

// The compiled launch of a `pointwise` step computing in `compute` (F32 or
// F64), or nullptr where the interpreter runs it (mode interp, or mode auto
// when compiling failed). Compiles on the first use of a program; the
// module stays loaded, cached by source text, for the life of the process.
std::shared_ptr<const PointwiseJitLaunch> preparePointwiseJit(const Launch& launch, DType compute);

// Runs it on launch.device->stream.
void launchPointwiseJit(const Launch& launch, const PointwiseJitLaunch& jit);

}  // namespace megatrain::runtime::cuda
