// pointwise.cpp - the fused elementwise chain: one straight-line program (megatrain/plan/PointwiseProgram.h) per element.
//
// Every instruction evaluates the expression of the unfused CPU kernel it
// stands for (elementwise.cpp, activation.cpp, cast.cpp), in the same compute
// type T and order, and rounds to T as that kernel's store did; so a plan
// with fused chains gives bitwise the losses of the unfused plan
// (tests/e2e/fuse_pointwise_bitwise.sh). A bf16 operand is read exactly and a
// bf16 result rounds to nearest even, as `cast` does. The walk keeps one
// offset per input (numpy broadcasting), so nothing is allocated.
#include <cmath>
#include <cstring>

#include "ActivationMath.h"
#include "CpuKernel.h"
#include "megatrain/kernels/MathConstants.h"
#include "megatrain/plan/Bf16.h"
#include "megatrain/plan/PointwiseProgram.h"

namespace megatrain::runtime::cpu {
namespace {

namespace pw = megatrain::pointwise;

// ---- element functions: the unfused kernels' expressions (ActivationMath.h) ----

// cast's f32/f64 -> bf16 (an f64 rounds to f32 first), read back exactly.
template <typename T>
T roundBf16(T x) { return static_cast<T>(bf16ToFloat(floatToBf16(static_cast<float>(x)))); }

// One instruction; `ins` is its kFields integers, r the registers.
template <typename T>
T evaluate(const int64_t* ins, const T* r, const double* constants) {
  const T a = r[ins[1]];
  // Slots b and c are read only by the opcodes that have them.
  switch (ins[0]) {
    case pw::Add: return static_cast<T>(a + r[ins[2]]);
    case pw::Sub: return static_cast<T>(a - r[ins[2]]);
    case pw::Mul: return static_cast<T>(a * r[ins[2]]);
    case pw::Div: return static_cast<T>(a / r[ins[2]]);
    case pw::Max: { const T b = r[ins[2]]; return a >= b || std::isnan(a) ? a : b; }
    case pw::Min: { const T b = r[ins[2]]; return a <= b || std::isnan(a) ? a : b; }
    case pw::Neg: return -a;
    case pw::Sqrt: return std::sqrt(a);
    case pw::Reciprocal: return T(1) / a;
    case pw::Exp: return std::exp(a);
    case pw::Log: return std::log(a);
    case pw::Erf: return std::erf(a);
    case pw::Cos: return std::cos(a);
    case pw::Sin: return std::sin(a);
    case pw::Tanh: return std::tanh(a);
    case pw::Sigmoid: return sigmoidOf(a);
    case pw::Relu: return a > 0 || a != a ? a : T(0);
    case pw::Softplus: return (a > 0 ? a : T(0)) + std::log1p(std::exp(-std::fabs(a)));
    case pw::Silu: return siluOf(a);
    case pw::Scale: return static_cast<T>(constants[ins[2]] * a);
    case pw::Powf: return std::pow(a, static_cast<T>(constants[ins[2]]));
    case pw::RoundBf16: return roundBf16(a);
    case pw::Swiglu: return siluOf(a) * r[ins[2]];
    case pw::SiluGrad: return r[ins[2]] * siluSlope(a);
    case pw::SwigluGradGate: return r[ins[3]] * r[ins[2]] * siluSlope(a);
    case pw::SwigluGradUp: return r[ins[3]] * siluOf(a);
    case pw::ReluGrad: {
      const T dy = r[ins[2]];
      return a > 0 ? dy : a != a || dy != dy ? a + dy : T(0);
    }
    case pw::TanhGrad: return r[ins[2]] * (T(1) - a * a);
    case pw::SigmoidGrad: return r[ins[2]] * a * (T(1) - a);
    case pw::ErfGrad: return r[ins[2]] * (T(kTwoOverSqrtPi) * std::exp(-(a * a)));
    case pw::GeluErf: return a * geluErfCdf(a);
    case pw::GeluTanh: return a * sigmoidOf(T(2) * geluTanhInner(a));
    case pw::GeluErfGrad:
      return r[ins[2]] * geluErfSlope(a);
    case pw::GeluTanhGrad: return r[ins[2]] * geluTanhSlope(a);
    default: return a;  // unreachable: pointwiseRule checked every opcode
  }
}

template <typename T>
T load(const Operand& operand, int64_t offset) {
  if (operand.dtype == DType::BF16) return static_cast<T>(bf16ToFloat(operand.as<const uint16_t>()[offset]));
  return operand.as<const T>()[offset];
}

template <typename T>
void store(const Operand& operand, int64_t i, T value) {
  if (operand.dtype == DType::BF16) operand.as<uint16_t>()[i] = floatToBf16(static_cast<float>(value));
  else operand.as<T>()[i] = value;
}

template <typename T>
void pointwiseImpl(const KernelArgs& args) {
  const std::vector<int64_t>& code = args.attrs.getInts("code");
  const std::vector<int64_t>& outputs = args.attrs.getInts("outputs");
  const double* constants = args.attrs.getFloats("constants").data();
  const int inputs = args.numIn;
  const int count = static_cast<int>(code.size()) / pw::kFields;
  const Shape& shape = args.out[0].shape;
  const int64_t n = shape.elements();
  if (n == 0) return;
  int64_t strides[pw::kMaxOperands][kMaxRank] = {};
  for (int k = 0; k < inputs; ++k) broadcastStrides(args.in[k].shape, shape, strides[k]);
  int64_t index[kMaxRank] = {};
  int64_t offset[pw::kMaxOperands] = {};
  T r[pw::kMaxRegisters];
  for (int64_t i = 0; i < n; ++i) {
    for (int k = 0; k < inputs; ++k) r[k] = load<T>(args.in[k], offset[k]);
    for (int j = 0; j < count; ++j) r[inputs + j] = evaluate(code.data() + j * pw::kFields, r, constants);
    for (int k = 0; k < args.numOut; ++k) store(args.out[k], i, r[outputs[k]]);
    // The next element's input offsets: an odometer over the output's dims.
    for (int d = shape.rank - 1; d >= 0; --d) {
      for (int k = 0; k < inputs; ++k) offset[k] += strides[k][d];
      if (++index[d] < shape.dims[d]) break;
      for (int k = 0; k < inputs; ++k) offset[k] -= strides[k][d] * shape.dims[d];
      index[d] = 0;
    }
  }
}

// The compute type: f64 if any operand is f64, else f32; bf16 operands are
// read and written through it, and anything else is refused.
void pointwise(const KernelArgs& args) {
  DType compute = DType::Unspecified;
  auto visit = [&](const Operand& operand) {
    if (operand.dtype == DType::BF16) return;
    if (operand.dtype != DType::F32 && operand.dtype != DType::F64)
      fail(args, std::string("operand '") + operand.name + "' is " + dtypeLabel(operand.dtype) +
                     ", the CPU backend computes pointwise chains on f32, f64 and bf16");
    if (compute != DType::Unspecified && operand.dtype != compute)
      fail(args, std::string("operand '") + operand.name + "' is " + dtypeLabel(operand.dtype) + " but another is " +
                     dtypeLabel(compute) + ": one compute type per chain");
    compute = operand.dtype;
  };
  for (int k = 0; k < args.numIn; ++k) visit(args.in[k]);
  for (int k = 0; k < args.numOut; ++k) visit(args.out[k]);
  dispatchFloating(compute, [&](auto tag) { pointwiseImpl<decltype(tag)>(args); });
}

}  // namespace

void addPointwiseKernels(CpuKernelRegistry& registry) { registry.add("pointwise", {pointwise}); }

}  // namespace megatrain::runtime::cpu
