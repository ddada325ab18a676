// AttentionLayoutTest.cpp - attention, attention_grad, rotary and rotary_grad with [B, S, H, D] operands (`bshd`) on CUDA against the CPU twin.
//
// Each path in turn: cuDNN (bf16 precision, MEGATRAIN_ATTENTION=cudnn, so a
// declined step is an Error), the GEMM path (fp32 and tf32; bf16 under
// MEGATRAIN_ATTENTION=gemm) and the warp kernels (f64), all on fresh random
// data. Layouts: every operand [B, S, H, D], only q, k and y, only v and dy,
// none but y. Shapes: multi-head and grouped-query, causal and not, head
// dims 64 and 128, sequence lengths no multiple of 64. Bounds are those of
// AttentionTest.cpp and CudnnAttentionTest.cpp for the same paths; the CPU
// twin's layouts are exact (tests/runtime/AttentionLayoutTest.cpp).
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "CudaHarness.h"

namespace megatrain::runtime::testing {
namespace {

using Shape = std::vector<int64_t>;

struct Case {
  int64_t b, hq, hkv, sq, skv, d;
  bool causal;
};

struct Path {
  const char* name;
  const char* setting;    // MEGATRAIN_ATTENTION (nullptr: unset)
  const char* precision;  // nullptr: none (exact)
  plan::DType dtype;
  double forward, gradient;
};

constexpr Path kPaths[] = {{"cudnn", "cudnn", "bf16", plan::F32, 1.5e-2, 2e-2},
                           {"gemm bf16", "gemm", "bf16", plan::F32, 1.5e-2, 2e-2},
                           {"gemm fp32", nullptr, "fp32", plan::F32, 1e-5, 1e-5},
                           {"gemm tf32", nullptr, "tf32", plan::F32, 3e-3, 3e-3},
                           {"exact f64", nullptr, nullptr, plan::F64, 0, 0}};

// q, k, v, y, dy bits: all, q k y, v dy, y alone.
constexpr int64_t kLayouts[] = {31, 1 | 2 | 8, 4 | 16, 8};

Shape laid(Shape s, bool bshd) {
  if (bshd) std::swap(s[1], s[2]);
  return s;
}

std::string text(const Case& c, const Path& p, int64_t bits) {
  return std::string(p.name) + " bshd " + std::to_string(bits) + ": B " + std::to_string(c.b) + " Hq " +
         std::to_string(c.hq) + " Hkv " + std::to_string(c.hkv) + " Sq " + std::to_string(c.sq) + " Skv " +
         std::to_string(c.skv) + " D " + std::to_string(c.d) + (c.causal ? " causal" : "");
}

class AttentionLayoutGpu : public ::testing::Test {
 protected:
  AttentionLayoutGpu() : seed_(testSeed()), rng_(seed_) {}

  void check(const Case& c, const Path& p, int64_t bits) {
    const bool bq = bits & 1, bk = bits & 2, bv = bits & 4, by = bits & 8, bdy = bits & 16;
    const Shape q{c.b, c.hq, c.sq, c.d}, kv{c.b, c.hkv, c.skv, c.d}, lse{c.b, c.hq, c.sq};
    std::vector<plan::Attribute> attrs = {floatAttr("scale", 1.0 / std::sqrt(static_cast<double>(c.d))),
                                          intAttr("causal", c.causal ? 1 : 0)};
    if (p.precision) attrs.push_back(stringAttr("precision", p.precision));
    std::vector<plan::Attribute> forwardAttrs = attrs, backwardAttrs = attrs;
    forwardAttrs.push_back(intAttr("bshd", bits & 15));
    backwardAttrs.push_back(intAttr("bshd", bits));
    const KernelCase forward{"attention",
                             {uniform(laid(q, bq), p.dtype), uniform(laid(kv, bk), p.dtype),
                              uniform(laid(kv, bv), p.dtype)},
                             {{laid(q, by), p.dtype}, {lse, p.dtype}},
                             forwardAttrs};
    EXPECT_TRUE(cudaMatchesCpu(forward, p.forward)) << text(c, p, bits) << " forward (MEGATRAIN_TEST_SEED=" << seed_ << ")";
    // The gradient on the CPU forward's y (in y's layout) and lse, with a fresh dy.
    const std::vector<HostTensor> y = runKernel("attention", forward.inputs, forward.outputs, forwardAttrs);
    const KernelCase backward{"attention_grad",
                              {forward.inputs[0], forward.inputs[1], forward.inputs[2], y[0], y[1],
                               uniform(laid(q, bdy), p.dtype)},
                              {{laid(q, bq), p.dtype}, {laid(kv, bk), p.dtype}, {laid(kv, bv), p.dtype}},
                              backwardAttrs};
    EXPECT_TRUE(cudaMatchesCpu(backward, p.gradient))
        << text(c, p, bits) << " backward (MEGATRAIN_TEST_SEED=" << seed_ << ")";
  }

  HostTensor uniform(const Shape& shape, plan::DType dtype) { return randomTensor(shape, dtype, rng_, -2.0, 2.0); }

  uint32_t seed_;
  std::mt19937 rng_;
};

TEST_F(AttentionLayoutGpu, EveryPathAndLayoutAgainstCpu) {
  const Case cases[] = {
      {2, 4, 4, 77, 77, 64, true},     // multi-head, causal
      {1, 8, 2, 100, 100, 128, false},  // grouped-query
      {1, 4, 2, 77, 100, 64, true},     // grouped-query, fewer queries than keys, causal
      {1, 4, 1, 130, 130, 128, true},   // multi-query, causal
  };
  for (const Path& p : kPaths) {
    ScopedEnv path("MEGATRAIN_ATTENTION", p.setting);
    for (const Case& c : cases)
      for (int64_t bits : kLayouts) check(c, p, bits);
  }
}

// rotary and rotary_grad on x [B, S, H, D]: the tables as the exports hold
// them ([1, 1, S, D]) and per batch ([B, 1, S, D]); f32 (the packed kernel
// where D allows it) and f64, a head dim whose half is no whole pack (6).
TEST(RotaryLayoutGpu, BshdAgainstCpu) {
  std::mt19937 rng(testSeed());
  struct RotaryCase {
    Shape x, table;
  };
  const RotaryCase cases[] = {{{2, 77, 4, 64}, {1, 1, 77, 64}},
                              {{2, 100, 2, 128}, {2, 1, 100, 128}},
                              {{1, 9, 3, 6}, {1, 1, 9, 6}}};
  for (plan::DType dtype : {plan::F32, plan::F64})
    for (const RotaryCase& c : cases)
      for (const char* kernel : {"rotary", "rotary_grad"}) {
        const KernelCase k{kernel,
                           {randomTensor(c.x, dtype, rng, -2, 2), randomTensor(c.table, dtype, rng),
                            randomTensor(c.table, dtype, rng)},
                           {{c.x, dtype}},
                           {intAttr("bshd", 1)}};
        EXPECT_TRUE(cudaMatchesCpu(k)) << describe(k);
      }
}

}  // namespace
}  // namespace megatrain::runtime::testing
