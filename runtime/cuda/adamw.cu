// adamw.cu - AdamW and gradient accumulation for device-resident parameters: one fused kernel each.
//
// The update is the host AdamW's (runtime/host/AdamW.cpp, adamwScalarF32 and
// adamwScalar), operation for operation: the per-call constants come from
// adamwConstantsF32/F64 (computed on the host in double, exactly as there),
// and every multiply, add, divide and square root is an explicitly rounded
// intrinsic (__fmul_rn, __fsqrt_rn, ...), so neither --fmad nor the compiler's
// choices can contract or reorder them: the device gives the host's bits.
// The bf16 copy is rounded as floatToBf16 (megatrain/plan/DType.h) rounds,
// NaN kept quiet with its sign.
//
// Bandwidth: per f32 element 16 bytes read (p, g, m, v) and 12 written
// (p, m, v), plus 2 for the copy: a 1B-parameter update moves 30 GB, about
// 7 ms at the H200's 4.2 TB/s (docs/hardware.md), against ~0.29 s for the host
// AdamW at 3.5 G params/s. A grid-stride loop, one element a thread per
// iteration; the loads are coalesced and the update is memory bound.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "CudaKernel.h"
#include "DeviceAdamW.h"
#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/AdamW.h"

namespace megatrain::runtime::cuda {
namespace {

__device__ __forceinline__ uint16_t bf16Bits(float value) {
  uint32_t word = __float_as_uint(value);
  if ((word & 0x7F800000u) == 0x7F800000u && (word & 0x007FFFFFu) != 0)
    return static_cast<uint16_t>((word >> 16) | 0x0040u);  // quiet NaN, sign kept
  word += 0x7FFFu + ((word >> 16) & 1u);
  return static_cast<uint16_t>(word >> 16);
}

// param, m, v: (count); grad: (count); copy: (count) or null.
__global__ void adamwF32Kernel(float* param, const float* grad, float* m, float* v, uint16_t* copy, size_t count,
                               AdamWConstantsF32 c) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    const float g = grad[i];
    const float mNew = __fadd_rn(__fmul_rn(c.beta1, m[i]), __fmul_rn(c.oneMinusBeta1, g));
    const float vNew = __fadd_rn(__fmul_rn(c.beta2, v[i]), __fmul_rn(__fmul_rn(c.oneMinusBeta2, g), g));
    m[i] = mNew;
    v[i] = vNew;
    const float denominator = __fadd_rn(__fmul_rn(__fsqrt_rn(vNew), c.invSqrtCorrection2), c.eps);
    const float p = __fsub_rn(__fmul_rn(param[i], c.decay), __fdiv_rn(__fmul_rn(c.stepSize, mNew), denominator));
    param[i] = p;
    if (copy) copy[i] = bf16Bits(p);
  }
}

__global__ void adamwF64Kernel(double* param, const double* grad, double* m, double* v, size_t count,
                               AdamWConstantsF64 c) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    const double g = grad[i];
    const double mNew = __dadd_rn(__dmul_rn(c.beta1, m[i]), __dmul_rn(c.oneMinusBeta1, g));
    const double vNew = __dadd_rn(__dmul_rn(c.beta2, v[i]), __dmul_rn(__dmul_rn(c.oneMinusBeta2, g), g));
    m[i] = mNew;
    v[i] = vNew;
    const double mHat = __ddiv_rn(mNew, c.correction1);
    const double vHat = __ddiv_rn(vNew, c.correction2);
    double p = param[i];
    p = __dsub_rn(p, __dmul_rn(c.lrWeightDecay, p));
    param[i] = __dsub_rn(p, __ddiv_rn(__dmul_rn(c.lr, mHat), __dadd_rn(__dsqrt_rn(vHat), c.eps)));
  }
}

template <typename T>
__global__ void accumulateKernel(T* acc, const T* addend, size_t count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    acc[i] = acc[i] + addend[i];
}

constexpr unsigned kThreads = 256;

unsigned blocksFor(size_t count) {
  // Enough blocks to fill any current GPU; the grid-stride loop covers the rest.
  return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>((count + kThreads - 1) / kThreads, 65536)));
}

}  // namespace

void launchAdamW(plan::DType dtype, void* param, const void* grad, void* m, void* v, size_t count,
                 const plan::AdamW& hyper, int64_t t, uint16_t* bf16Copy, cudaStream_t stream) {
  if (bf16Copy && dtype != plan::F32)
    throw Error(std::string("device adamw: a bf16 compute copy needs f32 masters, got ") + dtypeName(dtype));
  if (count == 0) return;
  if (dtype == plan::F32) {
    adamwF32Kernel<<<blocksFor(count), kThreads, 0, stream>>>(
        static_cast<float*>(param), static_cast<const float*>(grad), static_cast<float*>(m),
        static_cast<float*>(v), bf16Copy, count, adamwConstantsF32(hyper, t));
  } else if (dtype == plan::F64) {
    adamwF64Kernel<<<blocksFor(count), kThreads, 0, stream>>>(
        static_cast<double*>(param), static_cast<const double*>(grad), static_cast<double*>(m),
        static_cast<double*>(v), count, adamwConstantsF64(hyper, t));
  } else {
    throw Error(std::string("device adamw: dtype ") + dtypeName(dtype) + " is not supported (f32 or f64)");
  }
  MT_CUDA_CHECK(cudaGetLastError());
}

void setAdamWNodeStep(cudaGraphExec_t exec, cudaGraphNode_t node, plan::DType dtype, const plan::AdamW& hyper,
                      int64_t t) {
  cudaKernelNodeParams params{};
  MT_CUDA_CHECK(cudaGraphKernelNodeGetParams(node, &params));
  // The launch's arguments as recorded, but the constants (the last one).
  void* args[7] = {};
  AdamWConstantsF32 f32;
  AdamWConstantsF64 f64;
  if (dtype == plan::F32 && params.func == reinterpret_cast<void*>(adamwF32Kernel)) {
    for (int i = 0; i < 6; ++i) args[i] = params.kernelParams[i];
    f32 = adamwConstantsF32(hyper, t);
    args[6] = &f32;
  } else if (dtype == plan::F64 && params.func == reinterpret_cast<void*>(adamwF64Kernel)) {
    for (int i = 0; i < 5; ++i) args[i] = params.kernelParams[i];
    f64 = adamwConstantsF64(hyper, t);
    args[5] = &f64;
  } else {
    throw Error(std::string("device adamw: the recorded node is not the ") + dtypeName(dtype) + " update kernel");
  }
  params.kernelParams = args;
  params.extra = nullptr;
  MT_CUDA_CHECK(cudaGraphExecKernelNodeSetParams(exec, node, &params));
}

void launchAccumulate(plan::DType dtype, void* acc, const void* addend, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  if (dtype == plan::F32)
    accumulateKernel<float><<<blocksFor(count), kThreads, 0, stream>>>(static_cast<float*>(acc),
                                                                         static_cast<const float*>(addend), count);
  else if (dtype == plan::F64)
    accumulateKernel<double><<<blocksFor(count), kThreads, 0, stream>>>(static_cast<double*>(acc),
                                                                          static_cast<const double*>(addend), count);
  else
    throw Error(std::string("device accumulate: dtype ") + dtypeName(dtype) + " is not supported (f32 or f64)");
  MT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace megatrain::runtime::cuda
