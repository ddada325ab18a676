// PointwiseSource.h - a pointwise program as CUDA C++ source with every register a local variable, and its compilation with NVRTC.
//
// The compiled path of the `pointwise` kernel (docs/cuda.md, "Compiled
// pointwise programs"): PointwiseJit.cpp writes one source per distinct
// program and operand layout at prepare time, compiles it here and loads it.
// Nothing here touches a GPU, so the tests compile sources for sm_90 on a
// machine without one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "megatrain/kernels/KernelCall.h"

namespace megatrain::runtime::cuda {

// What a compiled kernel is specialized for: the program (as its attributes
// hold it), every operand's dtype, the compute type, and the access path.
struct PointwiseSignature {
  std::vector<int64_t> code;       // kFields integers per instruction (PointwiseProgram.h)
  std::vector<double> constants;   // Scale's factors, Powf's exponents
  std::vector<int64_t> outputs;    // the register each output stores
  std::vector<kernels::DType> in;  // F32, F64 or BF16, one per input
  std::vector<kernels::DType> out;
  kernels::DType compute = kernels::DType::F32;  // F32 or F64
  // Every input has the output's shape and every operand is 16-byte aligned:
  // each thread moves one 16-byte pack per operand (more for a wider dtype
  // beside bf16) and runs the program over its elements. Otherwise each
  // thread takes one element through the broadcast strides.
  bool vectorized = false;
};

// The name of the kernel every source defines (extern "C").
inline constexpr const char* kPointwiseEntry = "megatrain_pointwise";
// Threads a block the kernels are written for (their __launch_bounds__).
inline constexpr int kPointwiseJitThreads = 256;

// Elements a thread takes per step on the vectorized path: 16 bytes of the
// narrowest operand.
int pointwiseVectorWidth(const PointwiseSignature& signature);

// The CUDA C++ source of the signature's kernel. Throws Error when the
// program fails checkProgram or an operand's dtype is not F32, F64 or BF16.
std::string pointwiseSource(const PointwiseSignature& signature);

// A header the sources include, by the name they include it as.
struct EmbeddedText {
  const char* name;
  const char* text;
};
// ElementMath.cuh, PointwiseOps.cuh and the headers they include, as the
// build read them (PointwiseJitHeaders.cpp, written by cmake/EmbedText.cmake).
extern const EmbeddedText kPointwiseJitHeaders[];
extern const size_t kPointwiseJitHeadersCount;

// NVRTC's options for every source: no multiply-add contraction (as nvcc
// compiles the .cu files), IEEE division and square root, C++17.
std::vector<std::string> pointwiseNvrtcOptions(int major, int minor);

// The source compiled by NVRTC to machine code (a cubin) for compute
// capability major.minor. Throws Error with NVRTC's log when it fails.
std::string compilePointwiseCubin(const std::string& source, int major, int minor);

}  // namespace megatrain::runtime::cuda
