// pointwise.cu - the fused elementwise chain on the GPU: one straight-line program run over several elements a thread.
//
// The program (megatrain/plan/PointwiseProgram.h) travels in the kernel's
// parameters (under 1 KiB: 48 instructions of 8 bytes, 16 constants, the 8
// input and output pointers), so every thread reads it from the constant bank
// and all threads take the same branch of the opcode switch at once. Its
// registers are first packed by liveness into a few slots
// (megatrain/plan/PointwiseSlots.h): the per-thread frame, which the compiler
// keeps in local memory because the interpreter indexes it at run time, is
// then S slots x E elements (S 8 with E 4, S 16 with E 2, else every register
// with E 1), at most 128 bytes of f32 for the first two, and the grid is
// sized for 1,024 threads an SM, so the frames stay in L1. Each thread takes
// E elements a block-width apart (every load and store coalesced), decodes
// each instruction once for its E elements and runs it over them (E
// independent loads in flight, the switch and the operand fetches amortized).
// Each instruction is the expression of the unfused CUDA kernel it stands for
// (elementwise.cu, activation.cu, cast.cu) in the same type T, so the results
// match the CPU twin (cpu/pointwise.cpp) within the elementwise tolerances.
// The inputs are read through one coalesced StridedSpace<8> (numpy
// broadcasting as stride-0 dims); bf16 operands are read exactly and written
// rounded to nearest even. Pointers are not __restrict__: the planner may give
// an output the bytes of a dying input.
//
// This interpreter is the fallback and the reference: by default each
// program is compiled at prepare time into a kernel of its own, registers in
// machine registers (PointwiseJit.h; MEGATRAIN_POINTWISE), with the same
// expressions (PointwiseOps.cuh) and so the same bits.
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "DeviceMath.cuh"
#include "ElementMath.cuh"
#include "PointwiseJit.h"
#include "PointwiseOps.cuh"
#include "megatrain/kernels/MathConstants.h"
#include "megatrain/plan/PointwiseProgram.h"
#include "megatrain/plan/PointwiseSlots.h"

