// CpuKernel.h - what a CPU kernel sees (a KernelCall plus scratch) and the CPU kernel registry.
//
// Every kernel is a plain function over a KernelArgs that CpuBackend resolves
// once, at prepare time, so a launch allocates nothing: shapes live in fixed
// arrays and any double-precision accumulator lives in the backend's scratch.
// Shapes are checked by the kernel layer's rules (megatrain/kernels/ShapeRules.h);
// the files of this folder hold the arithmetic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "megatrain/kernels/KernelCall.h"
#include "megatrain/kernels/KernelRegistry.h"
#include "megatrain/kernels/ShapeRules.h"
#include "megatrain/plan/Bf16.h"

namespace megatrain::runtime::cpu {

using namespace megatrain::kernels;  // the kernel layer's vocabulary: Shape, Operand, DType, rules

// A step as a CPU kernel reads it: the call and the backend's scratch.
struct KernelArgs : KernelCall {
  std::byte* scratch = nullptr;  // at least scratchBytes(args) bytes, 16-byte aligned
};

using KernelFn = void (*)(const KernelArgs& args);
using ScratchFn = size_t (*)(const KernelArgs& args);

struct CpuKernel {
  KernelFn run = nullptr;
  ScratchFn scratchBytes = nullptr;  // nullptr: needs none
};
using CpuKernelRegistry = KernelRegistry<CpuKernel>;

// Every CPU kernel, one registration function per family file (MEGATRAIN_KERNEL_FAMILIES).
const CpuKernelRegistry& cpuKernels();
#define MEGATRAIN_DECLARE_CPU_FAMILY(Family) void add##Family##Kernels(CpuKernelRegistry& registry);
MEGATRAIN_KERNEL_FAMILIES(MEGATRAIN_DECLARE_CPU_FAMILY)
#undef MEGATRAIN_DECLARE_CPU_FAMILY

// ---- helpers shared by the kernel families ----

// floatingType with the CPU backend named: the reference computes in f32 or f64 only.
inline DType cpuFloatingType(const KernelCall& call, unsigned operands) {
  return floatingType(call, operands, "the CPU backend");
}

// A bf16 element (its raw bits) as the mixed-precision kernels read and
// write it: read exactly, as its f32 value; written by narrowTo.
struct Bf16 {
  uint16_t bits;
  explicit operator double() const { return static_cast<double>(bf16ToFloat(bits)); }
};

// A result computed in double, stored as T. Bf16 rounds to f32 first and
// then to bf16 (floatToBf16, as cast does): a bf16 result is bit for bit the
// cast of the f32 result the same arithmetic gives.
template <typename T>
T narrowTo(double value) {
  if constexpr (std::is_same_v<T, Bf16>) return Bf16{floatToBf16(static_cast<float>(value))};
  else return static_cast<T>(value);
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
