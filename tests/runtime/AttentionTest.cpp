// AttentionTest.cpp - attention against a materialized softmax(q k^T * scale + mask) v,
// attention_grad against finite differences, rotary and rotary_grad against their formula and adjoint.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "TestUtil.h"

namespace megatrain::runtime::testing {
namespace {

struct AttentionShape {
  int64_t b, hq, hkv, sq, skv, d;
};

// y [b, hq, sq, d] and lse [b, hq, sq] the plain way: every score, the mask
// as -inf, a full softmax per row.
void attentionReference(const AttentionShape& s, const std::vector<double>& q, const std::vector<double>& k,
                        const std::vector<double>& v, double scale, bool causal, std::vector<double>& y,
                        std::vector<double>& lse) {
  y.assign(s.b * s.hq * s.sq * s.d, 0.0);
  lse.assign(s.b * s.hq * s.sq, 0.0);
  std::vector<double> scores(s.skv);
  for (int64_t b = 0; b < s.b; ++b)
    for (int64_t h = 0; h < s.hq; ++h) {
      const int64_t kvh = b * s.hkv + h / (s.hq / s.hkv);
      for (int64_t i = 0; i < s.sq; ++i) {
        const int64_t row = (b * s.hq + h) * s.sq + i;
        double top = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < s.skv; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < s.d; ++c) dot += q[row * s.d + c] * k[(kvh * s.skv + j) * s.d + c];
          scores[j] = causal && j > i ? -std::numeric_limits<double>::infinity() : dot * scale;
          top = std::max(top, scores[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < s.skv; ++j) sum += std::exp(scores[j] - top);
        for (int64_t j = 0; j < s.skv; ++j) {
          const double p = std::exp(scores[j] - top) / sum;
          for (int64_t c = 0; c < s.d; ++c) y[row * s.d + c] += p * v[(kvh * s.skv + j) * s.d + c];
        }
        lse[row] = top + std::log(sum);
      }
    }
}

std::vector<plan::Attribute> attrs(double scale, bool causal) {
  return {floatAttr("scale", scale), intAttr("causal", causal ? 1 : 0)};
}

struct Case {
  AttentionShape shape;
  bool causal;
};

class AttentionTest : public ::testing::TestWithParam<plan::DType> {};

TEST_P(AttentionTest, MatchesAMaterializedSoftmax) {
  std::mt19937 rng(51);
  const plan::DType dtype = GetParam();
  // Multi-head, grouped-query, multi-query; causal, and not with more keys than queries.
  for (const Case& c : {Case{{2, 2, 2, 5, 5, 4}, true}, Case{{1, 4, 2, 6, 6, 3}, true},
                        Case{{2, 4, 1, 3, 3, 8}, true}, Case{{1, 4, 2, 3, 7, 5}, false}}) {
    const AttentionShape& s = c.shape;
    const HostTensor q = randomTensor({s.b, s.hq, s.sq, s.d}, dtype, rng, -2, 2);
    const HostTensor k = randomTensor({s.b, s.hkv, s.skv, s.d}, dtype, rng, -2, 2);
    const HostTensor v = randomTensor({s.b, s.hkv, s.skv, s.d}, dtype, rng);
    const std::vector<HostTensor> out =
        runKernel("attention", {q, k, v}, {{{s.b, s.hq, s.sq, s.d}, dtype}, {{s.b, s.hq, s.sq}, dtype}},
                  attrs(0.4, c.causal));
    std::vector<double> y, lse;
    attentionReference(s, q.values, k.values, v.values, 0.4, c.causal, y, lse);
    expectAllNear(out[0].values, y, 5 * tolerance(dtype));
    expectAllNear(out[1].values, lse, 5 * tolerance(dtype));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AttentionTest, ::testing::Values(plan::F32, plan::F64),
                         [](const auto& info) { return info.param == plan::F32 ? "f32" : "f64"; });

// L = sum(y * w), so dy = w; dq, dk and dv against central differences of the
// reference, on grouped-query causal attention (dk and dv sum over 2 query heads).
TEST(AttentionGrad, MatchesFiniteDifferences) {
  std::mt19937 rng(52);
  const AttentionShape s{1, 4, 2, 4, 4, 3};
  const double scale = 0.6;
  const std::vector<int64_t> qShape{s.b, s.hq, s.sq, s.d}, kvShape{s.b, s.hkv, s.skv, s.d},
      lseShape{s.b, s.hq, s.sq};
  const HostTensor q = randomTensor(qShape, plan::F64, rng, -1.5, 1.5);
  const HostTensor k = randomTensor(kvShape, plan::F64, rng, -1.5, 1.5);
  const HostTensor v = randomTensor(kvShape, plan::F64, rng);
  const HostTensor w = randomTensor(qShape, plan::F64, rng);
  const std::vector<HostTensor> fwd =
      runKernel("attention", {q, k, v}, {{qShape, plan::F64}, {lseShape, plan::F64}}, attrs(scale, true));
  const std::vector<HostTensor> grads =
      runKernel("attention_grad", {q, k, v, fwd[0], fwd[1], w},
                {{qShape, plan::F64}, {kvShape, plan::F64}, {kvShape, plan::F64}}, attrs(scale, true));

  auto loss = [&](const std::vector<double>& qv, const std::vector<double>& kv, const std::vector<double>& vv) {
    std::vector<double> y, lse;
    attentionReference(s, qv, kv, vv, scale, true, y, lse);
    double sum = 0;
    for (size_t i = 0; i < y.size(); ++i) sum += y[i] * w.values[i];
    return sum;
  };
  const double h = 1e-6;
  for (int which = 0; which < 3; ++which)
    for (size_t i = 0; i < grads[which].values.size(); ++i) {
      std::vector<double> qv = q.values, kv = k.values, vv = v.values;
      std::vector<double>& x = which == 0 ? qv : which == 1 ? kv : vv;
      x[i] += h;
      const double up = loss(qv, kv, vv);
      x[i] -= 2 * h;
      const double numeric = (up - loss(qv, kv, vv)) / (2 * h);
      EXPECT_NEAR(grads[which].values[i], numeric, 1e-7) << "output " << which << " element " << i;
    }
}

TEST(AttentionErrors, KvHeadsMustDivideQueryHeads) {
  std::mt19937 rng(53);
  const HostTensor q = randomTensor({1, 3, 2, 4}, plan::F32, rng);
  const HostTensor kv = randomTensor({1, 2, 2, 4}, plan::F32, rng);
  EXPECT_EQ(kernelError("attention", {q, kv, kv}, {{{1, 3, 2, 4}, plan::F32}, {{1, 3, 2}, plan::F32}},
                        attrs(0.5, true)),
            "attention: k [1, 2, 2, 4] does not fit q [1, 3, 2, 4] as [B, Hkv, Skv, D] with Hkv dividing Hq");
}

// ---- rotary ----

// y = x * cos + rotate_half(x) * sin with cos, sin [S, D] broadcast over x [N, S, D].
std::vector<double> rotaryReference(const HostTensor& x, const HostTensor& cos, const HostTensor& sin) {
  const int64_t d = x.shape.back(), half = d / 2, table = cos.elements();
  std::vector<double> y(x.values.size());
  for (size_t i = 0; i < y.size(); ++i) {
    const int64_t j = static_cast<int64_t>(i) % d, t = static_cast<int64_t>(i) % table;
    const double rotated = j < half ? -x.values[i + half] : x.values[i - half];
    y[i] = x.values[i] * cos.values[t] + rotated * sin.values[t];
  }
  return y;
}

class RotaryTest : public ::testing::TestWithParam<plan::DType> {};

TEST_P(RotaryTest, MatchesTheFormula) {
  std::mt19937 rng(54);
  const plan::DType dtype = GetParam();
  const HostTensor x = randomTensor({2, 3, 5, 6}, dtype, rng, -2, 2);
  HostTensor cos = randomTensor({1, 1, 5, 6}, dtype, rng), sin = randomTensor({1, 1, 5, 6}, dtype, rng);
  const HostTensor y = runKernel("rotary", {x, cos, sin}, {{{2, 3, 5, 6}, dtype}})[0];
  expectAllNear(y.values, rotaryReference(x, cos, sin), 5 * tolerance(dtype));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RotaryTest, ::testing::Values(plan::F32, plan::F64),
                         [](const auto& info) { return info.param == plan::F32 ? "f32" : "f64"; });

// rotary_grad is rotary's adjoint: <rotary(x), w> = <x, rotary_grad(w)>, with
// tables whose halves differ (so sin must be read at the partner position).
TEST(RotaryGrad, IsTheAdjoint) {
  std::mt19937 rng(55);
  const HostTensor x = randomTensor({3, 4, 8}, plan::F64, rng);
  const HostTensor w = randomTensor({3, 4, 8}, plan::F64, rng);
  const HostTensor cos = randomTensor({4, 8}, plan::F64, rng), sin = randomTensor({4, 8}, plan::F64, rng);
  const HostTensor y = runKernel("rotary", {x, cos, sin}, {{{3, 4, 8}, plan::F64}})[0];
  const HostTensor dx = runKernel("rotary_grad", {w, cos, sin}, {{{3, 4, 8}, plan::F64}})[0];
  double lhs = 0, rhs = 0;
  for (size_t i = 0; i < x.values.size(); ++i) {
    lhs += y.values[i] * w.values[i];
    rhs += x.values[i] * dx.values[i];
  }
  EXPECT_NEAR(lhs, rhs, 1e-12 * (1 + std::abs(lhs)));
  // And the Jacobian column by column: rotary is linear in x.
  for (size_t i = 0; i < x.values.size(); ++i) {
    HostTensor e = x;
    std::fill(e.values.begin(), e.values.end(), 0.0);
    e.values[i] = 1;
    const HostTensor column = runKernel("rotary", {e, cos, sin}, {{{3, 4, 8}, plan::F64}})[0];
    double expected = 0;
    for (size_t j = 0; j < column.values.size(); ++j) expected += column.values[j] * w.values[j];
    EXPECT_NEAR(dx.values[i], expected, 1e-12) << "element " << i;
  }
}

TEST(RotaryErrors, TablesMustKeepTheLastDim) {
  std::mt19937 rng(56);
  const HostTensor x = randomTensor({2, 4, 6}, plan::F32, rng);
  const HostTensor table = randomTensor({4, 1}, plan::F32, rng);
  EXPECT_EQ(kernelError("rotary", {x, table, table}, {{{2, 4, 6}, plan::F32}}),
            "rotary: cos and sin [4, 1] must broadcast to [2, 4, 6] and keep its last dim");
}

}  // namespace
}  // namespace megatrain::runtime::testing
