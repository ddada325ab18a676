// AttentionLayoutTest.cpp - attention, attention_grad, rotary and rotary_grad with operands laid out
// [B, S, H, D] (the `bshd` attribute) equal the [B, H, S, D] computation transposed, bit for bit.
#include <gtest/gtest.h>

#include "TestUtil.h"

namespace megatrain::runtime::testing {
namespace {

// x [B, A, C, D] -> [B, C, A, D].
HostTensor swapHeads(const HostTensor& x) {
  HostTensor out = x;
  const int64_t b = x.shape[0], a = x.shape[1], c = x.shape[2], d = x.shape[3];
  out.shape = {b, c, a, d};
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < a; ++j)
      for (int64_t k = 0; k < c; ++k)
        for (int64_t e = 0; e < d; ++e)
          out.values[((i * c + k) * a + j) * d + e] = x.values[((i * a + j) * c + k) * d + e];
  return out;
}

HostTensor laidOut(const HostTensor& x, bool bshd) { return bshd ? swapHeads(x) : x; }

std::vector<int64_t> swappedShape(std::vector<int64_t> s, bool bshd) {
  if (bshd) std::swap(s[1], s[2]);
  return s;
}

void expectSame(const HostTensor& actual, const HostTensor& expected, const std::string& what) {
  ASSERT_EQ(actual.shape, expected.shape) << what;
  for (size_t i = 0; i < actual.values.size(); ++i)
    ASSERT_EQ(actual.values[i], expected.values[i]) << what << " element " << i;
}

struct Shape4 {
  int64_t b, hq, hkv, sq, skv, d;
};

std::vector<plan::Attribute> attrs(double scale, bool causal, int64_t bshd) {
  std::vector<plan::Attribute> list{floatAttr("scale", scale), intAttr("causal", causal ? 1 : 0)};
  if (bshd) list.push_back(intAttr("bshd", bshd));
  return list;
}

class AttentionLayoutTest : public ::testing::TestWithParam<plan::DType> {};

// Every combination of q, k, v, y (and dy in the gradient) layouts, on
// grouped-query causal attention and on non-causal attention with more keys.
TEST_P(AttentionLayoutTest, EveryLayoutIsTheTransposedDenseResult) {
  const plan::DType dtype = GetParam();
  std::mt19937 rng(71);
  for (const auto& [s, causal] : {std::pair{Shape4{2, 4, 2, 5, 5, 4}, true}, std::pair{Shape4{1, 2, 1, 3, 6, 2}, false}}) {
    const std::vector<int64_t> qShape{s.b, s.hq, s.sq, s.d}, kvShape{s.b, s.hkv, s.skv, s.d},
        lseShape{s.b, s.hq, s.sq};
    const HostTensor q = randomTensor(qShape, dtype, rng, -2, 2);
    const HostTensor k = randomTensor(kvShape, dtype, rng, -2, 2);
    const HostTensor v = randomTensor(kvShape, dtype, rng);
    const HostTensor dy = randomTensor(qShape, dtype, rng);
    const std::vector<HostTensor> fwd =
        runKernel("attention", {q, k, v}, {{qShape, dtype}, {lseShape, dtype}}, attrs(0.5, causal, 0));
    const std::vector<HostTensor> grad =
        runKernel("attention_grad", {q, k, v, fwd[0], fwd[1], dy}, {{qShape, dtype}, {kvShape, dtype}, {kvShape, dtype}},
                  attrs(0.5, causal, 0));
    for (int64_t bits = 1; bits < 32; ++bits) {
      const bool bq = bits & 1, bk = bits & 2, bv = bits & 4, by = bits & 8, bdy = bits & 16;
      const std::string what = "bshd " + std::to_string(bits) + (causal ? " causal" : "");
      if (bits < 16) {
        const std::vector<HostTensor> out =
            runKernel("attention", {laidOut(q, bq), laidOut(k, bk), laidOut(v, bv)},
                      {{swappedShape(qShape, by), dtype}, {lseShape, dtype}}, attrs(0.5, causal, bits));
        expectSame(out[0], laidOut(fwd[0], by), what + " y");
        expectSame(out[1], fwd[1], what + " lse");
      }
      const std::vector<HostTensor> out = runKernel(
          "attention_grad",
          {laidOut(q, bq), laidOut(k, bk), laidOut(v, bv), laidOut(fwd[0], by), fwd[1], laidOut(dy, bdy)},
          {{swappedShape(qShape, bq), dtype}, {swappedShape(kvShape, bk), dtype}, {swappedShape(kvShape, bv), dtype}},
          attrs(0.5, causal, bits));
      expectSame(out[0], laidOut(grad[0], bq), what + " dq");
      expectSame(out[1], laidOut(grad[1], bk), what + " dk");
      expectSame(out[2], laidOut(grad[2], bv), what + " dv");
    }
  }
}

TEST_P(AttentionLayoutTest, RotaryInBshdIsTheTransposedResult) {
  const plan::DType dtype = GetParam();
  std::mt19937 rng(72);
  const HostTensor x = randomTensor({2, 3, 5, 6}, dtype, rng, -2, 2);  // [B, H, S, D]
  for (const std::vector<int64_t>& table : {std::vector<int64_t>{1, 1, 5, 6}, std::vector<int64_t>{2, 1, 5, 6},
                                            std::vector<int64_t>{5, 6}}) {
    const HostTensor cos = randomTensor(table, dtype, rng), sin = randomTensor(table, dtype, rng);
    for (const char* kernel : {"rotary", "rotary_grad"}) {
      const HostTensor dense = runKernel(kernel, {x, cos, sin}, {{x.shape, dtype}})[0];
      const HostTensor bshd =
          runKernel(kernel, {swapHeads(x), cos, sin}, {{{2, 5, 3, 6}, dtype}}, {intAttr("bshd", 1)})[0];
      expectSame(bshd, swapHeads(dense), std::string(kernel) + " tables of rank " + std::to_string(table.size()));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AttentionLayoutTest, ::testing::Values(plan::F32, plan::F64),
                         [](const auto& info) { return info.param == plan::F32 ? "f32" : "f64"; });

TEST(AttentionLayoutErrors, BadBitsAndShapesAreNamed) {
  std::mt19937 rng(73);
  const HostTensor q = randomTensor({1, 2, 3, 4}, plan::F32, rng);
  EXPECT_EQ(kernelError("attention", {q, q, q}, {{{1, 2, 3, 4}, plan::F32}, {{1, 2, 3}, plan::F32}},
                        attrs(0.5, true, 16)),
            "attention: bshd 16 has bits outside 15 (q 1, k 2, v 4, y 8)");
  // v declared [B, S, H, D] but given [B, H, S, D].
  EXPECT_EQ(kernelError("attention", {q, q, q}, {{{1, 2, 3, 4}, plan::F32}, {{1, 2, 3}, plan::F32}},
                        attrs(0.5, true, 4)),
            "attention: v 'in2' has shape [1, 2, 3, 4], expected [1, 3, 2, 4]");
  const HostTensor x = randomTensor({2, 4, 6}, plan::F32, rng);
  const HostTensor table = randomTensor({4, 6}, plan::F32, rng);
  EXPECT_EQ(kernelError("rotary", {x, table, table}, {{{2, 4, 6}, plan::F32}}, {intAttr("bshd", 1)}),
            "rotary: bshd needs x of rank 4, got [2, 4, 6]");
  const HostTensor x4 = randomTensor({1, 3, 4, 6}, plan::F32, rng);  // [B, S=3, H=4, D]
  EXPECT_EQ(kernelError("rotary", {x4, table, table}, {{{1, 3, 4, 6}, plan::F32}}, {intAttr("bshd", 1)}),
            "rotary: cos and sin [4, 6] must broadcast to [1, 4, 3, 6] and keep its last dim (x [1, 3, 4, 6] read "
            "as [B, H, S, D])");
}

}  // namespace
}  // namespace megatrain::runtime::testing
