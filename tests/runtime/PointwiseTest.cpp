// PointwiseTest.cpp - the CPU pointwise interpreter gives bitwise the results of the unfused kernels it stands for.
//
// Every opcode alone (f32 and f64) against its unfused kernel, a chain with
// broadcast inputs, a bf16 input and bf16 outputs against the same ops run one
// kernel at a time, and the errors of a malformed program, all on fresh random data.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "TestUtil.h"
#include "megatrain/plan/PointwiseProgram.h"

namespace megatrain::runtime::testing {
namespace {

namespace pw = megatrain::pointwise;

std::vector<plan::Attribute> program(const std::vector<int64_t>& code, const std::vector<double>& constants,
                                     const std::vector<int64_t>& outputs) {
  return {intsAttr("code", code), floatsAttr("constants", constants), intsAttr("outputs", outputs)};
}

// The unfused kernel an opcode stands for: its name, attributes and which output it is.
struct Unfused {
  std::string kernel;
  std::vector<plan::Attribute> attributes;
  int operands = 1;
  int output = 0;
  int outputs = 1;
};

Unfused unfusedOf(int64_t opcode, double constant) {
  switch (opcode) {
    case pw::Add: return {"add", {}, 2};
    case pw::Sub: return {"sub", {}, 2};
    case pw::Mul: return {"mul", {}, 2};
    case pw::Div: return {"div", {}, 2};
    case pw::Max: return {"max", {}, 2};
    case pw::Min: return {"min", {}, 2};
    case pw::Neg: return {"neg"};
    case pw::Sqrt: return {"sqrt"};
    case pw::Reciprocal: return {"reciprocal"};
    case pw::Exp: return {"exp"};
    case pw::Log: return {"log"};
    case pw::Erf: return {"erf"};
    case pw::Cos: return {"cos"};
    case pw::Sin: return {"sin"};
    case pw::Tanh: return {"tanh"};
    case pw::Sigmoid: return {"sigmoid"};
    case pw::Relu: return {"relu"};
    case pw::Softplus: return {"softplus"};
    case pw::Silu: return {"silu"};
    case pw::Scale: return {"scale", {floatAttr("alpha", constant)}};
    case pw::Powf: return {"powf", {floatAttr("exponent", constant)}};
    case pw::RoundBf16: return {"cast"};  // to bf16, then read back (below)
    case pw::Swiglu: return {"swiglu", {}, 2};
    case pw::SiluGrad: return {"silu_grad", {}, 2};
    case pw::SwigluGradGate: return {"swiglu_grad", {}, 3, 0, 2};
    case pw::SwigluGradUp: return {"swiglu_grad", {}, 3, 1, 2};
    case pw::ReluGrad: return {"relu_grad", {}, 2};
    case pw::TanhGrad: return {"tanh_grad", {}, 2};
    case pw::SigmoidGrad: return {"sigmoid_grad", {}, 2};
    case pw::ErfGrad: return {"erf_grad", {}, 2};
    case pw::GeluErf: return {"gelu", {stringAttr("approximate", "none")}};
    case pw::GeluTanh: return {"gelu", {stringAttr("approximate", "tanh")}};
    case pw::GeluErfGrad: return {"gelu_grad", {stringAttr("approximate", "none")}, 2};
    case pw::GeluTanhGrad: return {"gelu_grad", {stringAttr("approximate", "tanh")}, 2};
    default: return {};
  }
}

class PointwiseTest : public ::testing::TestWithParam<plan::DType> {};

TEST_P(PointwiseTest, EveryOpcodeIsItsUnfusedKernelBitForBit) {
  const plan::DType dtype = GetParam();
  std::mt19937 rng(std::random_device{}());
  const std::vector<int64_t> shape = {3, 7};
  for (int64_t opcode = 0; opcode < pw::kOpcodeCount; ++opcode) {
    const pw::OpcodeInfo& info = *pw::opcodeInfo(opcode);
    // Positive operands where the unfused op is only defined there; a few
    // exact zeros and ties for relu, max and min.
    const bool positive = opcode == pw::Sqrt || opcode == pw::Log || opcode == pw::Powf;
    std::vector<HostTensor> inputs;
    for (int k = 0; k < 3; ++k) inputs.push_back(randomTensor(shape, dtype, rng, positive ? 0.05 : -5, 5));
    inputs[0].values[0] = 0;
    inputs[1].values[1] = inputs[0].values[1];
    const double constant = opcode == pw::Powf ? 1.7 : -0.37;
    const Unfused unfused = unfusedOf(opcode, constant);
    ASSERT_FALSE(unfused.kernel.empty()) << info.name;

    std::vector<int64_t> code = {opcode, 0, -1, -1};
    for (int slot = 1; slot < info.registers; ++slot) code[1 + slot] = slot;
    std::vector<double> constants;
    if (info.constant) {
      code[2] = 0;
      constants = {constant};
    }
    const std::vector<HostTensor> used(inputs.begin(), inputs.begin() + info.registers);
    const std::vector<double> fused =
        runKernel("pointwise", used, {{shape, dtype}}, program(code, constants, {info.registers}))[0].values;

    std::vector<double> expected;
    if (opcode == pw::RoundBf16) {
      const HostTensor bf16 = runKernel("cast", {inputs[0]}, {{shape, plan::BF16}})[0];
      expected = runKernel("cast", {bf16}, {{shape, dtype}})[0].values;
    } else {
      const std::vector<HostTensor> operands(inputs.begin(), inputs.begin() + unfused.operands);
      std::vector<OutputSpec> outs(unfused.outputs, OutputSpec{shape, dtype});
      expected = runKernel(unfused.kernel, operands, outs, unfused.attributes)[unfused.output].values;
    }
    expectSameBits(fused, expected, info.name);
  }
}

// x * b + s, silu, scale, stored as bf16; and (x * b + s) + h with h a bf16
// input: broadcasts of b [4] and s [3, 1] against [2, 3, 4], a register that
// is both read on and stored, a bf16 input and a bf16 output.
TEST_P(PointwiseTest, ChainWithBroadcastsAndBf16MatchesTheUnfusedKernels) {
  const plan::DType dtype = GetParam();
  std::mt19937 rng(std::random_device{}());
  const std::vector<int64_t> shape = {2, 3, 4};
  const HostTensor x = randomTensor(shape, dtype, rng, -3, 3);
  const HostTensor b = randomTensor({4}, dtype, rng, -3, 3);
  const HostTensor s = randomTensor({3, 1}, dtype, rng, -3, 3);
  const HostTensor hWide = randomTensor(shape, dtype, rng, -3, 3);
  const HostTensor h = runKernel("cast", {hWide}, {{shape, plan::BF16}})[0];

  // registers: 0 x, 1 b, 2 s, 3 h; 4 = x * b, 5 = + s, 6 = silu, 7 = scale, 8 = round_bf16, 9 = 5 + h
  const std::vector<int64_t> code = {pw::Mul,       0, 1,  -1, pw::Add,       4, 2,  -1,
                                     pw::Silu,      5, -1, -1, pw::Scale,     6, 0,  -1,
                                     pw::RoundBf16, 7, -1, -1, pw::Add,       5, 3,  -1};
  const std::vector<HostTensor> fused =
      runKernel("pointwise", {x, b, s, h}, {{shape, plan::BF16}, {shape, dtype}, {shape, dtype}},
                program(code, {0.37}, {8, 9, 5}));

  const HostTensor t = runKernel("mul", {x, b}, {{shape, dtype}})[0];
  const HostTensor u = runKernel("add", {t, s}, {{shape, dtype}})[0];
  const HostTensor v = runKernel("silu", {u}, {{shape, dtype}})[0];
  const HostTensor w = runKernel("scale", {v}, {{shape, dtype}}, {floatAttr("alpha", 0.37)})[0];
  const HostTensor wb = runKernel("cast", {w}, {{shape, plan::BF16}})[0];
  const HostTensor hw = runKernel("cast", {h}, {{shape, dtype}})[0];
  const HostTensor z = runKernel("add", {u, hw}, {{shape, dtype}})[0];
  expectSameBits(fused[0].values, wb.values, "bf16 output");
  expectSameBits(fused[1].values, z.values, "sum with the bf16 input");
  expectSameBits(fused[2].values, u.values, "intermediate stored");
}

INSTANTIATE_TEST_SUITE_P(FloatTypes, PointwiseTest, ::testing::Values(plan::F32, plan::F64),
                         [](const auto& info) { return info.param == plan::F32 ? "f32" : "f64"; });

TEST(PointwiseErrors, NameWhatIsWrong) {
  std::mt19937 rng(3);
  const HostTensor x = randomTensor({2, 4}, plan::F32, rng);
  const HostTensor d = randomTensor({2, 4}, plan::F64, rng);
  const HostTensor col = randomTensor({4, 1}, plan::F32, rng);
  EXPECT_EQ(kernelError("pointwise", {x}, {{{2, 4}, plan::F32}}, program({pw::Add, 0, 1, -1}, {}, {1})),
            "pointwise: instruction 0 (add) reads register 1, which is not written before it");
  EXPECT_EQ(kernelError("pointwise", {x}, {{{2, 4}, plan::F32}}, program({77, 0, -1, -1}, {}, {1})),
            "pointwise: instruction 0 has an unknown opcode 77");
  EXPECT_EQ(kernelError("pointwise", {x, col}, {{{2, 4}, plan::F32}}, program({pw::Add, 0, 1, -1}, {}, {2})),
            "pointwise: input 'in1' has shape [4, 1], which does not broadcast to [2, 4]");
  EXPECT_EQ(kernelError("pointwise", {x, d}, {{{2, 4}, plan::F32}}, program({pw::Add, 0, 1, -1}, {}, {2})),
            "pointwise: operand 'in1' is f64 but another is f32: one compute type per chain");
  EXPECT_EQ(kernelError("pointwise", {x}, {{{2, 4}, plan::F32}, {{2, 4}, plan::F32}},
                        program({pw::Neg, 0, -1, -1}, {}, {1})),
            "pointwise: 'outputs' names 1 registers for 2 outputs");
}

}  // namespace
}  // namespace megatrain::runtime::testing
