// CudaKernel.h - what a CUDA launcher sees (a KernelCall plus the device context) and the CUDA kernel registry.
//
// The .cu files include this and never the plan's protobuf headers (they would
// add seconds of nvcc time per file): CudaBackend resolves every Kernel step
// once, at prepare time, into a Launch, and a launcher only reads it. Shapes
// are checked by the kernel layer's rules (megatrain/kernels/ShapeRules.h); a
// launcher checks dtypes, computes its grid, launches on launch.device->stream
// and checks the launch; it allocates nothing.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "megatrain/kernels/KernelCall.h"
#include "megatrain/kernels/KernelRegistry.h"
#include "megatrain/kernels/ShapeRules.h"

// cuBLAS's own handle type, declared as cublas_api.h declares it, so that only
// matmul.cu and CudaBackend.cpp include cuBLAS.
typedef struct cublasContext* cublasHandle_t;

namespace megatrain::runtime::cuda {

using namespace megatrain::kernels;  // the kernel layer's vocabulary: Shape, Operand, DType, rules

class MatmulPlanner;  // MatmulPlanner.h: cuBLASLt algorithms chosen at prepare time
class CudnnAttention;  // CudnnAttention.h: cuDNN fused attention graphs built at prepare time

// Device state shared by every launch of one backend.
struct DeviceContext {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  void* scratch = nullptr;  // [scratchBytes], 256-byte aligned, shared by all steps
  size_t scratchBytes = 0;
  // Device-visible (mapped pinned) word: a kernel that meets bad data (an
  // index or label out of range) stores its step + 1 there with atomicCAS;
  // the backend reports it at the next synchronization.
  int* badData = nullptr;
  int smCount = 132;
  // The f32/bf16 matmuls' cuBLASLt plans (made by the backend's prepare()).
  MatmulPlanner* matmul = nullptr;
  // The bf16 attention steps' cuDNN graphs (made by the backend's constructor;
  // nullptr outside a backend, where attention keeps its GEMM path).
  CudnnAttention* attention = nullptr;
};

// One Kernel step, resolved: the call and the device it runs on.
struct Launch : KernelCall {
  const DeviceContext* device = nullptr;
  // What the kernel's prepare hook made for this step (a compiled pointwise
  // kernel, PointwiseJit.h); nullptr when it has none.
  std::shared_ptr<const void> prepared;
};

using LaunchFn = void (*)(const Launch& launch);
// Bytes of device scratch a launch needs (device->smCount is set, scratch not yet).
using ScratchFn = size_t (*)(const Launch& launch);
// Work done once per step at prepare time, before the first launch (code
// compiled for the step's program); may set launch.prepared.
using PrepareFn = void (*)(Launch& launch);

struct CudaKernel {
  LaunchFn launch = nullptr;
  ScratchFn scratchBytes = nullptr;  // nullptr: needs none
  // What it means when this kernel flags bad data (nullptr: it never does).
  const char* badData = nullptr;
  PrepareFn prepare = nullptr;  // nullptr: nothing to prepare
};
using CudaKernelRegistry = KernelRegistry<CudaKernel>;

// Every CUDA kernel, one registration function per family file (MEGATRAIN_KERNEL_FAMILIES).
const CudaKernelRegistry& cudaKernels();
#define MEGATRAIN_DECLARE_CUDA_FAMILY(Family) void add##Family##Kernels(CudaKernelRegistry& registry);
MEGATRAIN_KERNEL_FAMILIES(MEGATRAIN_DECLARE_CUDA_FAMILY)
#undef MEGATRAIN_DECLARE_CUDA_FAMILY

// ---- CUDA error checks: every call, with file and line ----

void checkCuda(cudaError_t status, const char* call, const char* file, int line);
#define MT_CUDA_CHECK(call) ::megatrain::runtime::cuda::checkCuda((call), #call, __FILE__, __LINE__)

// A cublasStatus_t (passed as int, so that this header needs no cuBLAS).
void checkCublas(int status, const char* call, const char* file, int line);
#define MT_CUBLAS_CHECK(call) \
  ::megatrain::runtime::cuda::checkCublas(static_cast<int>(call), #call, __FILE__, __LINE__)

// After a launch: cudaGetLastError, reported with the kernel and step.
void checkLaunch(const Launch& launch, const char* file, int line);
#define MT_CHECK_LAUNCH(launch) ::megatrain::runtime::cuda::checkLaunch((launch), __FILE__, __LINE__)

// ---- helpers shared by the launchers ----

// floatingType with the CUDA backend named.
inline DType cudaFloatingType(const KernelCall& call, unsigned operands) {
  return floatingType(call, operands, "the CUDA backend");
}

// An index space (dims, row-major) walked by N stride tables at once; what a
// kernel turns a linear index into N element offsets with.
template <int N>
struct StridedSpace {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[N][kMaxRank] = {};
  // Indices below this turn into offsets in 32-bit arithmetic (a 64-bit
  // division is many instructions on the GPU): set by coalesce() to the
  // element count when that and every table's largest offset are below 2^31
  // and no stride is negative; 0 (always 64-bit) otherwise.
  int64_t narrowBelow = 0;
};

// MEGATRAIN_CUDA_WIDE_INDEX=1: every space takes the 64-bit path, which the
// GPU tests run too (bench/device.sh); unset, empty or 0: off; anything else
// is an Error. Read once.
bool wideIndicesForced();

// Sets space.narrowBelow (see StridedSpace).
template <int N>
void markNarrow(StridedSpace<N>& space) {
  constexpr int64_t kLimit = int64_t(1) << 31;
  if (wideIndicesForced()) return void(space.narrowBelow = 0);
  int64_t elements = 1;
  for (int d = 0; d < space.rank; ++d) {
    if (space.dims[d] < 0 || space.dims[d] >= kLimit) return void(space.narrowBelow = 0);
    elements *= space.dims[d];
    if (elements >= kLimit) return void(space.narrowBelow = 0);
  }
  for (int t = 0; t < N; ++t) {
    int64_t largest = 0;
    for (int d = 0; d < space.rank; ++d) {
      if (space.strides[t][d] < 0 || space.strides[t][d] >= kLimit) return void(space.narrowBelow = 0);
      largest += (space.dims[d] - 1) * space.strides[t][d];
      if (largest >= kLimit) return void(space.narrowBelow = 0);
    }
  }
  space.narrowBelow = elements;
}

// Drops dims of extent 1 and merges neighbours that every table walks
// contiguously, so most spaces end at rank 1 or 2 (fewer divisions per
// element), and marks whether 32-bit index arithmetic covers it.
template <int N>
void coalesce(StridedSpace<N>& space) {
  StridedSpace<N> out;
  for (int d = 0; d < space.rank; ++d) {
    if (space.dims[d] == 1) continue;
    bool merge = out.rank > 0;
    for (int t = 0; t < N && merge; ++t)
      merge = out.strides[t][out.rank - 1] == space.strides[t][d] * space.dims[d];
    if (merge) {
      out.dims[out.rank - 1] *= space.dims[d];
      for (int t = 0; t < N; ++t) out.strides[t][out.rank - 1] = space.strides[t][d];
    } else {
      out.dims[out.rank] = space.dims[d];
      for (int t = 0; t < N; ++t) out.strides[t][out.rank] = space.strides[t][d];
      ++out.rank;
    }
  }
  markNarrow(out);
  space = out;
}

// cudaMemcpyAsync with memmove semantics: overlapping ranges (the planner may
// hand a copy or a reshape bytes that overlap) are copied in non-overlapping
// pieces, in the order that reads every byte before it is overwritten.
void copyBytes(void* dst, const void* src, size_t bytes, cudaStream_t stream);

// Blocks for a grid-stride loop over n items: enough to fill the device,
// never more than the items need.
unsigned gridFor(const Launch& launch, int64_t n, int threads);

// cast's f32 <-> bf16 conversion of n contiguous elements on launch.device->stream
// (defined in cast.cu): nearest even, NaN kept quiet, 8 elements a thread when
// both ends are 16-byte aligned. The cuDNN attention path's operand copies.
void convertF32ToBf16(const Launch& launch, const float* x, uint16_t* y, int64_t n);
void convertBf16ToF32(const Launch& launch, const uint16_t* x, float* y, int64_t n);

// gelu's tanh form of n contiguous f32 elements on launch.device->stream
// (defined in activation.cu): the gelu kernel's expression, for
// matmul_bias_gelu's steps that cuBLASLt's GELU epilogue does not take.
void launchGeluTanh(const Launch& launch, const float* x, float* y, int64_t n);
// gelu_grad's tanh form, dx = dy * gelu_tanh'(x), of n contiguous f32
// elements (dx may be dy's bytes): the gelu_grad kernel's expression, for
// matmul_gelu_grad's steps that cuBLASLt's DGELU epilogue does not take.
void launchGeluTanhGrad(const Launch& launch, const float* x, const float* dy, float* dx, int64_t n);

// Reduction shared by reduce_sum, reduce_mean and sum_to (defined in reduce.cu):
// y[j] = (sum of x over the dims where `kept` is 1 and x is not) / divisor,
// with y laid out as `kept` (x.shape with reduced dims set to 1).
void launchSumInto(const Launch& launch, const Operand& x, const Shape& kept, double divisor,
                   const Operand& y);
size_t sumIntoScratch(const Launch& launch, const Shape& x, const Shape& kept);

}  // namespace megatrain::runtime::cuda
