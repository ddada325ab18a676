// PointwiseProgram.h - the straight-line program of a `pointwise` kernel: its opcodes and the check every reader runs.
//
// mt-fuse-pointwise writes a chain of elementwise ops as one `pointwise` op
// whose attributes are a program over registers (docs/ops.md, "Fused
// pointwise chains"). Registers 0..inputs-1 hold the inputs (each read
// through its own broadcast against the output shape); instruction i writes
// register inputs + i. `code` holds kFields integers per instruction: the
// opcode, then up to three operand registers (-1 for an unused slot); Scale
// and Powf take their factor or exponent from `constants`, by the index in
// their second slot. `outputs` names the register each output stores.
//
// The numbers are part of the plan format: the compiler writes them, the
// dialect verifier, the plan validator and both backends read them. Append
// new opcodes at the end; never renumber.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "megatrain/plan/PointwiseOpcodes.h"

namespace megatrain::pointwise {

inline constexpr int kFields = 4;            // opcode, a, b, c
inline constexpr int kMaxOperands = 8;       // inputs, and outputs, of one op
inline constexpr int kMaxInstructions = 48;  // so a CUDA launch's program fits its parameters
inline constexpr int kMaxConstants = 16;
inline constexpr int kMaxRegisters = kMaxOperands + kMaxInstructions;

struct OpcodeInfo {
  const char* name;
  int registers;  // operand registers read (slots a, b, c in order)
  bool constant;  // slot b is an index into `constants` (after the one register in a)
};

// nullptr for an unknown opcode.
inline const OpcodeInfo* opcodeInfo(int64_t opcode) {
  static constexpr OpcodeInfo kTable[kOpcodeCount] = {
      {"add", 2, false},        {"sub", 2, false},         {"mul", 2, false},
      {"div", 2, false},        {"max", 2, false},         {"min", 2, false},
      {"neg", 1, false},        {"sqrt", 1, false},        {"reciprocal", 1, false},
      {"exp", 1, false},        {"log", 1, false},         {"erf", 1, false},
      {"cos", 1, false},        {"sin", 1, false},         {"tanh", 1, false},
      {"sigmoid", 1, false},    {"relu", 1, false},        {"softplus", 1, false},
      {"silu", 1, false},       {"scale", 1, true},        {"powf", 1, true},
      {"round_bf16", 1, false}, {"swiglu", 2, false},      {"silu_grad", 2, false},
      {"swiglu_grad_gate", 3, false}, {"swiglu_grad_up", 3, false},
      {"relu_grad", 2, false},  {"tanh_grad", 2, false},   {"sigmoid_grad", 2, false},
      {"erf_grad", 2, false},   {"gelu_erf", 1, false},    {"gelu_tanh", 1, false},
      {"gelu_erf_grad", 2, false}, {"gelu_tanh_grad", 2, false},
  };
  return opcode >= 0 && opcode < kOpcodeCount ? &kTable[opcode] : nullptr;
}

// Empty when the program is well formed for `inputs` inputs and
// `outputCount` outputs; else what is wrong, naming the attribute.
inline std::string checkProgram(int inputs, const int64_t* code, size_t codeSize, size_t constants,
                                const int64_t* outputs, size_t outputCount) {
  if (inputs < 1 || inputs > kMaxOperands)
    return "takes 1 to " + std::to_string(kMaxOperands) + " inputs, not " + std::to_string(inputs);
  if (outputCount < 1 || outputCount > static_cast<size_t>(kMaxOperands))
    return "'outputs' names 1 to " + std::to_string(kMaxOperands) + " registers, not " +
           std::to_string(outputCount);
  if (codeSize % kFields != 0) return "'code' holds " + std::to_string(codeSize) + " integers, not a multiple of 4";
  const size_t count = codeSize / kFields;
  if (count < 1 || count > static_cast<size_t>(kMaxInstructions))
    return "'code' holds " + std::to_string(count) + " instructions, not 1 to " + std::to_string(kMaxInstructions);
  if (constants > static_cast<size_t>(kMaxConstants))
    return "'constants' holds " + std::to_string(constants) + " values, more than " + std::to_string(kMaxConstants);
  for (size_t i = 0; i < count; ++i) {
    const int64_t* ins = code + i * kFields;
    const OpcodeInfo* info = opcodeInfo(ins[0]);
    const std::string at = "instruction " + std::to_string(i);
    if (!info) return at + " has an unknown opcode " + std::to_string(ins[0]);
    const int64_t defined = inputs + static_cast<int64_t>(i);
    for (int slot = 0; slot < 3; ++slot) {
      const int64_t operand = ins[1 + slot];
      if (info->constant && slot == 1) {
        if (operand < 0 || operand >= static_cast<int64_t>(constants))
          return at + " (" + info->name + ") reads constant " + std::to_string(operand) + " of " +
                 std::to_string(constants);
      } else if (slot < info->registers) {
        if (operand < 0 || operand >= defined)
          return at + " (" + info->name + ") reads register " + std::to_string(operand) +
                 ", which is not written before it";
      } else if (operand != -1) {
        return at + " (" + info->name + ") has " + std::to_string(operand) + " in unused slot " +
               std::to_string(slot) + " (-1 expected)";
      }
    }
  }
  const int64_t registers = inputs + static_cast<int64_t>(count);
  for (size_t k = 0; k < outputCount; ++k)
    if (outputs[k] < 0 || outputs[k] >= registers)
      return "output " + std::to_string(k) + " stores register " + std::to_string(outputs[k]) + " of " +
             std::to_string(registers);
  return "";
}

}  // namespace megatrain::pointwise
