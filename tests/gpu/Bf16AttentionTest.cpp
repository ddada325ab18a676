// Bf16AttentionTest.cpp - the bf16 forms of attention, attention_grad, rotary and rotary_grad (--precision bf16) on CUDA.
//
// cuDNN reads and writes bf16 operands in place: its results equal, bit for
// bit, those of the f32-operand step on the same values (which rounds them
// to bf16 copies, runs the same graph and widens the results exactly); the
// backward under MEGATRAIN_ATTENTION_DETERMINISTIC=1. Off cuDNN (the GEMM
// path under MEGATRAIN_ATTENTION=gemm, a shape cuDNN declines, the warp
// kernels when the GEMM path's workspace is too small) a bf16 step runs the
// f32 path on widened copies: each bf16 result is bit for bit the cast of the
// f32 step's result on the same device, and near the CPU twin within the
// bounds of CudnnAttentionTest.cpp. rotary's bf16 results are bit for bit
// the cast of its f32 results on the same device. Fresh random data on every
// run (MEGATRAIN_TEST_SEED replays one).
#include <cmath>
#include <cstdint>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "CudaHarness.h"
#include "CudaKernel.h"
#include "CudnnAttention.h"
#include "megatrain/plan/Bf16.h"
#include "megatrain/runtime/KernelBinding.h"

namespace megatrain::runtime::testing {
namespace {

using Dims = std::vector<int64_t>;

struct Case {
  int64_t b, hq, hkv, sq, skv, d;
  bool causal;
  int64_t bshd;  // backward's bits (q 1, k 2, v 4, y 8, dy 16); the forward takes bits & 15
};

std::string text(const Case& c) {
  return "B " + std::to_string(c.b) + " Hq " + std::to_string(c.hq) + " Hkv " + std::to_string(c.hkv) + " Sq " +
         std::to_string(c.sq) + " Skv " + std::to_string(c.skv) + " D " + std::to_string(c.d) +
         (c.causal ? " causal" : "") + " bshd " + std::to_string(c.bshd);
}

Dims laid(Dims s, bool bshd) {
  if (bshd) std::swap(s[1], s[2]);
  return s;
}

// The same values (bf16 already) in another element type.
HostTensor as(HostTensor x, plan::DType dtype) {
  x.dtype = dtype;
  return x;
}

// `kase` with every bf16 input and output turned f32: the f32 form of the step.
KernelCase widened(KernelCase kase) {
  for (HostTensor& input : kase.inputs)
    if (input.dtype == plan::BF16) input.dtype = plan::F32;
  for (OutputSpec& output : kase.outputs)
    if (output.second == plan::BF16) output.second = plan::F32;
  return kase;
}

// Each bf16 output of `bf16` holds floatToBf16 of the same output of `f32`;
// the f32 outputs (lse) are equal.
::testing::AssertionResult roundedBitwise(const std::vector<HostTensor>& bf16, const std::vector<HostTensor>& f32,
                                          const KernelCase& kase) {
  if (bf16.size() != f32.size()) return ::testing::AssertionFailure() << "output counts differ";
  for (size_t o = 0; o < bf16.size(); ++o)
    for (size_t i = 0; i < bf16[o].values.size(); ++i) {
      const double a = bf16[o].values[i], e = f32[o].values[i];
      const bool same = kase.outputs[o].second == plan::BF16
                            ? floatToBf16(static_cast<float>(a)) == floatToBf16(static_cast<float>(e))
                            : (a == e || (std::isnan(a) && std::isnan(e)));
      if (!same)
        return ::testing::AssertionFailure() << "output " << o << " element " << i << ": bf16 step " << a
                                             << ", f32 step " << e;
    }
  return ::testing::AssertionSuccess();
}

class Bf16AttentionGpu : public ::testing::Test {
 protected:
  Bf16AttentionGpu() : seed_(testSeed()), rng_(seed_) {}

