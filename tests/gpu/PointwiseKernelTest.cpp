// PointwiseKernelTest.cpp - the fused pointwise kernel on CUDA against its CPU twin on fresh random inputs.
//
// Every opcode alone, f32 and f64, with its second and third inputs broadcast
// (a row and a column of the output), over sizes that do and do not fill
// whole blocks; and a chain with a bf16 input, a stored intermediate and a
// bf16 output, where one bf16 ulp (2^-8 relative) is what a contracted
// multiply-add can move a value across a rounding boundary by. Programs with
// many live registers reach each frame the kernel is built for (8 slots x 4
// elements a thread, 16 x 2, every register x 1), over sizes that are not a
// multiple of a block's elements. Each test runs on both paths: the compiled
// kernels (MEGATRAIN_POINTWISE=jit) and the interpreter (=interp).
#include <random>

#include <gtest/gtest.h>

#include "CudaHarness.h"
#include "PointwiseJit.h"
#include "megatrain/plan/PointwiseProgram.h"

namespace megatrain::runtime::testing {
namespace {

namespace pw = megatrain::pointwise;
using Shape = std::vector<int64_t>;

std::vector<plan::Attribute> program(const std::vector<int64_t>& code, const std::vector<double>& constants,
                                     const std::vector<int64_t>& outputs) {
  return {intsAttr("code", code), floatsAttr("constants", constants), intsAttr("outputs", outputs)};
}

class PointwiseCudaKernel : public ::testing::TestWithParam<cuda::PointwiseMode> {
 protected:
  PointwiseCudaKernel() : saved_(cuda::pointwiseMode()), seed_(testSeed()), rng_(seed_) {
    cuda::setPointwiseMode(GetParam());
  }
  ~PointwiseCudaKernel() override { cuda::setPointwiseMode(saved_); }

  void check(const KernelCase& c, double tol = 0) {
    EXPECT_TRUE(cudaMatchesCpu(c, tol)) << describe(c) << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
  }

  HostTensor uniform(const Shape& shape, plan::DType dtype, double lo, double hi) {
    return randomTensor(shape, dtype, rng_, lo, hi);
  }

  cuda::PointwiseMode saved_;
  uint32_t seed_;
  std::mt19937 rng_;
};

INSTANTIATE_TEST_SUITE_P(Paths, PointwiseCudaKernel,
                         ::testing::Values(cuda::PointwiseMode::Jit, cuda::PointwiseMode::Interp),
                         [](const ::testing::TestParamInfo<cuda::PointwiseMode>& info) {
                           return std::string(info.param == cuda::PointwiseMode::Jit ? "jit" : "interp");
                         });

TEST_P(PointwiseCudaKernel, EveryOpcodeWithBroadcastInputs) {
  for (plan::DType dt : {plan::F32, plan::F64})
    for (const Shape& shape : {Shape{1}, Shape{1000}, Shape{17, 33}, Shape{4, 256, 129}}) {
      // b broadcasts along the last dim's row, c along a column (when rank > 1).
      Shape row = {shape.back()}, column = shape;
      column.back() = 1;
      for (int64_t opcode = 0; opcode < pw::kOpcodeCount; ++opcode) {
        const pw::OpcodeInfo& info = *pw::opcodeInfo(opcode);
        const bool positive = opcode == pw::Sqrt || opcode == pw::Log || opcode == pw::Powf;
        const double lo = positive ? 0.05 : -8, hi = 8;
        std::vector<int64_t> code = {opcode, 0, -1, -1};
        std::vector<HostTensor> inputs = {uniform(shape, dt, lo, hi)};
        if (info.registers >= 2) inputs.push_back(uniform(row, dt, lo, hi)), code[2] = 1;
        if (info.registers >= 3) inputs.push_back(uniform(column, dt, lo, hi)), code[3] = 2;
        std::vector<double> constants;
        if (info.constant) code[2] = 0, constants = {opcode == pw::Powf ? 1.7 : -0.37};
        const int64_t result = static_cast<int64_t>(inputs.size());
        check({"pointwise", inputs, {{shape, dt}}, program(code, constants, {result})});
      }
    }
}

TEST_P(PointwiseCudaKernel, ChainWithBf16InputAndOutputs) {
  for (plan::DType dt : {plan::F32, plan::F64})
    for (const Shape& shape : {Shape{2, 3, 4}, Shape{64, 1031}}) {
      const Shape row = {shape.back()};
      // registers: 0 x, 1 b (row), 2 h (bf16); 3 = x * b, 4 = silu, 5 = scale, 6 = round_bf16, 7 = 3 + h
      const std::vector<int64_t> code = {pw::Mul,       0, 1,  -1, pw::Silu, 3, -1, -1, pw::Scale, 4, 0, -1,
                                         pw::RoundBf16, 5, -1, -1, pw::Add,  3, 2,  -1};
      const HostTensor x = uniform(shape, dt, -6, 6), b = uniform(row, dt, -2, 2);
      const HostTensor h = uniform(shape, plan::BF16, -4, 4);
      check({"pointwise", {x, b, h}, {{shape, plan::BF16}, {shape, dt}}, program(code, {0.37}, {6, 7})}, 1e-2);
      check({"pointwise", {x, b, h}, {{shape, dt}, {shape, dt}}, program(code, {0.37}, {5, 3})});
    }
}

// L products of neighbouring inputs, all live until they are summed, then
// silu of the sum; the first product is an output too. packSlots gives L 1
// eight slots (the 8 x 4 frame), L 12 thirteen (16 x 2), L 24 twenty-five
// (every register x 1).
TEST_P(PointwiseCudaKernel, ManyLiveRegistersReachEveryFrame) {
  for (plan::DType dt : {plan::F32, plan::F64})
    for (const Shape& shape : {Shape{3, 1000}, Shape{257, 129}})
      for (int live : {1, 12, 24}) {
        const Shape row = {shape.back()}, column = {shape[0], 1};
        std::vector<HostTensor> inputs;
        for (int k = 0; k < pw::kMaxOperands; ++k)
          inputs.push_back(uniform(k % 3 == 0 ? shape : k % 3 == 1 ? row : column, k == 2 ? plan::BF16 : dt, -2, 2));
        std::vector<int64_t> code;
        for (int i = 0; i < live; ++i) code.insert(code.end(), {pw::Mul, i % 8, (i + 1) % 8, -1});
        int64_t sum = pw::kMaxOperands;  // register of the first product
        for (int i = 1; i < live; ++i) {
          code.insert(code.end(), {pw::Add, sum, pw::kMaxOperands + i, -1});
          sum = pw::kMaxOperands + static_cast<int64_t>(code.size() / pw::kFields) - 1;
        }
        code.insert(code.end(), {pw::Silu, sum, -1, -1});
        const int64_t last = pw::kMaxOperands + static_cast<int64_t>(code.size() / pw::kFields) - 1;
        check({"pointwise", inputs, {{shape, dt}, {shape, dt}}, program(code, {}, {last, pw::kMaxOperands})});
      }
}

}  // namespace
}  // namespace megatrain::runtime::testing
