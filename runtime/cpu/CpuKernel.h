// CpuKernel.h - what a CPU kernel sees (operands, attributes, scratch) and the kernel registry.
//
// Every kernel is a plain function over a KernelArgs that CpuBackend resolves
// once, at prepare time, so a launch allocates nothing: shapes live in fixed
// arrays and any double-precision accumulator lives in the backend's scratch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "megatrain/plan/plan.pb.h"
#include "megatrain/runtime/Backend.h"
#include "megatrain/plan/Error.h"

namespace megatrain::runtime::cpu {

inline constexpr int kMaxRank = 8;
// Operands per side; 8 fits the masks of floatingType (bits 0-7 in, 8-15 out).
inline constexpr int kMaxOperands = 8;

// A static shape without heap storage.
struct Shape {
  int rank = 0;
  int64_t dims[kMaxRank] = {};

  int64_t operator[](int i) const { return dims[i]; }
  int64_t elements() const;
  // Product of dims [from, to).
  int64_t product(int from, int to) const;
  bool operator==(const Shape& other) const;
  bool operator!=(const Shape& other) const { return !(*this == other); }
  std::string str() const;  // "[4, 3]"
};

// Row-major strides of `shape`, in elements.
void contiguousStrides(const Shape& shape, int64_t* strides);

struct Operand {
  std::byte* data = nullptr;
  Shape shape;
  plan::DType dtype = plan::DTYPE_UNSPECIFIED;
  const std::string* name = nullptr;

  template <typename T>
  T* as() const { return reinterpret_cast<T*>(data); }
};

// Typed access to a Kernel step's attributes; a missing required attribute or
// one of the wrong kind is an Error naming the kernel.
class Attributes {
 public:
  Attributes() = default;
  explicit Attributes(const plan::Kernel* kernel) : kernel_(kernel) {}

  int64_t getInt(const char* name) const;
  int64_t getInt(const char* name, int64_t fallback) const;
  double getFloat(const char* name) const;  // an integer attribute is accepted too
  double getFloat(const char* name, double fallback) const;
  std::string_view getString(const char* name, std::string_view fallback) const;
  // An `ints` attribute; an absent one reads as empty.
  const google::protobuf::RepeatedField<int64_t>& getInts(const char* name) const;
  bool has(const char* name) const { return find(name) != nullptr; }

 private:
  const plan::Attribute* find(const char* name) const;
  [[noreturn]] void fail(const char* name, const char* what) const;

  const plan::Kernel* kernel_ = nullptr;
};

struct KernelArgs {
  const char* kernel = "";
  Operand in[kMaxOperands];
  Operand out[kMaxOperands];
  int numIn = 0;
  int numOut = 0;
  Attributes attrs;
  std::byte* scratch = nullptr;  // at least scratchBytes(args) bytes, 16-byte aligned
};

using KernelFn = void (*)(const KernelArgs& args);
using ScratchFn = size_t (*)(const KernelArgs& args);

struct KernelEntry {
  KernelSignature signature;
  KernelFn run = nullptr;
  ScratchFn scratchBytes = nullptr;  // nullptr: needs none
};

class KernelRegistry {
 public:
  void add(const char* name, int inputs, int outputs, KernelFn run, ScratchFn scratch = nullptr);
  const KernelEntry* find(const std::string& name) const;

 private:
  std::unordered_map<std::string, KernelEntry> entries_;
};

// Every CPU kernel, one registration function per family file.
const KernelRegistry& cpuKernels();
void addElementwiseKernels(KernelRegistry& registry);
void addMatmulKernels(KernelRegistry& registry);
void addShapeKernels(KernelRegistry& registry);
void addReduceKernels(KernelRegistry& registry);
void addSoftmaxKernels(KernelRegistry& registry);
void addGatherKernels(KernelRegistry& registry);
void addLayerNormKernels(KernelRegistry& registry);
void addCrossEntropyKernels(KernelRegistry& registry);
void addWhereKernels(KernelRegistry& registry);
void addConcatSliceKernels(KernelRegistry& registry);
void addCastKernels(KernelRegistry& registry);
void addRmsNormKernels(KernelRegistry& registry);
void addActivationKernels(KernelRegistry& registry);
void addAttentionKernels(KernelRegistry& registry);
void addRotaryKernels(KernelRegistry& registry);

// ---- helpers shared by the kernel families ----

[[noreturn]] void fail(const KernelArgs& args, const std::string& what);

// The element type of the floating operands: all must be F32 or all F64.
// `operands` lists which: bit i for in[i], bit (8 + i) for out[i].
plan::DType floatingType(const KernelArgs& args, unsigned operands);
inline constexpr unsigned inMask(int i) { return 1u << i; }
inline constexpr unsigned outMask(int i) { return 1u << (8 + i); }

void requireDType(const KernelArgs& args, const Operand& operand, plan::DType dtype,
                  const char* role);
void requireShape(const KernelArgs& args, const Operand& operand, const Shape& expected,
                  const char* role);

// Numpy broadcasting of a and b (right-aligned, 1 stretches); false if incompatible.
bool broadcastShapes(const Shape& a, const Shape& b, Shape& result);

// Strides that read `from` as if broadcast to `to` (right-aligned, 0 on
// stretched dims); `from` must broadcast to `to`.
void broadcastStrides(const Shape& from, const Shape& to, int64_t* strides);

// Calls f(fn) with fn a float or double tag for the dtype.
template <typename F>
void dispatchFloating(plan::DType dtype, F&& f) {
  if (dtype == plan::F64) f(double{});
  else f(float{});
}

// Visits every element of `shape` in row-major order, calling
// f(i, offsetA, offsetB) with i the linear index and the offsets advanced by
// the per-dimension strides sa and sb. Allocates nothing.
template <typename F>
void walk(const Shape& shape, const int64_t* sa, const int64_t* sb, F&& f) {
  if (shape.elements() == 0) return;
  const int rank = shape.rank;
  if (rank == 0) {
    f(int64_t{0}, int64_t{0}, int64_t{0});
    return;
  }
  int64_t index[kMaxRank] = {};
  int64_t offA = 0, offB = 0, i = 0;
  const int64_t inner = shape.dims[rank - 1], ia = sa[rank - 1], ib = sb[rank - 1];
  while (true) {
    for (int64_t k = 0; k < inner; ++k) f(i++, offA + k * ia, offB + k * ib);
    int d = rank - 2;
    for (; d >= 0; --d) {
      offA += sa[d];
      offB += sb[d];
      if (++index[d] < shape.dims[d]) break;
      offA -= sa[d] * shape.dims[d];
      offB -= sb[d] * shape.dims[d];
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

// acc[j] = sum of x[i] over the elements i of x that map to j through
// yStrides (per dim of x; 0 on summed dims), added in row-major order of x.
template <typename T>
void sumInto(const T* x, const Shape& xShape, const int64_t* yStrides, double* acc,
             int64_t accElements) {
  for (int64_t j = 0; j < accElements; ++j) acc[j] = 0;
  const int64_t zero[kMaxRank] = {};
  walk(xShape, yStrides, zero,
       [&](int64_t i, int64_t j, int64_t) { acc[j] += static_cast<double>(x[i]); });
}

// Calls f(tag) with an unsigned integer tag as wide as the dtype's elements,
// for kernels that only move data.
template <typename F>
void dispatchBytes(size_t elementSize, F&& f) {
  switch (elementSize) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    default: f(uint64_t{}); break;
  }
}

}  // namespace megatrain::runtime::cpu