namespace megatrain::runtime::cuda {
namespace {

namespace pw = megatrain::pointwise;

// ---- the program as the kernel receives it ----

// One instruction over slots: dst = op(a, b, c); -1 for an operand it does not
// read; constant indexes `constants` (Scale, Powf).
struct alignas(8) Instruction {
  int8_t op = 0, a = -1, b = -1, c = -1, dst = 0, constant = 0, unused0 = 0, unused1 = 0;
};

struct Program {
  int inputs = 0;
  int outputs = 0;
  int count = 0;  // instructions
  Instruction code[pw::kMaxInstructions];
  int8_t store[pw::kMaxOperands] = {};  // slot of each output
  double constants[pw::kMaxConstants] = {};
  const void* in[pw::kMaxOperands] = {};
  void* out[pw::kMaxOperands] = {};
  bool inBf16[pw::kMaxOperands] = {};
  bool outBf16[pw::kMaxOperands] = {};
};

// dst[e] = pointwiseOp<Op>(a[e], b[e], c[e], k) for each of the E elements.
template <int Op, int E, typename T>
__device__ __forceinline__ void each(const T (&a)[E], const T (&b)[E], const T (&c)[E], double k, T (&dst)[E]) {
#pragma unroll
  for (int e = 0; e < E; ++e) dst[e] = pointwiseOp<Op>(a[e], b[e], c[e], k);
}

// One instruction over E elements; `k` is its constant (Scale, Powf). The
// expressions are PointwiseOps.cuh's, which the compiled path uses too.
template <int E, typename T>
__device__ __forceinline__ void evaluate(int op, const T (&a)[E], const T (&b)[E], const T (&c)[E], double k,
                                         T (&dst)[E]) {
  switch (op) {
    case pw::Add: return each<pw::Add>(a, b, c, k, dst);
    case pw::Sub: return each<pw::Sub>(a, b, c, k, dst);
    case pw::Mul: return each<pw::Mul>(a, b, c, k, dst);
    case pw::Div: return each<pw::Div>(a, b, c, k, dst);
    case pw::Max: return each<pw::Max>(a, b, c, k, dst);
    case pw::Min: return each<pw::Min>(a, b, c, k, dst);
    case pw::Neg: return each<pw::Neg>(a, b, c, k, dst);
    case pw::Sqrt: return each<pw::Sqrt>(a, b, c, k, dst);
    case pw::Reciprocal: return each<pw::Reciprocal>(a, b, c, k, dst);
    case pw::Exp: return each<pw::Exp>(a, b, c, k, dst);
    case pw::Log: return each<pw::Log>(a, b, c, k, dst);
    case pw::Erf: return each<pw::Erf>(a, b, c, k, dst);
    case pw::Cos: return each<pw::Cos>(a, b, c, k, dst);
    case pw::Sin: return each<pw::Sin>(a, b, c, k, dst);
    case pw::Tanh: return each<pw::Tanh>(a, b, c, k, dst);
    case pw::Sigmoid: return each<pw::Sigmoid>(a, b, c, k, dst);
    case pw::Relu: return each<pw::Relu>(a, b, c, k, dst);
    case pw::Softplus: return each<pw::Softplus>(a, b, c, k, dst);
    case pw::Silu: return each<pw::Silu>(a, b, c, k, dst);
    case pw::Scale: return each<pw::Scale>(a, b, c, k, dst);
    case pw::Powf: return each<pw::Powf>(a, b, c, k, dst);
    case pw::RoundBf16: return each<pw::RoundBf16>(a, b, c, k, dst);
    case pw::Swiglu: return each<pw::Swiglu>(a, b, c, k, dst);
    case pw::SiluGrad: return each<pw::SiluGrad>(a, b, c, k, dst);
    case pw::SwigluGradGate: return each<pw::SwigluGradGate>(a, b, c, k, dst);
    case pw::SwigluGradUp: return each<pw::SwigluGradUp>(a, b, c, k, dst);
    case pw::ReluGrad: return each<pw::ReluGrad>(a, b, c, k, dst);
    case pw::TanhGrad: return each<pw::TanhGrad>(a, b, c, k, dst);
    case pw::SigmoidGrad: return each<pw::SigmoidGrad>(a, b, c, k, dst);
    case pw::ErfGrad: return each<pw::ErfGrad>(a, b, c, k, dst);
    case pw::GeluErf: return each<pw::GeluErf>(a, b, c, k, dst);
    case pw::GeluTanh: return each<pw::GeluTanh>(a, b, c, k, dst);
    case pw::GeluErfGrad: return each<pw::GeluErfGrad>(a, b, c, k, dst);
    case pw::GeluTanhGrad: return each<pw::GeluTanhGrad>(a, b, c, k, dst);
    default: return each<-1>(a, b, c, k, dst);  // unreachable: pointwiseRule checked every opcode
  }
}

// Reads slot `slot` of the frame for the E elements (zeros when slot < 0).
template <int S, int E, typename T>
__device__ __forceinline__ void readSlot(const T (&r)[S][E], int slot, T (&v)[E]) {
  if (slot < 0) {
#pragma unroll
    for (int e = 0; e < E; ++e) v[e] = T(0);
    return;
  }
#pragma unroll
  for (int e = 0; e < E; ++e) v[e] = r[slot][e];
}

// Elements base + e * kThreads + threadIdx.x (e < E) of every tile of
// kThreads x E: load the inputs through `space` into slots 0..inputs-1, run
// the program over the frame of S slots, store the outputs (all [n], row-major).
template <typename T, int S, int E>
__global__ void __launch_bounds__(kThreads) pointwiseKernel(const Program program,
                                                            const StridedSpace<pw::kMaxOperands> space, int64_t n) {
  T r[S][E];
  const int64_t tile = static_cast<int64_t>(kThreads) * E;
  for (int64_t base = blockIdx.x * tile; base < n; base += static_cast<int64_t>(gridDim.x) * tile) {
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int64_t i = base + e * kThreads + threadIdx.x;
      int64_t at[pw::kMaxOperands] = {};
      if (i < n) stridedOffsets(space, i, at);
#pragma unroll
      for (int k = 0; k < pw::kMaxOperands; ++k) {
        if (k >= program.inputs || k >= S) continue;
        T v = T(0);
        if (i < n)
          v = program.inBf16[k] ? static_cast<T>(bf16BitsToFloat(static_cast<const uint16_t*>(program.in[k])[at[k]]))
                                : static_cast<const T*>(program.in[k])[at[k]];
        r[k][e] = v;
      }
    }
    for (int j = 0; j < program.count; ++j) {
      const Instruction ins = program.code[j];
      T a[E], b[E], c[E], out[E];
      readSlot(r, ins.a, a);
      readSlot(r, ins.b, b);
      readSlot(r, ins.c, c);
      evaluate<E, T>(ins.op, a, b, c, program.constants[ins.constant], out);
#pragma unroll
      for (int e = 0; e < E; ++e) r[ins.dst][e] = out[e];
    }
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int64_t i = base + e * kThreads + threadIdx.x;
      if (i >= n) continue;
#pragma unroll
      for (int k = 0; k < pw::kMaxOperands; ++k) {
        if (k >= program.outputs) continue;
        const T v = r[program.store[k]][e];
        if (program.outBf16[k]) static_cast<uint16_t*>(program.out[k])[i] = floatToBf16Bits(static_cast<float>(v));
        else static_cast<T*>(program.out[k])[i] = v;
      }
    }
  }
}

// ---- launcher ----

