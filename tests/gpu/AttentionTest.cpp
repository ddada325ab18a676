// AttentionTest.cpp - attention and attention_grad on the GEMM path (f32, every precision) against the CPU twin, and its workspace plan.
//
// Bounds relative to each output's scale (CudaHarness): fp32 1e-5, tf32
// 3e-3, bf16 1.5e-2 forward and 2e-2 gradient (an emulation of bf16
// operands with exact sums at these shapes reaches 0.6% and 0.7%). Shapes:
// multi-head, grouped- and multi-query, head dims 3 to 256, causal and not,
// more keys than queries, and two larger ones whose causal row blocks split
// (S 700 with grouped query heads) or fill (S 512, D 128). With a small
// MEGATRAIN_ATTENTION_WORKSPACE the same kernels run over many kv-head chunks
// and over row slices of one kv head's group.
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "AttentionGemm.h"
#include "CudaHarness.h"
#include "CudaKernel.h"

namespace megatrain::runtime::testing {
namespace {

using Shape = std::vector<int64_t>;
using cuda::AttentionPrecision;

struct AttentionCase {
  int64_t b, hq, hkv, sq, skv, d;
  bool causal;
};

struct PrecisionBound {
  const char* name;
  AttentionPrecision precision;
  double forward, gradient;
};

constexpr PrecisionBound kPrecisions[] = {{"fp32", AttentionPrecision::Fp32, 1e-5, 1e-5},
                                          {"tf32", AttentionPrecision::Tf32, 3e-3, 3e-3},
                                          {"bf16", AttentionPrecision::Bf16, 1.5e-2, 2e-2}};

cuda::AttentionShape shapeOf(const AttentionCase& c) {
  cuda::AttentionShape s;
  s.batch = c.b, s.qHeads = c.hq, s.kvHeads = c.hkv, s.sq = c.sq, s.skv = c.skv, s.d = c.d;
  s.scale = 1.0 / std::sqrt(static_cast<double>(c.d));
  s.causal = c.causal;
  return s;
}

// Sets MEGATRAIN_ATTENTION_WORKSPACE for the life of the object.
class WorkspaceBudget {
 public:
  explicit WorkspaceBudget(size_t bytes) { setenv("MEGATRAIN_ATTENTION_WORKSPACE", std::to_string(bytes).c_str(), 1); }
  ~WorkspaceBudget() { unsetenv("MEGATRAIN_ATTENTION_WORKSPACE"); }
};

// MEGATRAIN_ATTENTION=gemm for every case: bf16 steps would otherwise take
// cuDNN's fused path (CudnnAttentionTest.cpp) where it takes the shape.
class AttentionGemm : public ::testing::Test {
 protected:
  AttentionGemm() : seed_(testSeed()), rng_(seed_) {
    if (const char* old = std::getenv("MEGATRAIN_ATTENTION")) previous_ = old;
    setenv("MEGATRAIN_ATTENTION", "gemm", 1);
  }
  ~AttentionGemm() override {
    if (previous_.empty()) unsetenv("MEGATRAIN_ATTENTION");
    else setenv("MEGATRAIN_ATTENTION", previous_.c_str(), 1);
  }

  // Forward against the CPU twin, then the gradient with the CPU forward's y
  // and lse and a fresh dy.
  void check(const AttentionCase& c, const PrecisionBound& p) {
    const Shape q{c.b, c.hq, c.sq, c.d}, kv{c.b, c.hkv, c.skv, c.d}, lse{c.b, c.hq, c.sq};
    const std::vector<plan::Attribute> attrs = {floatAttr("scale", 1.0 / std::sqrt(static_cast<double>(c.d))),
                                                intAttr("causal", c.causal ? 1 : 0), stringAttr("precision", p.name)};
    const HostTensor hq = uniform(q), hk = uniform(kv), hv = uniform(kv);
    const KernelCase forward{"attention", {hq, hk, hv}, {{q, plan::F32}, {lse, plan::F32}}, attrs};
    EXPECT_TRUE(cudaMatchesCpu(forward, p.forward)) << describe(forward) << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
    const std::vector<HostTensor> y = runKernel("attention", {hq, hk, hv}, {{q, plan::F32}, {lse, plan::F32}}, attrs);
    const KernelCase backward{"attention_grad",
                              {hq, hk, hv, y[0], y[1], uniform(q)},
                              {{q, plan::F32}, {kv, plan::F32}, {kv, plan::F32}},
                              attrs};
    EXPECT_TRUE(cudaMatchesCpu(backward, p.gradient))
        << describe(backward) << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
  }

  HostTensor uniform(const Shape& shape) { return randomTensor(shape, plan::F32, rng_, -2.0, 2.0); }

