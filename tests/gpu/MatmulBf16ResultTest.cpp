// MatmulBf16ResultTest.cpp - matmul with a bf16 result on the CUDA backend: bit for bit the f32-result matmul followed by cast, however the planner writes it, and near the CPU twin.
//
// One plan holds the unfused pair and the fused step on the same operands:
// y32 = matmul(a, b) (f32), c = cast(y32) (bf16), y = matmul(a, b) (bf16);
// y must equal c in every bit. y32 comes first in the pool, so it is
// 256-byte aligned as the compiler's arena places every buffer, which is
// what the planner assumes of the f32 product it must match. Each setting
// runs on a fresh backend (the algorithm cache is the planner's):
// MEGATRAIN_MATMUL_TUNE auto and off, and MEGATRAIN_MATMUL_BF16_RESULT=via-f32
// (the f32 product into the scratch, then the conversion, whatever the
// heuristic offers). MEGATRAIN_MATMUL_LOG=1 is set, so the output shows which
// way each product went.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <utility>

#include <gtest/gtest.h>

#include "CudaBackend.h"
#include "CudaHarness.h"
#include "megatrain/plan/Bf16.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/CpuBackend.h"

namespace megatrain::runtime::testing {
namespace {

using Shape = std::vector<int64_t>;

struct Setting {
  const char* tune;        // MEGATRAIN_MATMUL_TUNE
  const char* bf16Result;  // MEGATRAIN_MATMUL_BF16_RESULT
};

const Setting kSettings[] = {{"auto", "auto"}, {"off", "auto"}, {"auto", "via-f32"}, {"off", "via-f32"}};

std::string label(const Setting& s) {
  return std::string("MEGATRAIN_MATMUL_TUNE=") + s.tune + " MEGATRAIN_MATMUL_BF16_RESULT=" + s.bf16Result;
}

std::string describe(const MatmulShape& s) {
  auto dims = [](const Shape& shape) {
    std::string text = "[";
    for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
    return text + "]";
  };
  return dims(s.a) + (s.transA ? "^T" : "") + " x " + dims(s.b) + (s.transB ? "^T" : "");
}

int64_t elementsOf(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// bf16 bits of uniform values in [-scale, scale).
std::vector<uint16_t> randomBf16(int64_t n, double scale, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(static_cast<float>(-scale), static_cast<float>(scale));
  std::vector<uint16_t> bits(static_cast<size_t>(n));
  for (uint16_t& b : bits) b = floatToBf16(dist(rng));
  return bits;
}

// bf16 bits of uniform values in [-1, 1) times 2^e, e uniform in [-20, 20]:
// terms whose f32 sums differ by many ulps between two summation orders, so
// that a bf16 result shows an order other than the f32 product's.
std::vector<uint16_t> wideRangeBf16(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::vector<uint16_t> bits(static_cast<size_t>(n));
  for (uint16_t& b : bits) b = floatToBf16(std::ldexp(dist(rng), exponent(rng)));
  return bits;
}

// The bits of the unfused pair (matmul f32, then cast) and of the fused step.
struct PairBits {
  std::vector<uint16_t> cast, fused;
};

PairBits runPair(Backend& backend, const MatmulShape& s, const std::vector<uint16_t>& a,
                 const std::vector<uint16_t>& b) {
  const Shape y = matmulResult(s);
  const std::vector<plan::Attribute> attrs = {intAttr("transpose_a", s.transA), intAttr("transpose_b", s.transB),
                                              stringAttr("precision", "bf16")};
  PlanBuilder builder;
  const uint32_t wide = builder.tensor("y32", y, plan::F32, plan::ACTIVATION);  // first: 256-byte aligned
  const uint32_t ta = builder.tensor("a", s.a, plan::BF16, plan::ACTIVATION);
  const uint32_t tb = builder.tensor("b", s.b, plan::BF16, plan::ACTIVATION);
  const uint32_t cast = builder.tensor("cast", y, plan::BF16, plan::ACTIVATION);
  const uint32_t fused = builder.tensor("y", y, plan::BF16, plan::ACTIVATION);
  const uint32_t steps[] = {builder.kernel("matmul", {ta, tb}, {wide}, attrs), builder.kernel("cast", {wide}, {cast}),
                            builder.kernel("matmul", {ta, tb}, {fused}, attrs)};
  const plan::Plan plan = builder.build();
  backend.prepare(plan);
  backend.write(plan.tensors(static_cast<int>(ta)), a.data(), a.size() * 2);
  backend.write(plan.tensors(static_cast<int>(tb)), b.data(), b.size() * 2);
  for (uint32_t step : steps) backend.launchKernel(step);
  backend.synchronize();
  PairBits bits;
  bits.cast.resize(static_cast<size_t>(elementsOf(y)));
  bits.fused.resize(bits.cast.size());
  backend.read(plan.tensors(static_cast<int>(cast)), bits.cast.data(), bits.cast.size() * 2);
  backend.read(plan.tensors(static_cast<int>(fused)), bits.fused.data(), bits.fused.size() * 2);
  return bits;
}

::testing::AssertionResult sameBits(const PairBits& bits) {
  size_t differ = 0, first = 0;
  for (size_t i = 0; i < bits.cast.size(); ++i)
    if (bits.cast[i] != bits.fused[i] && differ++ == 0) first = i;
  if (differ == 0) return ::testing::AssertionSuccess();
  char text[128];
  std::snprintf(text, sizeof text, "%zu of %zu elements differ; first at %zu: cast 0x%04x, fused 0x%04x", differ,
                bits.cast.size(), first, bits.cast[first], bits.fused[first]);
  return ::testing::AssertionFailure() << text;
}

class CudaMatmulBf16Result : public ::testing::Test {
 protected:
  CudaMatmulBf16Result() : seed_(testSeed()), rng_(seed_), log_("MEGATRAIN_MATMUL_LOG", "1") {}

  // Every product on fresh operands under every setting, on a fresh backend
  // per setting (the settings are read when a form is first planned).
  void expectFusedIsCast(const std::vector<MatmulShape>& shapes, bool wideRange = false) {
    std::vector<std::pair<std::vector<uint16_t>, std::vector<uint16_t>>> operands;
    auto operand = [&](int64_t n) { return wideRange ? wideRangeBf16(n, rng_) : randomBf16(n, 1.0, rng_); };
    for (const MatmulShape& s : shapes) {
      auto a = operand(elementsOf(s.a));
      operands.emplace_back(std::move(a), operand(elementsOf(s.b)));
    }
    for (const Setting& setting : kSettings) {
      ScopedEnv tune("MEGATRAIN_MATMUL_TUNE", setting.tune);
      ScopedEnv way("MEGATRAIN_MATMUL_BF16_RESULT", setting.bf16Result);
      std::unique_ptr<Backend> backend = makeCudaBackend();
      for (size_t i = 0; i < shapes.size(); ++i)
        EXPECT_TRUE(sameBits(runPair(*backend, shapes[i], operands[i].first, operands[i].second)))
            << describe(shapes[i]) << " with " << label(setting) << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
    }
  }

  uint32_t seed_;
  std::mt19937 rng_;
  ScopedEnv log_;
};

// The two products --precision bf16 writes as bf16 in a Llama-1.36B layer at
// 8 x 2048 tokens: the v projection x W_v^T and the attention output's
// gradient dy W_o.
TEST_F(CudaMatmulBf16Result, LlamaShapesAreTheCastOfTheF32ResultBitForBit) {
  expectFusedIsCast({{{8 * 2048, 2048}, {2048, 2048}, false, true}, {{8 * 2048, 2048}, {2048, 2048}, false, false}});
}

// Odd sizes (no dimension a multiple of 8), every transpose, and each batch
// form matmul.cpp distinguishes.
const std::vector<MatmulShape> kOddAndBatched = {
    {{77, 130}, {130, 64}, false, false},
    {{130, 77}, {64, 130}, true, true},
    {{77, 130}, {64, 130}, false, true},
    {{130, 77}, {130, 64}, true, false},
    {{77, 1}, {1, 130}, false, false},               // k = 1
    {{4, 77, 130}, {4, 130, 64}, false, false},      // equal batches: one strided call
    {{2, 3, 77, 64}, {130, 64}, false, true},        // a batch against one weight: folded
    {{2, 3, 64, 77}, {64, 130}, true, false},        // transposed a: stride-0 batch of b
    {{2, 1, 33, 65}, {1, 3, 65, 17}, false, false},  // both broadcast: walked on the host
    {{8, 16, 64}, {8, 32, 64}, false, true},         // attention scores shape
};

TEST_F(CudaMatmulBf16Result, OddAndBatchedShapesAreTheCastOfTheF32ResultBitForBit) {
  expectFusedIsCast(kOddAndBatched);
}

// The same on operands of a wide range, where rounding to bf16 no longer hides
// an f32 sum taken in another order (the planner's comparison on random values
// in [-1, 1) let one through: one element in 60,060 differed).
TEST_F(CudaMatmulBf16Result, WideRangeOperandsAreTheCastOfTheF32ResultBitForBit) {
  expectFusedIsCast(kOddAndBatched, true);
}

// Infinite and NaN operands and sums beyond bf16's range: the epilogue's
// rounding must be cast's (nearest even, NaN stays NaN, overflow to
// infinity), not only on the random operands the planner compared.
TEST_F(CudaMatmulBf16Result, InfinityNaNAndOverflowAreTheCastOfTheF32Result) {
  const MatmulShape s{{96, 128}, {128, 80}, false, false};
  std::vector<uint16_t> a = randomBf16(96 * 128, 1.0, rng_), b = randomBf16(128 * 80, 1.0, rng_);
  // Rows 0 and 1 of y: +inf and -inf (a's infinities meet b's row 5, made
  // positive and nonzero), row 2 NaN, row 3 sums of 2^127 terms (past f32's
  // and bf16's range, or infinities of both signs: NaN), row 4 bf16's
  // largest finite times values in [-1, 1).
  a[0 * 128 + 5] = 0x7F80;
  a[1 * 128 + 5] = 0xFF80;
  a[2 * 128 + 9] = 0x7FC0;
  for (int k = 0; k < 128; ++k) a[3 * 128 + k] = 0x7F00;
  a[4 * 128 + 11] = 0x7F7F;
  for (int n = 0; n < 80; ++n) {
    uint16_t& v = b[5 * 80 + n];
    v &= 0x7FFF;
    if (v == 0) v = 0x3F80;  // 1.0
  }
  for (const Setting& setting : kSettings) {
    ScopedEnv tune("MEGATRAIN_MATMUL_TUNE", setting.tune);
    ScopedEnv way("MEGATRAIN_MATMUL_BF16_RESULT", setting.bf16Result);
    std::unique_ptr<Backend> backend = makeCudaBackend();
    const PairBits bits = runPair(*backend, s, a, b);
    EXPECT_TRUE(sameBits(bits)) << describe(s) << " with " << label(setting) << " (MEGATRAIN_TEST_SEED=" << seed_
                                << ")";
    EXPECT_TRUE(std::isinf(bf16ToFloat(bits.fused[0])) && bits.fused[0] >> 15 == 0) << label(setting);
    EXPECT_TRUE(std::isinf(bf16ToFloat(bits.fused[80])) && bits.fused[80] >> 15 == 1) << label(setting);
    EXPECT_TRUE(std::isnan(bf16ToFloat(bits.fused[2 * 80]))) << label(setting);
  }
}

// Against the CPU twin (the double sum rounded to f32, then to bf16): the
// f32 sums differ by the f32 accumulation, within 1e-3 of the output's scale
// (the bf16-operand matmul's tolerance), and a sum that lands near a bf16
// rounding boundary may round to the neighbour: one bf16 ulp, 2^-8 relative,
// so 1e-2 relative to |cpu| + the output's largest.
TEST_F(CudaMatmulBf16Result, MatchesTheCpuTwin) {
  const MatmulShape shapes[] = {
      {{77, 130}, {130, 64}, false, false},
      {{130, 77}, {64, 130}, true, true},
      {{2, 3, 77, 64}, {130, 64}, false, true},
      {{2, 1, 33, 65}, {1, 3, 65, 17}, false, false},
      {{256, 2048}, {2048, 2048}, false, true},  // the v projection, tokens cut to 256
      {{3, 0}, {0, 4}, false, false},            // an empty sum: +0
  };
  std::vector<KernelCase> cases;
  std::vector<std::vector<double>> expected;
  for (const MatmulShape& s : shapes) {
    HostTensor a = randomTensor(s.a, plan::BF16, rng_), b = randomTensor(s.b, plan::BF16, rng_);
    cases.push_back({"matmul",
                     {a, b},
                     {{matmulResult(s), plan::BF16}},
                     {intAttr("transpose_a", s.transA), intAttr("transpose_b", s.transB),
                      stringAttr("precision", "bf16")}});
    CpuBackend cpu;
    expected.push_back(runCase(cpu, oneKernelPlan(cases.back()), cases.back())[0].values);
  }
  for (const char* way : {"auto", "via-f32"}) {
    ScopedEnv setting("MEGATRAIN_MATMUL_BF16_RESULT", way);
    std::unique_ptr<Backend> backend = makeCudaBackend();  // forms are planned afresh under this setting
    for (size_t i = 0; i < cases.size(); ++i) {
      const std::vector<double> actual = runCase(*backend, oneKernelPlan(cases[i]), cases[i])[0].values;
      ASSERT_EQ(actual.size(), expected[i].size());
      double scale = 0;
      for (double v : expected[i]) scale = std::max(scale, std::abs(v));
      size_t bad = 0, first = 0;
      for (size_t j = 0; j < actual.size(); ++j)
        if (!(std::abs(actual[j] - expected[i][j]) <= 1e-2 * (std::abs(expected[i][j]) + scale)) && bad++ == 0)
          first = j;
      EXPECT_EQ(bad, 0u) << describe(cases[i]) << " with MEGATRAIN_MATMUL_BF16_RESULT=" << way << ": element "
                         << first << " cuda " << actual[first] << ", cpu " << expected[i][first]
                         << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
    }
  }
}

// matmul_add has no bf16 result, f32 operands none either, and an unknown
// MEGATRAIN_MATMUL_BF16_RESULT is named.
TEST_F(CudaMatmulBf16Result, RefusalsAreNamed) {
  HostTensor a = randomTensor({4, 5}, plan::BF16, rng_), b = randomTensor({5, 3}, plan::BF16, rng_);
  const std::string add = cudaError({"matmul_add", {a, b, randomTensor({4, 3}, plan::BF16, rng_)}, {{{4, 3}, plan::BF16}}});
  EXPECT_NE(add.find("only matmul rounds its product to bf16"), std::string::npos) << add;
  const std::string f32 = cudaError({"matmul", {randomTensor({4, 5}, plan::F32, rng_), randomTensor({5, 3}, plan::F32, rng_)},
                                     {{{4, 3}, plan::BF16}}});
  EXPECT_NE(f32.find("f32 x f32 -> bf16"), std::string::npos) << f32;
  ScopedEnv bad("MEGATRAIN_MATMUL_BF16_RESULT", "sometimes");
  std::unique_ptr<Backend> backend = makeCudaBackend();
  const KernelCase c{"matmul", {a, b}, {{{4, 3}, plan::BF16}}, {stringAttr("precision", "bf16")}};
  std::string message;
  try {
    runCase(*backend, oneKernelPlan(c), c);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("MEGATRAIN_MATMUL_BF16_RESULT"), std::string::npos) << message;
}

}  // namespace
}  // namespace megatrain::runtime::testing
