// PointwisePrograms.h - pointwise programs the CUDA tests and the kernel bench share: the roofline table's six, and random ones over every opcode.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "megatrain/plan/PointwiseProgram.h"

namespace megatrain::runtime::testing {

struct PointwiseProgramText {
  std::string name;
  std::vector<int64_t> code;
  std::vector<double> constants;
  std::vector<int64_t> outputs;
  // One letter an operand, in order: x [tokens, hidden] f32, X the same in
  // bf16, h [tokens, intermediate] f32, H the same in bf16, w [hidden] f32.
  std::string in, out;
};

// The pointwise programs of one layer's step that gpu_kernel_bench --roofline times.
inline std::vector<PointwiseProgramText> rooflinePrograms() {
  namespace pw = megatrain::pointwise;
  return {
      {"residual add", {pw::Add, 0, 1, -1}, {}, {2}, "xx", "x"},
      {"add + bf16 copy", {pw::Add, 0, 1, -1, pw::RoundBf16, 2, -1, -1}, {}, {2, 3}, "xx", "xX"},
      {"swiglu -> bf16", {pw::Swiglu, 0, 1, -1}, {}, {2}, "hh", "H"},
      {"swiglu grads", {pw::SwigluGradGate, 0, 1, 2, pw::SwigluGradUp, 0, 1, 2}, {}, {3, 4}, "hhh", "hh"},
      {"x*w, silu, scale, +x",
       {pw::Mul, 0, 1, -1, pw::Silu, 2, -1, -1, pw::Scale, 3, 0, -1, pw::Add, 4, 0, -1}, {0.5}, {5}, "xw", "x"},
      {"bf16 gate, up -> swiglu", {pw::Swiglu, 0, 1, -1}, {}, {2}, "HH", "H"},
      // The Llama plans' --bf16-activations forms: every operand bf16, each result rounded to bf16.
      {"bf16 swiglu, rounded", {pw::Swiglu, 0, 1, -1, pw::RoundBf16, 2, -1, -1}, {}, {3}, "HH", "H"},
      {"bf16 swiglu grads, rounded",
       {pw::SwigluGradGate, 0, 1, 2, pw::SwigluGradUp, 0, 1, 2, pw::RoundBf16, 3, -1, -1, pw::RoundBf16, 4, -1, -1},
       {}, {5, 6}, "HHH", "HH"},
  };
}

// A random well-formed program over every opcode: `inputs` inputs, 1 to
// `longest` instructions reading mostly recent registers, Scale and Powf
// constants, 1 to `outputs` outputs anywhere (inputs too), dead code.
struct RandomPointwiseProgram {
  std::vector<int64_t> code, outputs;
  std::vector<double> constants;
};

inline RandomPointwiseProgram randomPointwiseProgram(std::mt19937& rng, int inputs, int longest, int outputs) {
  namespace pw = megatrain::pointwise;
  RandomPointwiseProgram p;
  p.constants = {0.375, -1.25, 2.0, 1.7};
  const int count = std::uniform_int_distribution<int>(1, longest)(rng);
  for (int i = 0; i < count; ++i) {
    const int64_t op = std::uniform_int_distribution<int64_t>(0, pw::kOpcodeCount - 1)(rng);
    const pw::OpcodeInfo& info = *pw::opcodeInfo(op);
    const int defined = inputs + i;
    auto pick = [&] {
      if (std::bernoulli_distribution(0.7)(rng))
        return std::max(0, defined - 1 - std::uniform_int_distribution<int>(0, 2)(rng));
      return std::uniform_int_distribution<int>(0, defined - 1)(rng);
    };
    int64_t ins[pw::kFields] = {op, -1, -1, -1};
    for (int slot = 0; slot < info.registers; ++slot) ins[1 + slot] = pick();
    if (info.constant) ins[2] = std::uniform_int_distribution<int>(0, 3)(rng);
    p.code.insert(p.code.end(), ins, ins + pw::kFields);
  }
  const int stored = std::uniform_int_distribution<int>(1, outputs)(rng);
  for (int k = 0; k < stored; ++k)
    p.outputs.push_back(k == 0 ? inputs + count - 1 : std::uniform_int_distribution<int>(0, inputs + count - 1)(rng));
  return p;
}

}  // namespace megatrain::runtime::testing
