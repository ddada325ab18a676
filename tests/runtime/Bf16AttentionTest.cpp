// Bf16AttentionTest.cpp - the bf16 forms of attention, attention_grad, rotary and rotary_grad (--precision bf16):
// each bf16 result is bit for bit floatToBf16 of the f32 kernel's result on the operands widened to f32, and
// every other combination of element types is refused with a message naming the operand.
#include <cmath>
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "TestUtil.h"
#include "megatrain/plan/Bf16.h"

namespace megatrain::runtime::testing {
namespace {

using Dims = std::vector<int64_t>;

// `x` (values already bf16) as an f32 tensor: the widening is exact.
HostTensor asF32(HostTensor x) {
  x.dtype = plan::F32;
  return x;
}

// The bits a bf16 output holds against the f32 result rounded to bf16, element by element.
void expectRoundedBitwise(const HostTensor& bf16, const HostTensor& f32, const std::string& what) {
  ASSERT_EQ(bf16.values.size(), f32.values.size()) << what;
  for (size_t i = 0; i < f32.values.size(); ++i)
    ASSERT_EQ(floatToBf16(static_cast<float>(bf16.values[i])), floatToBf16(static_cast<float>(f32.values[i])))
        << what << " element " << i << ": bf16 " << bf16.values[i] << ", f32 " << f32.values[i];
}

// Equal doubles, NaN excepted (none here); an f32 result on both sides.
void expectSame(const HostTensor& actual, const HostTensor& expected, const std::string& what) {
  ASSERT_EQ(actual.values.size(), expected.values.size()) << what;
  for (size_t i = 0; i < actual.values.size(); ++i)
    ASSERT_EQ(actual.values[i], expected.values[i]) << what << " element " << i;
}

Dims laid(Dims s, bool bshd) {
  if (bshd) std::swap(s[1], s[2]);
  return s;
}

struct Case {
  int64_t b, hq, hkv, sq, skv, d;
  bool causal;
  int64_t bshd;  // q 1, k 2, v 4, y 8, dy 16
};

std::string text(const Case& c) {
  return "B " + std::to_string(c.b) + " Hq " + std::to_string(c.hq) + " Hkv " + std::to_string(c.hkv) + " Sq " +
         std::to_string(c.sq) + " Skv " + std::to_string(c.skv) + " D " + std::to_string(c.d) +
         (c.causal ? " causal" : "") + " bshd " + std::to_string(c.bshd);
}

std::vector<plan::Attribute> attrs(const Case& c, int64_t bshd, const char* precision = "bf16") {
  std::vector<plan::Attribute> list{floatAttr("scale", 0.35), intAttr("causal", c.causal ? 1 : 0),
                                    stringAttr("precision", precision)};
  if (bshd) list.push_back(intAttr("bshd", bshd));
  return list;
}

// Multi-head causal, grouped-query, multi-query, more keys than queries;
// the plain layout, the Llama plans' (forward 15, backward 31) and a mix.
TEST(Bf16Attention, IsTheRoundedF32KernelBitForBit) {
  std::mt19937 rng(81);
  const Case cases[] = {{2, 2, 2, 5, 5, 8, true, 0},    {1, 4, 2, 6, 6, 4, true, 31},
                        {2, 4, 1, 3, 3, 8, true, 31},   {1, 4, 2, 3, 7, 5, false, 0},
                        {1, 4, 2, 7, 7, 6, false, 4 | 16}};
  for (const Case& c : cases) {
    const bool bq = c.bshd & 1, bk = c.bshd & 2, bv = c.bshd & 4, by = c.bshd & 8, bdy = c.bshd & 16;
    const Dims q{c.b, c.hq, c.sq, c.d}, kv{c.b, c.hkv, c.skv, c.d}, lse{c.b, c.hq, c.sq};
    const HostTensor hq = randomTensor(laid(q, bq), plan::BF16, rng, -2, 2);
    const HostTensor hk = randomTensor(laid(kv, bk), plan::BF16, rng, -2, 2);
    const HostTensor hv = randomTensor(laid(kv, bv), plan::BF16, rng);
    const std::vector<HostTensor> fwd = runKernel("attention", {hq, hk, hv},
                                                  {{laid(q, by), plan::BF16}, {lse, plan::F32}}, attrs(c, c.bshd & 15));
    const std::vector<HostTensor> ref =
        runKernel("attention", {asF32(hq), asF32(hk), asF32(hv)}, {{laid(q, by), plan::F32}, {lse, plan::F32}},
                  attrs(c, c.bshd & 15, "fp32"));
    expectRoundedBitwise(fwd[0], ref[0], text(c) + " y");
    expectSame(fwd[1], ref[1], text(c) + " lse");

    // The gradient on the bf16 forward's y and lse, with a fresh dy.
    const HostTensor dy = randomTensor(laid(q, bdy), plan::BF16, rng);
    const std::vector<HostTensor> grad =
        runKernel("attention_grad", {hq, hk, hv, fwd[0], fwd[1], dy},
                  {{laid(q, bq), plan::BF16}, {laid(kv, bk), plan::BF16}, {laid(kv, bv), plan::BF16}}, attrs(c, c.bshd));
    const std::vector<HostTensor> gradRef =
        runKernel("attention_grad", {asF32(hq), asF32(hk), asF32(hv), asF32(fwd[0]), fwd[1], asF32(dy)},
                  {{laid(q, bq), plan::F32}, {laid(kv, bk), plan::F32}, {laid(kv, bv), plan::F32}},
                  attrs(c, c.bshd, "fp32"));
    for (int i = 0; i < 3; ++i) expectRoundedBitwise(grad[i], gradRef[i], text(c) + " gradient " + std::to_string(i));
  }
}

// `x` rounded to bf16.
HostTensor rounded(const HostTensor& x) {
  HostTensor out = x;
  out.dtype = plan::BF16;
  for (double& v : out.values) v = bf16ToFloat(floatToBf16(static_cast<float>(v)));
  return out;
}

// f32 operands with the precision "bf16" compute as the device does (cuDNN
// rounds them to bf16 and widens its bf16 results): bit for bit the bf16
// form's results, widened, on the operands rounded to bf16, lse included. So
// a plan trains alike with and without mt-bf16-attention.
TEST(Bf16Attention, F32OperandsWithBf16PrecisionAreTheBf16FormWidened) {
  std::mt19937 rng(85);
  for (const Case& c : {Case{1, 4, 2, 6, 6, 8, true, 0}, Case{2, 2, 1, 5, 7, 4, false, 31}}) {
    const bool bq = c.bshd & 1, bk = c.bshd & 2, bv = c.bshd & 4, by = c.bshd & 8, bdy = c.bshd & 16;
    const Dims q{c.b, c.hq, c.sq, c.d}, kv{c.b, c.hkv, c.skv, c.d}, lse{c.b, c.hq, c.sq};
    const HostTensor hq = randomTensor(laid(q, bq), plan::F32, rng, -2, 2);
    const HostTensor hk = randomTensor(laid(kv, bk), plan::F32, rng, -2, 2);
    const HostTensor hv = randomTensor(laid(kv, bv), plan::F32, rng);
    const std::vector<HostTensor> f32 = runKernel("attention", {hq, hk, hv},
                                                  {{laid(q, by), plan::F32}, {lse, plan::F32}}, attrs(c, c.bshd & 15));
    const std::vector<HostTensor> bf16 =
        runKernel("attention", {rounded(hq), rounded(hk), rounded(hv)}, {{laid(q, by), plan::BF16}, {lse, plan::F32}},
                  attrs(c, c.bshd & 15));
    expectSame(f32[0], bf16[0], text(c) + " y");
    expectSame(f32[1], bf16[1], text(c) + " lse");
    // Unrounded y and dy in, as the f32 plan's gradient reads them.
    const HostTensor y = randomTensor(laid(q, by), plan::F32, rng), dy = randomTensor(laid(q, bdy), plan::F32, rng);
    const std::vector<HostTensor> grad =
        runKernel("attention_grad", {hq, hk, hv, y, f32[1], dy},
                  {{laid(q, bq), plan::F32}, {laid(kv, bk), plan::F32}, {laid(kv, bv), plan::F32}}, attrs(c, c.bshd));
    const std::vector<HostTensor> gradBf16 =
        runKernel("attention_grad", {rounded(hq), rounded(hk), rounded(hv), rounded(y), f32[1], rounded(dy)},
                  {{laid(q, bq), plan::BF16}, {laid(kv, bk), plan::BF16}, {laid(kv, bv), plan::BF16}}, attrs(c, c.bshd));
    for (int i = 0; i < 3; ++i) expectSame(grad[i], gradBf16[i], text(c) + " gradient " + std::to_string(i));
    // fp32 reads the unrounded values: another result.
    const std::vector<HostTensor> exact = runKernel(
        "attention", {hq, hk, hv}, {{laid(q, by), plan::F32}, {lse, plan::F32}}, attrs(c, c.bshd & 15, "fp32"));
    EXPECT_NE(exact[0].values, f32[0].values) << text(c);
  }
}

// Round to nearest even at a tie the kernel actually writes: v's rows are
// 1 and 1 + 2^-7 and every score is 0, so each y element is their mean,
// 1 + 2^-8 (exact in f32), halfway between two bf16 values: it rounds to 1
// (the even one), as the cast does.
TEST(Bf16Attention, TiesRoundToEven) {
  const Case c{1, 1, 1, 1, 2, 2, false, 0};
  HostTensor q{{1, 1, 1, 2}, plan::BF16, {0, 0}}, k{{1, 1, 2, 2}, plan::BF16, {0.5, 0.25, -1, 2}};
  HostTensor v{{1, 1, 2, 2}, plan::BF16, {1, 1, 1 + 1.0 / 128, 1 + 1.0 / 128}};
  const std::vector<HostTensor> y =
      runKernel("attention", {q, k, v}, {{{1, 1, 1, 2}, plan::BF16}, {{1, 1, 1}, plan::F32}}, attrs(c, 0));
  EXPECT_EQ(y[0].values, (std::vector<double>{1.0, 1.0}));
  EXPECT_EQ(y[1].values[0], static_cast<float>(std::log(2.0)));
}

std::string attentionError(const std::vector<plan::DType>& in, const std::vector<plan::DType>& out,
                           const char* precision = "bf16") {
  std::mt19937 rng(82);
  const Dims s{1, 2, 3, 4};
  std::vector<HostTensor> inputs;
  for (size_t i = 0; i < in.size(); ++i) inputs.push_back(randomTensor(i == 4 ? Dims{1, 2, 3} : s, in[i], rng));
  std::vector<OutputSpec> outputs;
  const bool forward = in.size() == 3;
  for (size_t i = 0; i < out.size(); ++i) outputs.push_back({forward && i == 1 ? Dims{1, 2, 3} : s, out[i]});
  std::vector<plan::Attribute> attributes{floatAttr("scale", 0.5), intAttr("causal", 1)};
  if (precision) attributes.push_back(stringAttr("precision", precision));
  return kernelError(forward ? "attention" : "attention_grad", inputs, outputs, attributes);
}

TEST(Bf16Attention, OtherTypeCombinationsAreRefused) {
  const plan::DType b = plan::BF16, f = plan::F32, d = plan::F64;
  EXPECT_EQ(attentionError({b, f, b}, {b, f}),
            "attention: k 'in1' is f32, expected bf16 (bf16 attention takes every operand but lse in bf16)");
  EXPECT_EQ(attentionError({b, b, b}, {f, f}),
            "attention: output 'out0' is f32, expected bf16 (bf16 attention takes every operand but lse in bf16)");
  EXPECT_EQ(attentionError({b, b, b}, {b, b}), "attention: lse 'out1' is bf16, expected f32 (bf16 attention keeps lse in f32)");
  EXPECT_EQ(attentionError({b, b, b}, {b, f}, nullptr), "attention: bf16 operands need the precision 'bf16', got 'fp32'");
  EXPECT_EQ(attentionError({b, b, b}, {b, f}, "tf32"), "attention: bf16 operands need the precision 'bf16', got 'tf32'");
  EXPECT_EQ(attentionError({b, b, b, b, f, f}, {b, b, b}),
            "attention_grad: dy 'in5' is f32, expected bf16 (bf16 attention takes every operand but lse in bf16)");
  EXPECT_EQ(attentionError({b, b, b, b, f, b}, {b, b, f}),
            "attention_grad: dv 'out2' is f32, expected bf16 (bf16 attention takes every operand but lse in bf16)");
  EXPECT_EQ(attentionError({b, b, b, b, d, b}, {b, b, b}),
            "attention_grad: lse 'in4' is f64, expected f32 (bf16 attention keeps lse in f32)");
  // Without bf16: one type throughout, lse included.
  EXPECT_EQ(attentionError({f, f, f}, {f, d}), "attention: lse 'out1' is f64 but q 'in0' is f32");
  EXPECT_EQ(attentionError({d, d, f}, {d, d}), "attention: v 'in2' is f32 but q 'in0' is f64");
}

// ---- rotary ----

std::string rotaryName(bool grad) { return grad ? "rotary_grad" : "rotary"; }

// x (or dy) f32 or bf16, the result f32 or bf16, tables f32: each result is
// the f32 kernel's on the widened x, rounded when the result is bf16. Plain
// [B, H, S, D] with the exports' tables and [B, S, H, D] (bshd).
TEST(Bf16Rotary, EveryCombinationIsTheF32KernelRounded) {
  std::mt19937 rng(83);
  for (bool bshd : {false, true})
    for (bool grad : {false, true}) {
      const Dims x = bshd ? Dims{2, 5, 3, 8} : Dims{2, 3, 5, 8}, table{1, 1, 5, 8};
      const std::vector<plan::Attribute> attributes =
          bshd ? std::vector<plan::Attribute>{intAttr("bshd", 1)} : std::vector<plan::Attribute>{};
      const HostTensor cos = randomTensor(table, plan::F32, rng), sin = randomTensor(table, plan::F32, rng);
      for (plan::DType xType : {plan::F32, plan::BF16}) {
        const HostTensor hx = randomTensor(x, xType, rng, -3, 3);
        const HostTensor ref = runKernel(rotaryName(grad), {asF32(hx), cos, sin}, {{x, plan::F32}}, attributes)[0];
        for (plan::DType yType : {plan::F32, plan::BF16}) {
          const std::string what = rotaryName(grad) + (bshd ? " bshd" : "") + " x " +
                                   (xType == plan::BF16 ? "bf16" : "f32") + " y " +
                                   (yType == plan::BF16 ? "bf16" : "f32");
          const HostTensor y = runKernel(rotaryName(grad), {hx, cos, sin}, {{x, yType}}, attributes)[0];
          if (yType == plan::BF16) expectRoundedBitwise(y, ref, what);
          else expectSame(y, ref, what);
        }
      }
    }
}

std::string rotaryError(bool grad, plan::DType x, plan::DType tables, plan::DType y) {
  std::mt19937 rng(84);
  return kernelError(rotaryName(grad),
                     {randomTensor({2, 4}, x, rng), randomTensor({4}, tables, rng), randomTensor({4}, tables, rng)},
                     {{{2, 4}, y}});
}

TEST(Bf16Rotary, OtherTypeCombinationsAreRefused) {
  const plan::DType b = plan::BF16, f = plan::F32, d = plan::F64;
  EXPECT_EQ(rotaryError(false, b, b, b),
            "rotary: cos 'in1' is bf16, expected f32 (with a bf16 x or output the tables stay f32)");
  EXPECT_EQ(rotaryError(true, b, d, f),
            "rotary_grad: cos 'in1' is f64, expected f32 (with a bf16 dy or output the tables stay f32)");
  EXPECT_EQ(rotaryError(false, d, f, b),
            "rotary: x 'in0' is f64, expected f32 or bf16 (with a bf16 x or output, both are f32 or bf16)");
  EXPECT_EQ(rotaryError(false, b, f, d),
            "rotary: output 'out0' is f64, expected f32 or bf16 (with a bf16 x or output, both are f32 or bf16)");
  EXPECT_EQ(rotaryError(false, f, d, f), "rotary: cos 'in1' is f64 but x 'in0' is f32");
  EXPECT_EQ(rotaryError(true, d, d, f), "rotary_grad: output 'out0' is f32 but dy 'in0' is f64");
}

}  // namespace
}  // namespace megatrain::runtime::testing
