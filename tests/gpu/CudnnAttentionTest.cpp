// CudnnAttentionTest.cpp - bf16 attention and attention_grad on cuDNN's fused path against the CPU twin, its batch slices, and the fallback where cuDNN declines.
//
// MEGATRAIN_ATTENTION=cudnn makes the cuDNN path a requirement (a declined
// step is an Error), so a passing case ran on cuDNN. Bounds are the bf16
// GEMM path's, relative to each output's scale (CudaHarness): 1.5e-2 for y
// and lse, 2e-2 for the gradients. Shapes: multi-head, grouped- and
// multi-query, head dims 64, 128 and 256, causal and not, sequence lengths
// that are no tile's multiple (77, 300), fewer and more keys than queries.
// The gradient runs on the CPU forward's y and lse with a fresh dy, so lse
// means the same on both sides (natural-log logsumexp of the scaled scores).
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "CudaHarness.h"
#include "CudnnAttention.h"

namespace megatrain::runtime::testing {
namespace {

using Shape = std::vector<int64_t>;

struct Case {
  int64_t b, hq, hkv, sq, skv, d;
  bool causal;
};

std::string text(const Case& c) {
  return "B " + std::to_string(c.b) + " Hq " + std::to_string(c.hq) + " Hkv " + std::to_string(c.hkv) + " Sq " +
         std::to_string(c.sq) + " Skv " + std::to_string(c.skv) + " D " + std::to_string(c.d) +
         (c.causal ? " causal" : "");
}

class CudnnAttentionTest : public ::testing::Test {
 protected:
  CudnnAttentionTest() : seed_(testSeed()), rng_(seed_) {}

  std::vector<plan::Attribute> attrs(const Case& c) const {
    return {floatAttr("scale", 1.0 / std::sqrt(static_cast<double>(c.d))), intAttr("causal", c.causal ? 1 : 0),
            stringAttr("precision", "bf16")};
  }

  KernelCase forward(const Case& c) {
    const Shape q{c.b, c.hq, c.sq, c.d}, kv{c.b, c.hkv, c.skv, c.d}, lse{c.b, c.hq, c.sq};
    return {"attention", {uniform(q), uniform(kv), uniform(kv)}, {{q, plan::F32}, {lse, plan::F32}}, attrs(c)};
  }

  // The gradient of a forward case, on the CPU forward's y and lse.
  KernelCase backward(const Case& c, const KernelCase& fwd) {
    const Shape q{c.b, c.hq, c.sq, c.d}, kv{c.b, c.hkv, c.skv, c.d};
    const std::vector<HostTensor> y = runKernel("attention", fwd.inputs, fwd.outputs, attrs(c));
    return {"attention_grad",
            {fwd.inputs[0], fwd.inputs[1], fwd.inputs[2], y[0], y[1], uniform(q)},
            {{q, plan::F32}, {kv, plan::F32}, {kv, plan::F32}},
            attrs(c)};
  }

  void check(const Case& c) {
    const KernelCase fwd = forward(c);
    EXPECT_TRUE(cudaMatchesCpu(fwd, 1.5e-2)) << text(c) << " forward (MEGATRAIN_TEST_SEED=" << seed_ << ")";
    const KernelCase bwd = backward(c, fwd);
    EXPECT_TRUE(cudaMatchesCpu(bwd, 2e-2)) << text(c) << " backward (MEGATRAIN_TEST_SEED=" << seed_ << ")";
  }

  HostTensor uniform(const Shape& shape) { return randomTensor(shape, plan::F32, rng_, -2.0, 2.0); }