  std::vector<plan::Attribute> attrs(const Case& c, int64_t bshd) const {
    std::vector<plan::Attribute> list{floatAttr("scale", 1.0 / std::sqrt(static_cast<double>(c.d))),
                                      intAttr("causal", c.causal ? 1 : 0), stringAttr("precision", "bf16")};
    if (bshd) list.push_back(intAttr("bshd", bshd));
    return list;
  }

  KernelCase forward(const Case& c) {
    const Dims q{c.b, c.hq, c.sq, c.d}, kv{c.b, c.hkv, c.skv, c.d}, lse{c.b, c.hq, c.sq};
    return {"attention",
            {bf16(laid(q, c.bshd & 1)), bf16(laid(kv, c.bshd & 2)), bf16(laid(kv, c.bshd & 4))},
            {{laid(q, c.bshd & 8), plan::BF16}, {lse, plan::F32}},
            attrs(c, c.bshd & 15)};
  }

  // The gradient on the given forward results (y bf16, lse f32) with a fresh dy.
  KernelCase backward(const Case& c, const KernelCase& fwd, const std::vector<HostTensor>& y) {
    const Dims q{c.b, c.hq, c.sq, c.d}, kv{c.b, c.hkv, c.skv, c.d};
    return {"attention_grad",
            {fwd.inputs[0], fwd.inputs[1], fwd.inputs[2], y[0], y[1], bf16(laid(q, c.bshd & 16))},
            {{laid(q, c.bshd & 1), plan::BF16}, {laid(kv, c.bshd & 2), plan::BF16}, {laid(kv, c.bshd & 4), plan::BF16}},
            attrs(c, c.bshd)};
  }

  // The bf16 step and its f32 form on the GPU: the bf16 results are the f32
  // ones rounded, bit for bit; and the bf16 step is near the CPU twin.
  void checkAgainstF32(const Case& c, double forwardBound, double gradientBound) {
    const KernelCase fwd = forward(c);
    const std::vector<HostTensor> y = runCase(cudaBackend(), oneKernelPlan(fwd), fwd);
    const KernelCase fwdF32 = widened(fwd);
    EXPECT_TRUE(roundedBitwise(y, runCase(cudaBackend(), oneKernelPlan(fwdF32), fwdF32), fwd))
        << text(c) << " forward (MEGATRAIN_TEST_SEED=" << seed_ << ")";
    EXPECT_TRUE(cudaMatchesCpu(fwd, forwardBound)) << text(c) << " forward (MEGATRAIN_TEST_SEED=" << seed_ << ")";
    const KernelCase bwd = backward(c, fwd, y);
    const std::vector<HostTensor> grads = runCase(cudaBackend(), oneKernelPlan(bwd), bwd);
    const KernelCase bwdF32 = widened(bwd);
    EXPECT_TRUE(roundedBitwise(grads, runCase(cudaBackend(), oneKernelPlan(bwdF32), bwdF32), bwd))
        << text(c) << " backward (MEGATRAIN_TEST_SEED=" << seed_ << ")";
    EXPECT_TRUE(cudaMatchesCpu(bwd, gradientBound)) << text(c) << " backward (MEGATRAIN_TEST_SEED=" << seed_ << ")";
  }

  HostTensor bf16(const Dims& shape) { return randomTensor(shape, plan::BF16, rng_, -2.0, 2.0); }

