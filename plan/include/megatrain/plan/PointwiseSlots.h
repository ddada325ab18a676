// PointwiseSlots.h - a pointwise program's registers packed into the fewest slots, by liveness.
//
// A program (PointwiseProgram.h) names a register per input and per
// instruction, up to kMaxRegisters, but only a few hold a live value at any
// point. The CUDA interpreter keeps its registers in a per-thread array that
// the compiler places in local memory (the indices are runtime values); packed
// into a few slots, that array stays small enough to live in L1. packSlots
// renames every register to a slot: inputs take slots 0..inputs-1 (the
// kernel loads them all first); an instruction's result takes the lowest slot
// free after its operands' last reads (an instruction reads its operands
// before it writes, so it may reuse one of theirs); an output's register stays
// live to the end. Constants' indices (Scale, Powf) are left as they are.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "megatrain/plan/PointwiseProgram.h"

namespace megatrain::pointwise {

struct Slots {
  int count = 0;                          // slots used: max live registers
  std::array<int16_t, kMaxRegisters> of{};  // slot of each register (-1: never written)
};

// The slot of every register of a program that checkProgram accepted.
inline Slots packSlots(int inputs, const int64_t* code, size_t instructions, const int64_t* outputs,
                       size_t outputCount) {
  constexpr int kEnd = kMaxInstructions;  // read by an output: live past the last instruction
  std::array<int, kMaxRegisters> lastRead{};
  lastRead.fill(-1);
  for (size_t i = 0; i < instructions; ++i) {
    const int64_t* ins = code + i * kFields;
    const OpcodeInfo* info = opcodeInfo(ins[0]);
    for (int slot = 0; slot < info->registers; ++slot) {
      if (info->constant && slot == 1) continue;
      lastRead[static_cast<size_t>(ins[1 + slot])] = static_cast<int>(i);
    }
  }
  for (size_t k = 0; k < outputCount; ++k) lastRead[static_cast<size_t>(outputs[k])] = kEnd;

  Slots s;
  s.of.fill(-1);
  std::array<bool, kMaxRegisters> busy{};
  for (int r = 0; r < inputs; ++r) {
    s.of[static_cast<size_t>(r)] = static_cast<int16_t>(r);
    busy[static_cast<size_t>(r)] = true;
  }
  s.count = inputs;
  // An input nobody reads frees its slot before the first instruction.
  for (int r = 0; r < inputs; ++r)
    if (lastRead[static_cast<size_t>(r)] < 0) busy[static_cast<size_t>(r)] = false;
  for (size_t i = 0; i < instructions; ++i) {
    const int64_t* ins = code + i * kFields;
    const OpcodeInfo* info = opcodeInfo(ins[0]);
    for (int slot = 0; slot < info->registers; ++slot) {
      if (info->constant && slot == 1) continue;
      const int64_t r = ins[1 + slot];
      if (lastRead[static_cast<size_t>(r)] == static_cast<int>(i)) busy[static_cast<size_t>(s.of[r])] = false;
    }
    const int result = inputs + static_cast<int>(i);
    int free = 0;
    while (busy[static_cast<size_t>(free)]) ++free;
    s.of[static_cast<size_t>(result)] = static_cast<int16_t>(free);
    // A result nobody reads (dead code) gives its slot back at once.
    busy[static_cast<size_t>(free)] = lastRead[static_cast<size_t>(result)] > static_cast<int>(i);
    if (free + 1 > s.count) s.count = free + 1;
  }
  return s;
}

}  // namespace megatrain::pointwise
