// PointwiseJitTest.cpp - the compiled pointwise kernels (PointwiseJit.h) against the interpreter, bit for bit, and against the CPU twin.
//
// Random programs over every opcode, f32 and f64 compute with bf16 inputs and
// outputs mixed in, on each access path the compiled kernels take: all
// operands of the output's shape and 16-byte aligned (vectorized), the same
// with n not a multiple of the vector width (the tail), inputs broadcast
// along a row and a column, and operands at addresses that are not 16-byte
// aligned (the plan packs them back to back, so an odd-sized operand shifts
// the next); and programs whose every operand is bf16. Each case runs once with MEGATRAIN_POINTWISE=interp and once
// with =jit on fresh random inputs; every output byte must agree. The
// roofline table's programs run compiled against the CPU backend.
#include <cmath>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "CudaHarness.h"
#include "PointwiseJit.h"
#include "PointwisePrograms.h"

namespace megatrain::runtime::testing {
namespace {

namespace pw = megatrain::pointwise;
using cuda::PointwiseMode;
using Shape = std::vector<int64_t>;

plan::Attribute floatsAttr(const std::string& name, const std::vector<double>& values) {
  plan::Attribute a;
  a.set_name(name);
  plan::FloatList* list = a.mutable_floats();
  for (double v : values) list->add_values(v);
  return a;
}

// Restores the mode the process had, whatever the case chose.
class PointwiseJit : public ::testing::Test {
 protected:
  PointwiseJit() : saved_(cuda::pointwiseMode()), seed_(testSeed()), rng_(seed_) {}
  ~PointwiseJit() override { cuda::setPointwiseMode(saved_); }

  std::vector<HostTensor> runIn(PointwiseMode mode, const KernelCase& c) {
    cuda::setPointwiseMode(mode);
    return runCase(cudaBackend(), oneKernelPlan(c), c);
  }

  // The case on both paths; "" when every output byte agrees.
  std::string differences(const KernelCase& c) {
    const std::vector<HostTensor> interp = runIn(PointwiseMode::Interp, c);
    const std::vector<HostTensor> jit = runIn(PointwiseMode::Jit, c);
    for (size_t k = 0; k < interp.size(); ++k) {
      // Decoded to double exactly; NaN's payload does not survive that, so NaN equals NaN.
      for (size_t i = 0; i < interp[k].values.size(); ++i) {
        const double x = interp[k].values[i], y = jit[k].values[i];
        if (x == y && std::signbit(x) == std::signbit(y)) continue;
        if (x != x && y != y) continue;
        return "output " + std::to_string(k) + " element " + std::to_string(i) + ": interpreter " +
               std::to_string(x) + ", compiled " + std::to_string(y);
      }
    }
    return "";
  }

  PointwiseMode saved_;
  uint32_t seed_;
  std::mt19937 rng_;
};

struct Layout {
  const char* name;
  Shape shape;
  bool broadcast;  // inputs 1 and 2 take a row and a column of the output
  bool bf16Last;   // every operand in the compute type but the last output, bf16
};

TEST_F(PointwiseJit, RandomProgramsMatchTheInterpreterBitwise) {
  const Layout layouts[] = {
      {"vectorized", {8, 512}, false, false},  // every operand a multiple of 16 bytes: all aligned
      // 1004 elements: f32 and f64 operands end on 16 bytes; with the bf16 output the vector is 8 wide, 4 left over
      {"vectorized tail", {1004}, false, true},
      {"broadcast", {37, 129}, true, false},
      {"unaligned", {17, 33}, false, false},  // 561 elements: the second operand starts at byte 2244 or 1122
  };
  for (const Layout& layout : layouts)
    for (int round = 0; round < 12; ++round) {
      const plan::DType compute = round % 2 ? plan::F64 : plan::F32;
      const int inputs = std::uniform_int_distribution<int>(1, pw::kMaxOperands)(rng_);
      const RandomPointwiseProgram p = randomPointwiseProgram(rng_, inputs, 24, 3);
      const bool allBf16 = round == 11;  // the interpreter computes those in f32
      auto pick = [&] {
        if (allBf16) return plan::BF16;
        if (layout.bf16Last) return compute;
        return std::bernoulli_distribution(0.3)(rng_) ? plan::BF16 : compute;
      };
      KernelCase c{"pointwise", {}, {}, {}};
      for (int k = 0; k < inputs; ++k) {
        Shape shape = layout.shape;
        if (layout.broadcast && k == 1) shape = {layout.shape.back()};
        if (layout.broadcast && k == 2) shape = {layout.shape[0], 1};
        c.inputs.push_back(randomTensor(shape, pick(), rng_, -3, 3));
      }
      for (size_t k = 0; k < p.outputs.size(); ++k) c.outputs.push_back({layout.shape, pick()});
      if (layout.bf16Last) c.outputs.back().second = plan::BF16;
      c.attributes = {intsAttr("code", p.code), floatsAttr("constants", p.constants), intsAttr("outputs", p.outputs)};
      const std::string problem = differences(c);
      EXPECT_EQ(problem, "") << layout.name << ": " << describe(c) << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
    }
}

TEST_F(PointwiseJit, RooflineProgramsMatchTheCpuBackend) {
  const int64_t tokens = 24, hidden = 136, inter = 200;
  for (const PointwiseProgramText& p : rooflinePrograms()) {
    auto operand = [&](char letter) {
      const Shape shape = letter == 'w' ? Shape{hidden} : letter == 'h' || letter == 'H' ? Shape{tokens, inter}
                                                                                       : Shape{tokens, hidden};
      return std::make_pair(shape, letter == 'X' || letter == 'H' ? plan::BF16 : plan::F32);
    };
    KernelCase c{"pointwise", {}, {}, {}};
    for (char letter : p.in) {
      const auto [shape, dtype] = operand(letter);
      c.inputs.push_back(randomTensor(shape, dtype, rng_, -4, 4));
    }
    for (char letter : p.out) c.outputs.push_back(operand(letter));
    c.attributes = {intsAttr("code", p.code), floatsAttr("constants", p.constants), intsAttr("outputs", p.outputs)};
    cuda::setPointwiseMode(PointwiseMode::Jit);
    // One bf16 ulp (2^-8 relative) where an output is bf16, as PointwiseKernelTest allows.
    const bool bf16Out = p.out.find_first_of("XH") != std::string::npos;
    EXPECT_TRUE(cudaMatchesCpu(c, bf16Out ? 1e-2 : 0)) << p.name << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
    EXPECT_EQ(differences(c), "") << p.name << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
  }
}

TEST_F(PointwiseJit, ModeNamesItsSetting) {
  cuda::setPointwiseMode(PointwiseMode::Interp);
  EXPECT_EQ(cuda::pointwiseMode(), PointwiseMode::Interp);
  cuda::setPointwiseMode(PointwiseMode::Jit);
  EXPECT_EQ(cuda::pointwiseMode(), PointwiseMode::Jit);
}

}  // namespace
}  // namespace megatrain::runtime::testing
