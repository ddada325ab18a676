// CudaKernel.h - what a CUDA launcher sees (device operands, attributes, stream, scratch) and the kernel table.
//
// The .cu files include this and never the plan's protobuf headers (they would
// add seconds of nvcc time per file): CudaBackend resolves every Kernel step
// once, at prepare time, into a Launch, and a launcher only reads it. A
// launcher checks shapes and dtypes, computes its grid, launches on
// launch.device->stream and checks the launch; it allocates nothing.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "megatrain/plan/Error.h"

// cuBLAS's own handle type, declared as cublas_api.h declares it, so that only
// matmul.cu and CudaBackend.cpp include cuBLAS.
typedef struct cublasContext* cublasHandle_t;

namespace megatrain::runtime::cuda {

class MatmulPlanner;  // MatmulPlanner.h: cuBLASLt algorithms chosen at prepare time

inline constexpr int kMaxRank = 8;
// Operands per side; 8 fits the masks of floatingType (bits 0-7 in, 8-15 out).
inline constexpr int kMaxOperands = 8;

// The plan's element types, numbered as plan.proto numbers them (CudaBackend
// static_asserts the correspondence).
enum class DType : int { Unspecified = 0, F32 = 1, F64 = 2, BF16 = 3, F16 = 4, I64 = 5, I32 = 6, U8 = 7, Bool = 8 };
size_t dtypeBytes(DType dtype);
const char* dtypeLabel(DType dtype);

// A static shape without heap storage.
struct Shape {
  int rank = 0;
  int64_t dims[kMaxRank] = {};

  int64_t operator[](int i) const { return dims[i]; }
  int64_t elements() const { return product(0, rank); }
  int64_t product(int from, int to) const;  // of dims [from, to)
  bool operator==(const Shape& other) const;
  bool operator!=(const Shape& other) const { return !(*this == other); }
  std::string str() const;  // "[4, 3]"
};

struct Operand {
  void* data = nullptr;  // device address
  Shape shape;
  DType dtype = DType::Unspecified;
  const char* name = "?";

  template <typename T>
  T* as() const { return static_cast<T*>(data); }
};

// A Kernel step's attribute, copied out of the plan at prepare time.
struct Attribute {
  enum class Kind { Int, Float, String, Ints, Floats };
  std::string name;
  Kind kind = Kind::Int;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
};

// Typed access to a step's attributes; a missing required attribute or one of
// the wrong kind is an Error naming the kernel.
class Attributes {
 public:
  Attributes() = default;
  Attributes(const std::vector<Attribute>* list, const char* kernel) : list_(list), kernel_(kernel) {}

  int64_t getInt(const char* name) const;
  int64_t getInt(const char* name, int64_t fallback) const;
  double getFloat(const char* name) const;  // an integer attribute is accepted too
  double getFloat(const char* name, double fallback) const;
  std::string_view getString(const char* name, std::string_view fallback) const;
  const std::vector<int64_t>& getInts(const char* name) const;  // absent: empty
  bool has(const char* name) const { return find(name) != nullptr; }

 private:
  const Attribute* find(const char* name) const;
  [[noreturn]] void fail(const char* name, const char* what) const;

  const std::vector<Attribute>* list_ = nullptr;
  const char* kernel_ = "kernel";
};

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
};

// One Kernel step, resolved.
struct Launch {
  const char* kernel = "";
  int step = -1;
  Operand in[kMaxOperands];
  Operand out[kMaxOperands];
  int numIn = 0;
  int numOut = 0;
  Attributes attrs;
  const DeviceContext* device = nullptr;
};

using LaunchFn = void (*)(const Launch& launch);
// Bytes of device scratch a launch needs (device->smCount is set, scratch not yet).
using ScratchFn = size_t (*)(const Launch& launch);

// KernelEntry::inputs of a variadic kernel (concat): one or more inputs, as
// KernelSignature::kAnyInputs says to the plan validator.
inline constexpr int kAnyInputs = -1;

struct KernelEntry {
  int inputs = 0;
  int outputs = 0;
  LaunchFn launch = nullptr;
  ScratchFn scratchBytes = nullptr;  // nullptr: needs none
  // What it means when this kernel flags bad data (nullptr: it never does).
  const char* badData = nullptr;
};

class KernelTable {
 public:
  void add(const char* name, int inputs, int outputs, LaunchFn launch,
           ScratchFn scratch = nullptr, const char* badData = nullptr);
  const KernelEntry* find(const std::string& name) const;
  const std::unordered_map<std::string, KernelEntry>& entries() const { return entries_; }

 private:
  std::unordered_map<std::string, KernelEntry> entries_;
};

// Every CUDA kernel, one registration function per family file.
const KernelTable& cudaKernels();
void addElementwiseKernels(KernelTable& table);
void addMatmulKernels(KernelTable& table);
void addShapeKernels(KernelTable& table);
void addReduceKernels(KernelTable& table);
void addSoftmaxKernels(KernelTable& table);
void addGatherKernels(KernelTable& table);
void addLayerNormKernels(KernelTable& table);
void addCrossEntropyKernels(KernelTable& table);
void addWhereKernels(KernelTable& table);
void addConcatSliceKernels(KernelTable& table);
void addCastKernels(KernelTable& table);
void addRmsNormKernels(KernelTable& table);
void addActivationKernels(KernelTable& table);
void addAttentionKernels(KernelTable& table);
void addRotaryKernels(KernelTable& table);

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

[[noreturn]] void fail(const Launch& launch, const std::string& what);

// The element type of the floating operands: all must be F32 or all F64.
// `operands` lists which: bit i for in[i], bit (8 + i) for out[i].
DType floatingType(const Launch& launch, unsigned operands);
inline constexpr unsigned inMask(int i) { return 1u << i; }
inline constexpr unsigned outMask(int i) { return 1u << (8 + i); }

void requireDType(const Launch& launch, const Operand& operand, DType dtype, const char* role);
void requireShape(const Launch& launch, const Operand& operand, const Shape& expected,
                  const char* role);
// Equal byte sizes per element and a known dtype (shape kernels move any dtype).
void requireSameDType(const Launch& launch);

// Numpy broadcasting of a and b (right-aligned, 1 stretches); false if incompatible.
bool broadcastShapes(const Shape& a, const Shape& b, Shape& result);
// True if `small` broadcasts to `large`.
bool broadcastsTo(const Shape& small, const Shape& large);
// Row-major strides of `shape`, in elements.
void contiguousStrides(const Shape& shape, int64_t* strides);
// Strides that read `from` as if broadcast to `to` (0 on stretched dims).
void broadcastStrides(const Shape& from, const Shape& to, int64_t* strides);

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

// Calls f(float{}) or f(double{}).
template <typename F>
void dispatchFloating(DType dtype, F&& f) {
  if (dtype == DType::F64) f(double{});
  else f(float{});
}

// Reduction shared by reduce_sum, reduce_mean and sum_to (defined in reduce.cu):
// y[j] = (sum of x over the dims where `kept` is 1 and x is not) / divisor,
// with y laid out as `kept` (x.shape with reduced dims set to 1).
void launchSumInto(const Launch& launch, const Operand& x, const Shape& kept, double divisor,
                   const Operand& y);
size_t sumIntoScratch(const Launch& launch, const Shape& x, const Shape& kept);

}  // namespace megatrain::runtime::cuda