// The compute type: f64 if any operand is f64, else f32; bf16 operands are
// read and written through it.
DType computeType(const Launch& launch) {
  DType compute = DType::Unspecified;
  auto visit = [&](const Operand& operand) {
    if (operand.dtype == DType::BF16) return;
    if (operand.dtype != DType::F32 && operand.dtype != DType::F64)
      fail(launch, std::string("operand '") + operand.name + "' is " + dtypeLabel(operand.dtype) +
                       ", the CUDA backend computes pointwise chains on f32, f64 and bf16");
    if (compute != DType::Unspecified && operand.dtype != compute)
      fail(launch, std::string("operand '") + operand.name + "' is " + dtypeLabel(operand.dtype) +
                       " but another is " + dtypeLabel(compute) + ": one compute type per chain");
    compute = operand.dtype;
  };
  for (int k = 0; k < launch.numIn; ++k) visit(launch.in[k]);
  for (int k = 0; k < launch.numOut; ++k) visit(launch.out[k]);
  return compute;
}

// The frame sizes the kernel is built for: slots and elements a thread.
template <typename F>
void dispatchFrame(int slots, F&& f) {
  if (slots <= 8) f(std::integral_constant<int, 8>{}, std::integral_constant<int, 4>{});
  else if (slots <= 16) f(std::integral_constant<int, 16>{}, std::integral_constant<int, 2>{});
  else f(std::integral_constant<int, pw::kMaxRegisters>{}, std::integral_constant<int, 1>{});
}

// Prepare: the compiled kernel of the step's program, unless the
// interpreter runs it (PointwiseJit.h, MEGATRAIN_POINTWISE).
void preparePointwise(Launch& launch) { launch.prepared = preparePointwiseJit(launch, computeType(launch)); }

void pointwise(const Launch& launch) {
  if (launch.prepared)
    return launchPointwiseJit(launch, *static_cast<const PointwiseJitLaunch*>(launch.prepared.get()));
  const DType compute = computeType(launch);
  const std::vector<int64_t>& code = launch.attrs.getInts("code");
  const std::vector<int64_t>& outputs = launch.attrs.getInts("outputs");
  const std::vector<double>& constants = launch.attrs.getFloats("constants");
  const Shape& shape = launch.out[0].shape;
  const int64_t n = shape.elements();
  if (n == 0) return;
  Program program;
  program.inputs = launch.numIn;
  program.outputs = launch.numOut;
  program.count = static_cast<int>(code.size()) / pw::kFields;
  const pw::Slots slots = pw::packSlots(launch.numIn, code.data(), static_cast<size_t>(program.count),
                                        outputs.data(), outputs.size());
  for (int j = 0; j < program.count; ++j) {
    const int64_t* ins = &code[static_cast<size_t>(j) * pw::kFields];
    const pw::OpcodeInfo& info = *pw::opcodeInfo(ins[0]);
    Instruction& out = program.code[j];
    out.op = static_cast<int8_t>(ins[0]);
    int8_t* operands[3] = {&out.a, &out.b, &out.c};
    for (int slot = 0; slot < 3; ++slot) {
      if (info.constant && slot == 1) out.constant = static_cast<int8_t>(ins[2]);
      else if (slot < info.registers) *operands[slot] = static_cast<int8_t>(slots.of[static_cast<size_t>(ins[1 + slot])]);
    }
    out.dst = static_cast<int8_t>(slots.of[static_cast<size_t>(launch.numIn + j)]);
  }
  for (size_t c = 0; c < constants.size(); ++c) program.constants[c] = constants[c];
  StridedSpace<pw::kMaxOperands> space;
  space.rank = shape.rank;
  for (int d = 0; d < shape.rank; ++d) space.dims[d] = shape[d];
  for (int k = 0; k < launch.numIn; ++k) {
    program.in[k] = launch.in[k].data;
    program.inBf16[k] = launch.in[k].dtype == DType::BF16;
    broadcastStrides(launch.in[k].shape, shape, space.strides[k]);
  }
  for (int k = 0; k < launch.numOut; ++k) {
    program.out[k] = launch.out[k].data;
    program.outBf16[k] = launch.out[k].dtype == DType::BF16;
    program.store[k] = static_cast<int8_t>(slots.of[static_cast<size_t>(outputs[k])]);
  }
  coalesce(space);
  dispatchFloating(compute, [&](auto tag) {
    using T = decltype(tag);
    dispatchFrame(slots.count, [&](auto s, auto e) {
      constexpr int S = decltype(s)::value, E = decltype(e)::value;
      // 1,024 threads an SM: S x E x sizeof(T) bytes of frame each stay in L1.
      const int64_t tiles = (n + int64_t{kThreads} * E - 1) / (int64_t{kThreads} * E);
      const unsigned blocks = static_cast<unsigned>(
          std::max<int64_t>(1, std::min<int64_t>(tiles, static_cast<int64_t>(launch.device->smCount) * 4)));
      pointwiseKernel<T, S, E><<<blocks, kThreads, 0, launch.device->stream>>>(program, space, n);
    });
  });
  MT_CHECK_LAUNCH(launch);
}

}  // namespace

void addPointwiseKernels(CudaKernelRegistry& registry) {
  registry.add("pointwise", {pointwise, nullptr, nullptr, preparePointwise});
}

}  // namespace megatrain::runtime::cuda
