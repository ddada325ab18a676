// pointwise.cu - the fused elementwise chain on the GPU: one straight-line program per element, a thread per element.
//
// The program (megatrain/plan/PointwiseProgram.h) travels in the kernel's
// parameters (under 2 KiB: 48 instructions, 16 constants, 8 broadcast
// tables), so every thread reads it from the constant bank and all threads
// take the same branch of the opcode switch at once. Each instruction is the
// expression of the unfused CUDA kernel it stands for (elementwise.cu,
// activation.cu, cast.cu) in the same type T, so the results match the CPU
// twin (cpu/pointwise.cpp) within the elementwise tolerances. The inputs are
// read through one coalesced StridedSpace<8> (numpy broadcasting as stride-0
// dims); bf16 operands are read exactly and written rounded to nearest even.
// Pointers are not __restrict__: the planner may give an output the bytes of
// a dying input.
#include <cstdint>
#include <string>

#include "DeviceMath.cuh"
#include "ElementMath.cuh"
#include "megatrain/kernels/MathConstants.h"
#include "megatrain/plan/PointwiseProgram.h"

namespace megatrain::runtime::cuda {
namespace {

namespace pw = megatrain::pointwise;

// ---- element functions (ElementMath.cuh, shared with activation.cu and cast.cu) ----

__device__ __forceinline__ float log1pOf(float x) { return log1pf(x); }
__device__ __forceinline__ double log1pOf(double x) { return log1p(x); }

// ---- the program as the kernel receives it ----

struct Program {
  int inputs = 0;
  int outputs = 0;
  int count = 0;  // instructions
  int16_t code[pw::kMaxInstructions][pw::kFields] = {};
  int16_t store[pw::kMaxOperands] = {};  // register of each output
  double constants[pw::kMaxConstants] = {};
  const void* in[pw::kMaxOperands] = {};
  void* out[pw::kMaxOperands] = {};
  bool inBf16[pw::kMaxOperands] = {};
  bool outBf16[pw::kMaxOperands] = {};
};

template <typename T>
__device__ __forceinline__ T evaluate(const int16_t (&ins)[pw::kFields], const T* r, const double* constants) {
  const T a = r[ins[1]];
  switch (ins[0]) {
    case pw::Add: return a + r[ins[2]];
    case pw::Sub: return a - r[ins[2]];
    case pw::Mul: return a * r[ins[2]];
    case pw::Div: return a / r[ins[2]];
    case pw::Max: { const T b = r[ins[2]]; return a >= b || a != a ? a : b; }
    case pw::Min: { const T b = r[ins[2]]; return a <= b || a != a ? a : b; }
    case pw::Neg: return -a;
    case pw::Sqrt: return sqrt(a);
    case pw::Reciprocal: return T(1) / a;
    case pw::Exp: return expOf(a);
    case pw::Log: return log(a);
    case pw::Erf: return erf(a);
    case pw::Cos: return cos(a);
    case pw::Sin: return sin(a);
    case pw::Tanh: return tanh(a);
    case pw::Sigmoid: return sigmoidOf(a);
    case pw::Relu: return a > T(0) || a != a ? a : T(0);
    case pw::Softplus: return (a > T(0) ? a : T(0)) + log1pOf(expOf(a > T(0) ? -a : a));
    case pw::Silu: return siluOf(a);
    case pw::Scale: return static_cast<T>(constants[ins[2]] * a);
    case pw::Powf: return pow(a, static_cast<T>(constants[ins[2]]));
    case pw::RoundBf16: return static_cast<T>(bf16BitsToFloat(floatToBf16Bits(static_cast<float>(a))));
    case pw::Swiglu: return siluOf(a) * r[ins[2]];
    case pw::SiluGrad: return r[ins[2]] * siluSlope(a);
    case pw::SwigluGradGate: return r[ins[3]] * r[ins[2]] * siluSlope(a);
    case pw::SwigluGradUp: return r[ins[3]] * siluOf(a);
    case pw::ReluGrad: {
      const T dy = r[ins[2]];
      return a > T(0) ? dy : a != a || dy != dy ? T(a + dy) : T(0);
    }
    case pw::TanhGrad: return r[ins[2]] * (T(1) - a * a);
    case pw::SigmoidGrad: return r[ins[2]] * a * (T(1) - a);
    case pw::ErfGrad: return r[ins[2]] * (T(kTwoOverSqrtPi) * expOf(-(a * a)));
    case pw::GeluErf: return a * geluErfCdf(a);
    case pw::GeluTanh: return a * sigmoidOf(T(2) * geluTanhInner(a));
    case pw::GeluErfGrad: return r[ins[2]] * (geluErfCdf(a) + a * T(kInvSqrt2Pi) * expOf(T(-0.5) * a * a));
    case pw::GeluTanhGrad: return r[ins[2]] * geluTanhSlope(a);
    default: return a;  // unreachable: pointwiseRule checked every opcode
  }
}

// Every output element i: load the inputs through `space`, run the program,
// store the outputs (all [n], row-major).
template <typename T>
__global__ void pointwiseKernel(const Program program, const StridedSpace<pw::kMaxOperands> space, int64_t n) {
  T r[pw::kMaxRegisters];
  for (int64_t i = globalThread(); i < n; i += gridThreads()) {
    int64_t at[pw::kMaxOperands];
    stridedOffsets(space, i, at);
    for (int k = 0; k < program.inputs; ++k)
      r[k] = program.inBf16[k] ? static_cast<T>(bf16BitsToFloat(static_cast<const uint16_t*>(program.in[k])[at[k]]))
                               : static_cast<const T*>(program.in[k])[at[k]];
    for (int j = 0; j < program.count; ++j) r[program.inputs + j] = evaluate(program.code[j], r, program.constants);
    for (int k = 0; k < program.outputs; ++k) {
      const T v = r[program.store[k]];
      if (program.outBf16[k]) static_cast<uint16_t*>(program.out[k])[i] = floatToBf16Bits(static_cast<float>(v));
      else static_cast<T*>(program.out[k])[i] = v;
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

void pointwise(const Launch& launch) {
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
  for (int j = 0; j < program.count; ++j)
    for (int f = 0; f < pw::kFields; ++f) program.code[j][f] = static_cast<int16_t>(code[j * pw::kFields + f]);
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
    program.store[k] = static_cast<int16_t>(outputs[k]);
  }
  coalesce(space);
  dispatchFloating(compute, [&](auto tag) {
    using T = decltype(tag);
    pointwiseKernel<T><<<gridFor(launch, n, kThreads), kThreads, 0, launch.device->stream>>>(program, space, n);
  });
  MT_CHECK_LAUNCH(launch);
}

}  // namespace

void addPointwiseKernels(CudaKernelRegistry& registry) { registry.add("pointwise", {pointwise}); }

}  // namespace megatrain::runtime::cuda
