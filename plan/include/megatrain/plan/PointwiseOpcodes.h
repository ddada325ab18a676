// PointwiseOpcodes.h - the opcodes of a `pointwise` program, alone, so the CUDA backend's run-time compiler can read them too.
//
// The numbers are part of the plan format (PointwiseProgram.h holds the rest
// of the program's definition and its check). This header includes nothing but
// <cstdint>, so NVRTC compiles it as it is (runtime/cuda/PointwiseJit.cpp).
#pragma once

#include <cstdint>

namespace megatrain::pointwise {

// Each computes in the program's compute type (f32 or f64) with the
// expression of the unfused kernel named beside it, so a fused chain gives
// the bits of the unfused chain on the CPU backend.
enum Opcode : int64_t {
  Add = 0,         // a + b                       (add)
  Sub = 1,         // a - b                       (sub)
  Mul = 2,         // a * b                       (mul)
  Div = 3,         // a / b                       (div)
  Max = 4,         // max, NaN propagates, a tie picks a (max)
  Min = 5,         // min, likewise               (min)
  Neg = 6,         // -a                          (neg)
  Sqrt = 7,        //                             (sqrt)
  Reciprocal = 8,  // 1 / a                       (reciprocal)
  Exp = 9,         //                             (exp)
  Log = 10,        //                             (log)
  Erf = 11,        //                             (erf)
  Cos = 12,        //                             (cos)
  Sin = 13,        //                             (sin)
  Tanh = 14,       //                             (tanh)
  Sigmoid = 15,    //                             (sigmoid)
  Relu = 16,       //                             (relu)
  Softplus = 17,   //                             (softplus)
  Silu = 18,       //                             (silu)
  Scale = 19,      // constants[b] * a            (scale)
  Powf = 20,       // a ^ constants[b]            (powf)
  RoundBf16 = 21,  // a rounded to bf16 and back  (cast to bf16, read back exactly)
  Swiglu = 22,     // silu(a) * b                 (swiglu)
  SiluGrad = 23,   // b * silu'(a)                (silu_grad)
  SwigluGradGate = 24,  // c * b * silu'(a)       (swiglu_grad's dgate)
  SwigluGradUp = 25,    // c * silu(a)            (swiglu_grad's dup)
  ReluGrad = 26,   //                             (relu_grad: a = x, b = dy)
  TanhGrad = 27,   //                             (tanh_grad: a = y, b = dy)
  SigmoidGrad = 28,  //                           (sigmoid_grad: a = y, b = dy)
  ErfGrad = 29,    //                             (erf_grad: a = x, b = dy)
  GeluErf = 30,    //                             (gelu, approximate "none")
  GeluTanh = 31,   //                             (gelu, approximate "tanh")
  GeluErfGrad = 32,   //                          (gelu_grad "none": a = x, b = dy)
  GeluTanhGrad = 33,  //                          (gelu_grad "tanh": a = x, b = dy)
  kOpcodeCount = 34,
};

}  // namespace megatrain::pointwise
