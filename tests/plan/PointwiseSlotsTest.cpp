// PointwiseSlotsTest.cpp - packSlots (PointwiseSlots.h): a program run on its packed slots gives what it gives on its registers.
//
// Random well-formed programs (1 to 8 inputs, 1 to 48 instructions of every
// arity, constants, outputs anywhere, dead code) are run twice by a small
// interpreter over doubles: once on the registers as written, once on the
// slots packSlots assigns. Every output must agree bit for bit, and no slot
// may be used past the count it reports; a long chain must pack into few.
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "megatrain/plan/PointwiseProgram.h"
#include "megatrain/plan/PointwiseSlots.h"

namespace megatrain::pointwise {
namespace {

// A few opcodes of each arity, enough to make renaming mistakes visible.
double apply(int64_t op, double a, double b, double c, double k) {
  switch (op) {
    case Add: return a + b;
    case Sub: return a - b;
    case Mul: return a * b;
    case Neg: return -a;
    case Scale: return k * a;
    case SwigluGradUp: return c * a + 0.5 * b;  // any function of three operands
    default: return a;
  }
}

struct Random {
  int inputs;
  std::vector<int64_t> code, outputs;
  std::vector<double> constants;
};

Random randomProgram(std::mt19937& rng) {
  Random p;
  p.inputs = std::uniform_int_distribution<int>(1, kMaxOperands)(rng);
  const int count = std::uniform_int_distribution<int>(1, kMaxInstructions)(rng);
  p.constants = {0.25, -3.0};
  const int64_t ops[] = {Add, Sub, Mul, Neg, Scale, SwigluGradUp};
  for (int i = 0; i < count; ++i) {
    const int64_t op = ops[std::uniform_int_distribution<int>(0, 5)(rng)];
    const OpcodeInfo& info = *opcodeInfo(op);
    // Mostly recent registers, sometimes any earlier one (long lifetimes).
    auto pick = [&] {
      const int defined = p.inputs + i;
      if (std::bernoulli_distribution(0.7)(rng)) return std::max(0, defined - 1 - std::uniform_int_distribution<int>(0, 2)(rng));
      return std::uniform_int_distribution<int>(0, defined - 1)(rng);
    };
    int64_t ins[kFields] = {op, -1, -1, -1};
    for (int slot = 0; slot < info.registers; ++slot) ins[1 + slot] = pick();
    if (info.constant) ins[2] = std::uniform_int_distribution<int>(0, 1)(rng);
    p.code.insert(p.code.end(), ins, ins + kFields);
  }
  const int outputs = std::uniform_int_distribution<int>(1, kMaxOperands)(rng);
  for (int k = 0; k < outputs; ++k)
    p.outputs.push_back(std::uniform_int_distribution<int>(0, p.inputs + count - 1)(rng));
  return p;
}

// Runs the program; `slotOf` renames registers (identity when null).
std::vector<double> run(const Random& p, const std::vector<double>& inputs, const Slots* slots) {
  const size_t count = p.code.size() / kFields;
  std::vector<double> file(kMaxRegisters, std::nan(""));
  auto at = [&](int64_t reg) -> double& { return file[static_cast<size_t>(slots ? slots->of[reg] : reg)]; };
  for (int k = 0; k < p.inputs; ++k) at(k) = inputs[static_cast<size_t>(k)];
  for (size_t i = 0; i < count; ++i) {
    const int64_t* ins = &p.code[i * kFields];
    const OpcodeInfo& info = *opcodeInfo(ins[0]);
    double v[3] = {0, 0, 0};
    for (int slot = 0; slot < info.registers; ++slot)
      if (!(info.constant && slot == 1)) v[slot] = at(ins[1 + slot]);
    const double k = info.constant ? p.constants[static_cast<size_t>(ins[2])] : 0;
    at(p.inputs + static_cast<int64_t>(i)) = apply(ins[0], v[0], v[1], v[2], k);
  }
  std::vector<double> out;
  for (int64_t r : p.outputs) out.push_back(at(r));
  return out;
}

TEST(PointwiseSlots, RandomProgramsGiveTheSameOutputsOnTheirSlots) {
  std::mt19937 rng(20261202);
  for (int trial = 0; trial < 2000; ++trial) {
    const Random p = randomProgram(rng);
    const size_t count = p.code.size() / kFields;
    ASSERT_EQ(checkProgram(p.inputs, p.code.data(), p.code.size(), p.constants.size(), p.outputs.data(),
                           p.outputs.size()),
              "");
    const Slots slots = packSlots(p.inputs, p.code.data(), count, p.outputs.data(), p.outputs.size());
    ASSERT_GE(slots.count, p.inputs);
    ASSERT_LE(slots.count, p.inputs + static_cast<int>(count));
    for (int r = 0; r < p.inputs + static_cast<int>(count); ++r) {
      ASSERT_GE(slots.of[static_cast<size_t>(r)], 0) << "register " << r << " has no slot";
      ASSERT_LT(slots.of[static_cast<size_t>(r)], slots.count) << "register " << r;
    }
    std::vector<double> inputs;
    for (int k = 0; k < p.inputs; ++k) inputs.push_back(std::uniform_real_distribution<double>(-2, 2)(rng));
    const std::vector<double> expected = run(p, inputs, nullptr), actual = run(p, inputs, &slots);
    for (size_t k = 0; k < expected.size(); ++k)
      ASSERT_EQ(expected[k], actual[k]) << "trial " << trial << ", output " << k;
  }
}

TEST(PointwiseSlots, ALongChainPacksIntoOneSlot) {
  // x -> neg -> neg -> ... 40 times; the output is the last register.
  std::vector<int64_t> code;
  for (int i = 0; i < 40; ++i) code.insert(code.end(), {Neg, i, -1, -1});
  const int64_t output = 40;
  const Slots slots = packSlots(1, code.data(), 40, &output, 1);
  EXPECT_EQ(slots.count, 1);  // each result takes the slot its operand just freed
  EXPECT_EQ(slots.of[40], 0);
}

TEST(PointwiseSlots, OutputsAndLaterReadsKeepTheirSlots) {
  // r0 x; r1 = -x (an output); r2 = x * x; r3 = r2 + r1: r1 must survive r2.
  const std::vector<int64_t> code = {Neg, 0, -1, -1, Mul, 0, 0, -1, Add, 2, 1, -1};
  const int64_t outputs[] = {1, 3};
  const Slots slots = packSlots(1, code.data(), 3, outputs, 2);
  EXPECT_NE(slots.of[1], slots.of[2]);
  EXPECT_NE(slots.of[1], slots.of[3]);
  EXPECT_EQ(slots.count, 2);
}

// The programs of tests/gpu/PointwiseKernelTest.cpp's ManyLiveRegistersReachEveryFrame:
// L products of the 8 inputs' neighbours, summed, then silu; outputs the last
// and the first product. Their slot counts pick the CUDA kernel's frame (8, 16, all).
TEST(PointwiseSlots, TheGpuTestsProgramsReachEachFrame) {
  const std::pair<int, int> liveAndSlots[] = {{1, 8}, {12, 13}, {24, 25}};
  for (const auto& [live, expected] : liveAndSlots) {
    std::vector<int64_t> code;
    for (int i = 0; i < live; ++i) code.insert(code.end(), {Mul, i % 8, (i + 1) % 8, -1});
    int64_t sum = kMaxOperands;
    for (int i = 1; i < live; ++i) {
      code.insert(code.end(), {Add, sum, kMaxOperands + i, -1});
      sum = kMaxOperands + static_cast<int64_t>(code.size() / kFields) - 1;
    }
    code.insert(code.end(), {Silu, sum, -1, -1});
    const int64_t outputs[] = {kMaxOperands + static_cast<int64_t>(code.size() / kFields) - 1, kMaxOperands};
    ASSERT_EQ(checkProgram(8, code.data(), code.size(), 0, outputs, 2), "");
    EXPECT_EQ(packSlots(8, code.data(), code.size() / kFields, outputs, 2).count, expected) << "L " << live;
  }
}

}  // namespace
}  // namespace megatrain::pointwise