  uint32_t seed_;
  std::mt19937 rng_;
};

TEST_F(CudnnAttentionTest, BuiltWithCudnn) {
  EXPECT_TRUE(cuda::CudnnAttention::built())
      << "this binary has no cuDNN attention: configure with cuDNN 9 and the nvidia-cudnn-frontend headers";
}

TEST_F(CudnnAttentionTest, AgainstCpuOnTheCudnnPath) {
  ScopedEnv path("MEGATRAIN_ATTENTION", "cudnn");
  const Case cases[] = {
      {2, 4, 4, 77, 77, 64, true},     // multi-head, causal, no tile multiple
      {1, 8, 2, 300, 300, 128, false},  // grouped-query
      {2, 4, 1, 300, 300, 128, true},   // multi-query, causal
      {1, 4, 2, 77, 300, 64, true},     // fewer queries than keys, causal (top-left diagonal)
      {1, 4, 4, 300, 77, 128, false},   // more queries than keys
      {1, 2, 1, 77, 77, 256, true},     // head dim 256
      {1, 4, 2, 130, 130, 256, false},  // head dim 256, grouped
      {2, 16, 16, 512, 512, 128, true}, // the 1.36B head layout, shorter
  };
  for (const Case& c : cases) check(c);
}

// MEGATRAIN_ATTENTION_DETERMINISTIC=1: the backward takes cuDNN's
// deterministic algorithm; run five times on the 1.36B head layout (dq summed
// over 512 keys per query, where the default algorithm's atomics reorder the
// sums), every run gives the same bits, and they match the CPU. A bad value
// is an Error naming the variable.
TEST_F(CudnnAttentionTest, DeterministicBackwardRepeatsBitForBit) {
  ScopedEnv path("MEGATRAIN_ATTENTION", "cudnn");
  ScopedEnv deterministic("MEGATRAIN_ATTENTION_DETERMINISTIC", "1");
  for (bool causal : {true, false}) {
    const Case c{2, 16, 8, 512, 512, 128, causal};
    const KernelCase bwd = backward(c, forward(c));
    const plan::Plan plan = oneKernelPlan(bwd);
    const std::vector<HostTensor> first = runCase(cudaBackend(), plan, bwd);
    for (int run = 1; run < 5; ++run) {
      const std::vector<HostTensor> again = runCase(cudaBackend(), plan, bwd);
      ASSERT_EQ(again.size(), first.size());
      for (size_t i = 0; i < first.size(); ++i)
        EXPECT_EQ(again[i].values, first[i].values) << text(c) << " output " << i << " run " << run;
    }
    EXPECT_TRUE(cudaMatchesCpu(bwd, 2e-2)) << text(c) << " backward (MEGATRAIN_TEST_SEED=" << seed_ << ")";
  }
  ScopedEnv bad("MEGATRAIN_ATTENTION_DETERMINISTIC", "sometimes");
  const Case c{1, 2, 2, 64, 64, 64, true};
  const std::string error = cudaError(backward(c, forward(c)));
  EXPECT_NE(error.find("MEGATRAIN_ATTENTION_DETERMINISTIC"), std::string::npos) << error;
}

// A small attention workspace: the same step runs as several executions over
// slices of the batch (each slice's y, lse and gradients land in place).
// Copies of one batch element: forward q, y 64 KiB each and k, v 32 KiB each
// (192 KiB), backward twice that (384 KiB) plus cuDNN's workspace (an f32 dq
// accumulator, 256 KiB an element on the H200 at this shape): the forward
// runs as 2 executions of 2 within 640 KiB, the backward as 4 of 1 within 1 MiB.
TEST_F(CudnnAttentionTest, BatchSlices) {
  ScopedEnv path("MEGATRAIN_ATTENTION", "cudnn");
  for (bool causal : {true, false}) {
    const Case c{4, 4, 2, 64, 64, 128, causal};
    const KernelCase fwd = forward(c);
    {
      ScopedEnv budget("MEGATRAIN_ATTENTION_WORKSPACE", std::to_string(size_t{640} << 10));
      EXPECT_TRUE(cudaMatchesCpu(fwd, 1.5e-2)) << text(c) << " forward (MEGATRAIN_TEST_SEED=" << seed_ << ")";
    }
    const KernelCase bwd = backward(c, fwd);
    ScopedEnv budget("MEGATRAIN_ATTENTION_WORKSPACE", std::to_string(size_t{1} << 20));
    EXPECT_TRUE(cudaMatchesCpu(bwd, 2e-2)) << text(c) << " backward (MEGATRAIN_TEST_SEED=" << seed_ << ")";
  }
}

// A head dim cuDNN does not take (not a multiple of 8): with cuDNN required
// the step is an Error saying why; by default it falls back to the GEMM path
// and still matches the CPU.
TEST_F(CudnnAttentionTest, DeclinedShapeFallsBackToGemm) {
  const Case c{1, 4, 2, 40, 40, 36, true};
  const KernelCase fwd = forward(c);
  {
    ScopedEnv path("MEGATRAIN_ATTENTION", "cudnn");
    const std::string error = cudaError(fwd);
    EXPECT_NE(error.find("cuDNN declined this step"), std::string::npos) << error;
    EXPECT_NE(error.find("MEGATRAIN_ATTENTION=cudnn"), std::string::npos) << error;
  }
  EXPECT_TRUE(cudaMatchesCpu(fwd, 1.5e-2)) << text(c) << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
  EXPECT_TRUE(cudaMatchesCpu(backward(c, fwd), 2e-2)) << text(c) << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
}

// fp32 and tf32 keep the exact GEMM path even when cuDNN is required.
TEST_F(CudnnAttentionTest, Fp32StaysOnGemmPath) {
  ScopedEnv path("MEGATRAIN_ATTENTION", "cudnn");
  const Case c{1, 4, 2, 77, 77, 64, true};
  KernelCase fwd = forward(c);
  fwd.attributes.back() = stringAttr("precision", "fp32");
  EXPECT_TRUE(cudaMatchesCpu(fwd, 1e-5)) << text(c) << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
}

TEST_F(CudnnAttentionTest, BadSettingIsAnError) {
  ScopedEnv path("MEGATRAIN_ATTENTION", "flash");
  const std::string error = cudaError(forward({1, 2, 2, 8, 8, 64, false}));
  EXPECT_NE(error.find("MEGATRAIN_ATTENTION='flash' is not auto, cudnn or gemm"), std::string::npos) << error;
}

}  // namespace
}  // namespace megatrain::runtime::testing