  uint32_t seed_;
  std::mt19937 rng_;
};

// Causal and not, multi-head, grouped- and multi-query, head dims 64 and 128,
// sequence lengths no tile's multiple; the plain layout and the Llama
// plans' (forward bshd 15, backward 31).
constexpr Case kCases[] = {
    {2, 4, 4, 77, 77, 64, true, 0},     {1, 8, 2, 100, 100, 128, false, 0}, {2, 4, 4, 77, 77, 64, true, 31},
    {1, 8, 2, 130, 130, 128, true, 31}, {1, 4, 1, 77, 100, 64, true, 31},   {2, 16, 8, 256, 256, 128, false, 31},
};

// On cuDNN (MEGATRAIN_ATTENTION=cudnn: a declined step is an Error) the bf16
// operands go in and out as they are, and give the f32 form's bits.
TEST_F(Bf16AttentionGpu, CudnnBf16OperandsGiveTheF32OperandsBits) {
  ScopedEnv path("MEGATRAIN_ATTENTION", "cudnn");
  ScopedEnv deterministic("MEGATRAIN_ATTENTION_DETERMINISTIC", "1");
  for (const Case& c : kCases) checkAgainstF32(c, 1.5e-2, 2e-2);
}

// The scratch a bf16 step asks for on cuDNN is the graph's workspace alone:
// the f32 form's minus its bf16 copies (forward q, k, v, y; backward q, k, v,
// y, dy, dq, dk, dv), with both forms in one execution.
TEST_F(Bf16AttentionGpu, CudnnBf16StepsNeedNoCopies) {
  ScopedEnv path("MEGATRAIN_ATTENTION", "cudnn");
  cuda::CudnnAttention cudnn(nullptr);
  cuda::DeviceContext device;
  device.attention = &cudnn;
  auto scratch = [&](const KernelCase& kase) {
    const plan::Plan plan = oneKernelPlan(kase);  // the launch's operand names point into it
    cuda::Launch launch;
    bindKernelCall(plan, 0, nullptr, launch);
    launch.device = &device;
    const size_t bytes = cuda::cudaKernels().find(kase.kernel)->entry.scratchBytes(launch);
    EXPECT_TRUE(cudnn.takes(launch)) << describe(kase) << ": " << cudnn.declined(launch);
    return bytes;
  };
  auto aligned = [](int64_t elements) { return (static_cast<size_t>(elements) * 2 + 255) / 256 * 256; };
  for (const Case& c : {Case{2, 8, 2, 128, 128, 64, true, 15}, Case{1, 4, 4, 77, 77, 128, false, 0}}) {
    const size_t q = aligned(c.b * c.hq * c.sq * c.d), kv = aligned(c.b * c.hkv * c.skv * c.d);
    const KernelCase fwd = forward(c);
    EXPECT_EQ(scratch(fwd) + 2 * q + 2 * kv, scratch(widened(fwd))) << text(c);
    const KernelCase bwd = backward(c, fwd, runKernel(fwd.kernel, fwd.inputs, fwd.outputs, fwd.attributes));
    EXPECT_EQ(scratch(bwd) + 4 * q + 4 * kv, scratch(widened(bwd))) << text(c);
  }
}

// MEGATRAIN_ATTENTION=gemm: the GEMM path on f32 copies.
TEST_F(Bf16AttentionGpu, GemmPathRunsOnWidenedCopies) {
  ScopedEnv path("MEGATRAIN_ATTENTION", "gemm");
  for (const Case& c : kCases) checkAgainstF32(c, 1.5e-2, 2e-2);
}

// A head dim cuDNN declines (not a multiple of 8) falls back to the GEMM
// path on f32 copies by default.
TEST_F(Bf16AttentionGpu, DeclinedShapeRunsOnWidenedCopies) {
  ScopedEnv path("MEGATRAIN_ATTENTION", nullptr);
  for (int64_t bshd : {0, 31}) checkAgainstF32({1, 4, 2, 77, 77, 36, true, bshd}, 1.5e-2, 2e-2);
}

// A GEMM-path workspace too small for one key row: the warp kernels (double
// sums over the widened values) on f32 copies, which round as the CPU twin
// does but for the order of their sums.
TEST_F(Bf16AttentionGpu, WarpKernelsRunOnWidenedCopies) {
  ScopedEnv path("MEGATRAIN_ATTENTION", "gemm");
  ScopedEnv budget("MEGATRAIN_ATTENTION_WORKSPACE", "1024");
  for (const Case& c : {Case{1, 4, 2, 77, 77, 64, true, 0}, Case{2, 2, 1, 40, 77, 128, false, 31}})
    checkAgainstF32(c, 1e-2, 1e-2);
}

// ---- rotary ----

// x (dy) f32 or bf16 and the result f32 or bf16 with f32 tables, against the
// CPU twin (products exact in double, one rounding: the backends agree) and,
// bit for bit, the bf16 result against the f32 result's cast on the GPU.
// The Llama layout (x [B, S, H, D] with tables [1, 1, S, D], the packed
// kernel), plain [B, H, S, D], and a half row no whole pack (the element kernel).
TEST(Bf16RotaryGpu, EveryCombinationAgainstCpuAndTheF32Result) {
  const uint32_t seed = testSeed();
  std::mt19937 rng(seed);
  struct RotaryCase {
    Dims x, table;
    bool bshd;
  };
  const RotaryCase cases[] = {{{2, 77, 4, 64}, {1, 1, 77, 64}, true},
                              {{1, 100, 2, 128}, {1, 1, 100, 128}, true},
                              {{2, 4, 8, 16}, {1, 1, 8, 16}, false},
                              {{1, 9, 3, 6}, {1, 1, 9, 6}, true}};
  for (const RotaryCase& c : cases)
    for (const char* kernel : {"rotary", "rotary_grad"})
      for (plan::DType xType : {plan::F32, plan::BF16}) {
        const std::vector<plan::Attribute> attributes =
            c.bshd ? std::vector<plan::Attribute>{intAttr("bshd", 1)} : std::vector<plan::Attribute>{};
        const HostTensor x = randomTensor(c.x, xType, rng, -3, 3);
        const HostTensor cos = randomTensor(c.table, plan::F32, rng), sin = randomTensor(c.table, plan::F32, rng);
        const KernelCase f32Result{kernel, {x, cos, sin}, {{c.x, plan::F32}}, attributes};
        const KernelCase bf16Result{kernel, {x, cos, sin}, {{c.x, plan::BF16}}, attributes};
        for (const KernelCase* k : {&f32Result, &bf16Result})
          EXPECT_TRUE(cudaMatchesCpu(*k, 1e-5)) << describe(*k) << " (MEGATRAIN_TEST_SEED=" << seed << ")";
        const std::vector<HostTensor> wide = runCase(cudaBackend(), oneKernelPlan(f32Result), f32Result);
        const std::vector<HostTensor> narrow = runCase(cudaBackend(), oneKernelPlan(bf16Result), bf16Result);
        EXPECT_TRUE(roundedBitwise(narrow, wide, bf16Result))
            << describe(bf16Result) << " (MEGATRAIN_TEST_SEED=" << seed << ")";
        // And the f32 result of a bf16 x is that of the same values given as f32.
        if (xType == plan::BF16) {
          const KernelCase f32x{kernel, {as(x, plan::F32), cos, sin}, {{c.x, plan::F32}}, attributes};
          EXPECT_EQ(runCase(cudaBackend(), oneKernelPlan(f32x), f32x)[0].values, wide[0].values) << describe(f32Result);
        }
      }
}

// Unsupported combinations are refused by name on the GPU as on the CPU.
TEST(Bf16RotaryGpu, OtherCombinationsAreRefused) {
  std::mt19937 rng(testSeed());
  const HostTensor x = randomTensor({2, 8}, plan::BF16, rng), table = randomTensor({8}, plan::BF16, rng);
  const std::string error = cudaError({"rotary", {x, table, table}, {{{2, 8}, plan::BF16}}, {}});
  EXPECT_NE(error.find("rotary: cos 'in1' is bf16, expected f32 (with a bf16 x or output the tables stay f32)"),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace megatrain::runtime::testing
