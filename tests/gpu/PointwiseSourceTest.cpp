// PointwiseSourceTest.cpp - the compiled pointwise path's source, compiled by NVRTC for sm_90 on a machine with no GPU.
//
// The roofline table's six programs and random programs over every opcode,
// operand dtype and access path go through pointwiseSource and NVRTC with
// the options the backend uses; each must give machine code (an ELF cubin).
// Bad programs and dtypes are rejected with what is wrong. Needs the CUDA
// toolkit's NVRTC, not a GPU (ctest label nvrtc).
#include <algorithm>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "PointwisePrograms.h"
#include "PointwiseSource.h"
#include "megatrain/plan/Error.h"

namespace megatrain::runtime::testing {
namespace {

using cuda::PointwiseSignature;
using kernels::DType;

bool isCubin(const std::string& binary) { return binary.size() > 4 && binary.compare(0, 4, "\x7f" "ELF") == 0; }

DType letterType(char c) { return c == 'X' || c == 'H' ? DType::BF16 : DType::F32; }

PointwiseSignature signatureOf(const PointwiseProgramText& p) {
  PointwiseSignature sig;
  sig.code = p.code;
  sig.constants = p.constants;
  sig.outputs = p.outputs;
  for (char c : p.in) sig.in.push_back(letterType(c));
  for (char c : p.out) sig.out.push_back(letterType(c));
  sig.vectorized = p.in.find('w') == std::string::npos;  // w broadcasts along the rows
  return sig;
}

TEST(PointwiseSource, RooflineProgramsCompileForSm90) {
  for (const PointwiseProgramText& p : rooflinePrograms()) {
    const std::string source = cuda::pointwiseSource(signatureOf(p));
    // Registers are locals, the vectorized path moves 16-byte packs.
    EXPECT_NE(source.find("const T r" + std::to_string(p.outputs[0]) + " = pointwiseOp<"), std::string::npos)
        << p.name << "\n" << source;
    EXPECT_EQ(source.find("uint4") != std::string::npos, signatureOf(p).vectorized) << p.name;
    EXPECT_TRUE(isCubin(cuda::compilePointwiseCubin(source, 9, 0))) << p.name;
  }
}

TEST(PointwiseSource, RandomProgramsCompileForSm90) {
  const uint32_t seed = std::random_device{}();
  std::mt19937 rng(seed);
  for (int round = 0; round < 8; ++round) {
    PointwiseSignature sig;
    const int inputs = std::uniform_int_distribution<int>(1, megatrain::pointwise::kMaxOperands)(rng);
    const RandomPointwiseProgram p = randomPointwiseProgram(rng, inputs, megatrain::pointwise::kMaxInstructions, 4);
    sig.code = p.code;
    sig.constants = p.constants;
    sig.outputs = p.outputs;
    sig.compute = round % 2 ? DType::F64 : DType::F32;
    auto pick = [&] { return std::bernoulli_distribution(0.3)(rng) ? DType::BF16 : sig.compute; };
    for (int k = 0; k < inputs; ++k) sig.in.push_back(pick());
    for (size_t k = 0; k < p.outputs.size(); ++k) sig.out.push_back(pick());
    sig.vectorized = round % 4 < 2;
    const std::string source = cuda::pointwiseSource(sig);
    EXPECT_TRUE(isCubin(cuda::compilePointwiseCubin(source, 9, 0))) << "seed " << seed << "\n" << source;
  }
}

TEST(PointwiseSource, VectorWidthIsSixteenBytesOfTheNarrowestOperand) {
  PointwiseSignature sig;
  sig.code = {megatrain::pointwise::Add, 0, 1, -1};
  sig.outputs = {2};
  sig.in = {DType::F32, DType::F32};
  sig.out = {DType::F32};
  EXPECT_EQ(cuda::pointwiseVectorWidth(sig), 4);
  sig.out = {DType::BF16};
  EXPECT_EQ(cuda::pointwiseVectorWidth(sig), 8);
  sig.compute = DType::F64;
  sig.in = sig.out = {DType::F64};
  sig.in.push_back(DType::F64);
  EXPECT_EQ(cuda::pointwiseVectorWidth(sig), 2);
}

// A bf16 output stores a round_bf16's operand (the store rounds to the same bits); an f32
// output of the same round keeps it, and so does a bf16 output of a chain of two rounds' end.
TEST(PointwiseSource, Bf16OutputsStoreTheRoundsOperand) {
  namespace pw = megatrain::pointwise;
  PointwiseSignature sig;
  // r2 = swiglu(r0, r1), r3 = round_bf16(r2), r4 = round_bf16(r3)
  sig.code = {pw::Swiglu, 0, 1, -1, pw::RoundBf16, 2, -1, -1, pw::RoundBf16, 3, -1, -1};
  sig.in = {DType::BF16, DType::BF16};
  sig.vectorized = true;
  sig.outputs = {3, 3, 4};
  sig.out = {DType::BF16, DType::F32, DType::BF16};
  const std::string source = cuda::pointwiseSource(sig);
  EXPECT_NE(source.find("y[0] = r2;"), std::string::npos) << source;
  EXPECT_NE(source.find("y[1] = r3;"), std::string::npos) << source;
  EXPECT_NE(source.find("y[2] = r2;"), std::string::npos) << source;
  EXPECT_TRUE(isCubin(cuda::compilePointwiseCubin(source, 9, 0)));
}

TEST(PointwiseSource, NvrtcCompilesWithoutContraction) {
  const std::vector<std::string> options = cuda::pointwiseNvrtcOptions(9, 0);
  EXPECT_NE(std::find(options.begin(), options.end(), "--fmad=false"), options.end());
  EXPECT_NE(std::find(options.begin(), options.end(), "--gpu-architecture=sm_90"), options.end());
}

TEST(PointwiseSource, RejectsBadProgramsAndDtypes) {
  PointwiseSignature sig;
  sig.code = {99, 0, -1, -1};
  sig.outputs = {1};
  sig.in = {DType::F32};
  sig.out = {DType::F32};
  try {
    cuda::pointwiseSource(sig);
    FAIL() << "an unknown opcode was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown opcode 99"), std::string::npos) << e.what();
  }
  sig.code = {megatrain::pointwise::Neg, 0, -1, -1};
  sig.in = {DType::I64};
  try {
    cuda::pointwiseSource(sig);
    FAIL() << "an i64 operand was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not f32, f64 or bf16"), std::string::npos) << e.what();
  }
}

TEST(PointwiseSource, NvrtcErrorsCarryTheLog) {
  try {
    cuda::compilePointwiseCubin("extern \"C\" __global__ void megatrain_pointwise() { undeclared(); }", 9, 0);
    FAIL() << "a source that does not compile gave machine code";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("undeclared"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("MEGATRAIN_POINTWISE=interp"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace megatrain::runtime::testing