  uint32_t seed_;
  std::mt19937 rng_;
  std::string previous_;  // MEGATRAIN_ATTENTION before the case
};

TEST_F(AttentionGemm, EveryPrecisionAgainstCpu) {
  const AttentionCase cases[] = {{1, 2, 2, 5, 5, 4, true},      {2, 4, 2, 17, 17, 16, true},
                                 {2, 8, 1, 33, 33, 64, true},    {1, 4, 2, 40, 40, 128, true},
                                 {1, 2, 1, 7, 9, 3, false},      {1, 2, 2, 9, 9, 256, true},
                                 {3, 6, 3, 12, 20, 33, true},    {2, 4, 4, 512, 512, 128, true},
                                 {1, 4, 2, 700, 700, 64, true},  {1, 4, 1, 96, 130, 32, false}};
  for (const PrecisionBound& p : kPrecisions)
    for (const AttentionCase& c : cases) {
      for (bool backward : {false, true})
        ASSERT_GT(cuda::attentionGemmPlan(shapeOf(c), p.precision, backward).bytes, 0u) << "not on the GEMM path";
      check(c, p);
    }
}

// A budget that holds two of the four kv heads' groups (chunks of kv heads),
// then one that holds only a slice of one group's rows, causal blocks included.
TEST_F(AttentionGemm, ManyChunksAndRowSlices) {
  struct Budgeted {
    AttentionCase c;
    size_t budget;
    bool rowSlices;
  };
  const Budgeted cases[] = {{{2, 4, 2, 40, 40, 16, true}, 48u << 10, false},
                            {{2, 2, 2, 24, 30, 8, false}, 12u << 10, false},
                            {{1, 4, 2, 40, 40, 16, true}, 8u << 10, true},
                            {{1, 2, 2, 24, 30, 8, false}, 2816, true},
                            {{1, 2, 1, 700, 700, 32, true}, 3u << 20, true}};
  for (const PrecisionBound& p : kPrecisions)
    for (const Budgeted& b : cases) {
      WorkspaceBudget budget(b.budget);
      for (bool backward : {false, true}) {
        const cuda::AttentionShape s = shapeOf(b.c);
        const cuda::AttentionChunking plan = cuda::attentionGemmPlan(s, p.precision, backward);
        ASSERT_GT(plan.bytes, 0u);
        EXPECT_LE(plan.bytes, b.budget);
        if (b.rowSlices) {
          EXPECT_EQ(plan.heads, 1);
          EXPECT_LT(plan.rows, s.sq) << p.name << (backward ? " backward" : " forward");
        } else {
          EXPECT_LT(plan.heads, s.batch * s.kvHeads) << p.name << (backward ? " backward" : " forward");
          EXPECT_EQ(plan.rows, s.sq);
        }
      }
      check(b.c, p);
    }
}

// The scratch a step asks prepare() for is its workspace plan, never more
// than kAttentionWorkspaceBytes however long the sequence or large the group,
// and holds the chunk's f32 scores (two such blocks in the gradient).
TEST_F(AttentionGemm, WorkspaceStaysWithinItsBound) {
  const AttentionCase cases[] = {{8, 16, 16, 2048, 2048, 128, true},
                                 {8, 32, 8, 4096, 4096, 128, true},
                                 {1, 64, 1, 32768, 32768, 128, true},
                                 {1, 8, 8, 131072, 131072, 64, false},
                                 {2, 4, 2, 17, 17, 16, true}};
  const cuda::CudaKernel* forward = &cuda::cudaKernels().find("attention")->entry;
  const cuda::CudaKernel* backward = &cuda::cudaKernels().find("attention_grad")->entry;
  ASSERT_TRUE(forward && forward->scratchBytes && backward && backward->scratchBytes);
  for (const PrecisionBound& p : kPrecisions)
    for (const AttentionCase& c : cases) {
      const cuda::AttentionShape s = shapeOf(c);
      std::vector<cuda::Attribute> attrs(2);
      attrs[0].name = "precision";
      attrs[0].kind = cuda::Attribute::Kind::String;
      attrs[0].s = p.name;
      attrs[1].name = "causal";
      attrs[1].i = c.causal ? 1 : 0;
      cuda::Launch launch;
      launch.attrs = cuda::Attributes(attrs, "attention");
      launch.numIn = 6;
      for (int i = 0; i < 6; ++i) {
        const bool kv = i == 1 || i == 2;
        launch.in[i].dtype = cuda::DType::F32;
        launch.in[i].shape.rank = 4;
        const int64_t dims[4] = {c.b, kv ? c.hkv : c.hq, kv ? c.skv : c.sq, c.d};
        for (int k = 0; k < 4; ++k) launch.in[i].shape.dims[k] = dims[k];
      }
      for (bool isBackward : {false, true}) {
        const cuda::AttentionChunking plan = cuda::attentionGemmPlan(s, p.precision, isBackward);
        const size_t scratch = (isBackward ? backward : forward)->scratchBytes(launch);
        const std::string where = std::string(p.name) + (isBackward ? " backward " : " forward ") +
                                  std::to_string(c.hq) + "x" + std::to_string(c.sq);
        ASSERT_GT(plan.bytes, 0u) << where;
        EXPECT_EQ(scratch, plan.bytes) << where;
        EXPECT_LE(plan.bytes, cuda::kAttentionWorkspaceBytes) << where;
        EXPECT_GE(plan.heads, 1) << where;
        EXPECT_GE(plan.rows, 1) << where;
        const size_t scores = static_cast<size_t>(plan.heads * s.group() * plan.rows * s.skv) * 4;
        EXPECT_LE((isBackward ? 2 : 1) * scores, plan.bytes) << where;
      }
    }
  // F64 keeps the warp-per-row kernel: no workspace for the forward.
  std::vector<cuda::Attribute> none;
  cuda::Launch launch;
  launch.attrs = cuda::Attributes(none, "attention");
  launch.numIn = 3;
  for (int i = 0; i < 3; ++i) {
    launch.in[i].dtype = cuda::DType::F64;
    launch.in[i].shape.rank = 4;
    for (int k = 0; k < 4; ++k) launch.in[i].shape.dims[k] = 4;
  }
  EXPECT_EQ(forward->scratchBytes(launch), 0u);
}

}  // namespace
}  // namespace megatrain::runtime::testing
