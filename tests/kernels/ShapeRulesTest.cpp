// ShapeRulesTest.cpp - each kernel family's shape rule accepts what the kernels compute and names what it refuses.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "megatrain/kernels/Manifest.h"
#include "megatrain/kernels/ShapeRules.h"

namespace megatrain::kernels {
namespace {

struct Arg {
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
};

Attribute intAttr(const char* name, int64_t value) {
  Attribute a;
  a.name = name;
  a.kind = Attribute::Kind::Int;
  a.i = value;
  return a;
}

Attribute floatAttr(const char* name, double value) {
  Attribute a;
  a.name = name;
  a.kind = Attribute::Kind::Float;
  a.f = value;
  return a;
}

Attribute intsAttr(const char* name, std::vector<int64_t> values) {
  Attribute a;
  a.name = name;
  a.kind = Attribute::Kind::Ints;
  a.ints = std::move(values);
  return a;
}

Attribute floatsAttr(const char* name, std::vector<double> values) {
  Attribute a;
  a.name = name;
  a.kind = Attribute::Kind::Floats;
  a.floats = std::move(values);
  return a;
}

Attribute stringAttr(const char* name, const char* value) {
  Attribute a;
  a.name = name;
  a.kind = Attribute::Kind::String;
  a.s = value;
  return a;
}

const char* kNames[2][kMaxOperands] = {{"in0", "in1", "in2", "in3", "in4", "in5", "in6", "in7"},
                                       {"out0", "out1", "out2", "out3", "out4", "out5", "out6", "out7"}};

KernelCall makeCall(const char* kernel, const std::vector<Arg>& in, const std::vector<Arg>& out,
                    std::vector<Attribute> attrs = {}) {
  KernelCall call;
  call.kernel = kernel;
  call.attrs = Attributes(std::move(attrs), kernel);
  call.numIn = static_cast<int>(in.size());
  call.numOut = static_cast<int>(out.size());
  for (int side = 0; side < 2; ++side) {
    const std::vector<Arg>& args = side ? out : in;
    for (size_t i = 0; i < args.size(); ++i) {
      Operand& operand = side ? call.out[i] : call.in[i];
      operand.shape.rank = static_cast<int>(args[i].shape.size());
      for (size_t d = 0; d < args[i].shape.size(); ++d) operand.shape.dims[d] = args[i].shape[d];
      operand.dtype = args[i].dtype;
      operand.name = kNames[side][i];
    }
  }
  return call;
}

// The manifest's check of `call`: "" when it passes, else the error.
std::string check(const KernelCall& call) {
  const KernelSpec* spec = findKernelSpec(call.kernel);
  if (!spec) return std::string("no manifest entry for ") + call.kernel;
  try {
    checkKernelCall(*spec, call);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

struct RuleCase {
  const char* what;
  KernelCall call;
  std::string error;  // "" : accepted
};

std::vector<RuleCase> cases() {
  const DType i64 = DType::I64, bf16 = DType::BF16;
  return {
      {"broadcasting add", makeCall("add", {{{4, 5}}, {{5}}}, {{{4, 5}}}), ""},
      {"add to a wrong shape", makeCall("add", {{{4, 5}}, {{5}}}, {{{5, 4}}}),
       "add: output 'out0' has shape [5, 4], expected [4, 5]"},
      {"add of shapes that do not broadcast", makeCall("add", {{{4, 5}}, {{3}}}, {{{4, 5}}}),
       "add: shapes [4, 5] and [3] do not broadcast"},
      {"unary map", makeCall("exp", {{{2, 3}}}, {{{2, 3}}}), ""},
      {"unary gradient of another shape", makeCall("tanh_grad", {{{2, 3}}, {{3, 2}}}, {{{2, 3}}}),
       "tanh_grad: input 'in1' has shape [3, 2], expected [2, 3]"},
      {"max_grad", makeCall("max_grad", {{{4, 1}}, {{5}}, {{4, 5}}}, {{{4, 5}}, {{4, 5}}}), ""},
      {"gelu without a form", makeCall("gelu", {{{3}}}, {{{3}}}),
       "gelu: approximate must be \"none\" or \"tanh\", got \"\""},
      {"gelu tanh", makeCall("gelu", {{{3}}}, {{{3}}}, {stringAttr("approximate", "tanh")}), ""},
      {"batched matmul", makeCall("matmul", {{{2, 1, 4, 3}}, {{5, 3, 6}}}, {{{2, 5, 4, 6}}}), ""},
      {"matmul with transposes", makeCall("matmul", {{{3, 4}}, {{6, 3}}}, {{{4, 6}}},
                                          {intAttr("transpose_a", 1), intAttr("transpose_b", 1)}), ""},
      {"matmul inner dims", makeCall("matmul", {{{4, 3}}, {{4, 6}}}, {{{4, 6}}}),
       "matmul: inner dimensions differ: a [4, 3], b [4, 6]"},
      {"matmul precision", makeCall("matmul", {{{4, 3}}, {{3, 6}}}, {{{4, 6}}}, {stringAttr("precision", "fp8")}),
       "matmul: precision must be fp32, tf32 or bf16, got 'fp8'"},
      {"matmul_add", makeCall("matmul_add", {{{2, 4, 3}}, {{6, 3}}, {{2, 4, 6}}}, {{{2, 4, 6}}},
                              {intAttr("transpose_b", 1)}), ""},
      {"matmul_add with a bias", makeCall("matmul_add", {{{4, 3}}, {{3, 6}}, {{6}}}, {{{4, 6}}}), ""},
      {"matmul_add with a column addend", makeCall("matmul_add", {{{4, 3}}, {{3, 6}}, {{4, 1}}}, {{{4, 6}}}),
       "matmul_add: addend r 'in2' has shape [4, 1], expected [4, 6] (the output's) or [6] (a bias over its last dim)"},
      {"matmul with a bf16 result",
       makeCall("matmul", {{{4, 3}, DType::BF16}, {{3, 6}, DType::BF16}}, {{{4, 6}, DType::BF16}}), ""},
      {"matmul_add with a bf16 result",
       makeCall("matmul_add", {{{4, 3}, DType::BF16}, {{3, 6}, DType::BF16}, {{4, 6}, DType::BF16}},
                {{{4, 6}, DType::BF16}}),
       "matmul_add: the output is bf16; matmul_add writes f32 or f64 (only matmul rounds its product to bf16)"},
      {"matmul_bias_gelu", makeCall("matmul_bias_gelu", {{{2, 4, 3}, bf16}, {{6, 3}, bf16}, {{6}}},
                                    {{{2, 4, 6}}, {{2, 4, 6}}}, {intAttr("transpose_b", 1)}), ""},
      {"matmul_bias_gelu with a full addend",
       makeCall("matmul_bias_gelu", {{{4, 3}}, {{3, 6}}, {{4, 6}}}, {{{4, 6}}, {{4, 6}}}),
       "matmul_bias_gelu: bias 'in2' has shape [4, 6], expected [6] (the output's last dim)"},
      {"matmul_bias_gelu with z of another shape",
       makeCall("matmul_bias_gelu", {{{4, 3}}, {{3, 6}}, {{6}}}, {{{4, 6}}, {{6, 4}}}),
       "matmul_bias_gelu: pre-activation z 'out1' has shape [6, 4], expected [4, 6]"},
      {"matmul_bias_gelu in f64",
       makeCall("matmul_bias_gelu", {{{4, 3}, DType::F64}, {{3, 6}, DType::F64}, {{6}, DType::F64}},
                {{{4, 6}, DType::F64}, {{4, 6}, DType::F64}}),
       "matmul_bias_gelu: the bias, y and z are f32; got bias f64, y f64, z f64"},
      {"matmul_gelu_grad", makeCall("matmul_gelu_grad", {{{2, 4, 3}, bf16}, {{6, 3}, bf16}, {{2, 4, 6}}},
                                    {{{2, 4, 6}}}, {intAttr("transpose_b", 1)}), ""},
      {"matmul_gelu_grad with z of another shape",
       makeCall("matmul_gelu_grad", {{{4, 3}}, {{3, 6}}, {{6, 4}}}, {{{4, 6}}}),
       "matmul_gelu_grad: pre-activation z 'in2' has shape [6, 4], expected [4, 6]"},
      {"matmul_gelu_grad with a bf16 z",
       makeCall("matmul_gelu_grad", {{{4, 3}, bf16}, {{3, 6}, bf16}, {{4, 6}, bf16}}, {{{4, 6}}}),
       "matmul_gelu_grad: z and dz are f32; got z bf16, dz f32"},
      {"reshape", makeCall("reshape", {{{2, 6}}}, {{{3, 4}}}), ""},
      {"reshape to fewer elements", makeCall("reshape", {{{2, 6}}}, {{{5}}}), "reshape: cannot reshape [2, 6] to [5]"},
      {"transpose", makeCall("transpose", {{{2, 3, 4}}}, {{{4, 2, 3}}}, {intsAttr("perm", {2, 0, 1})}), ""},
      {"transpose, not a permutation", makeCall("transpose", {{{2, 3}}}, {{{3, 2}}}, {intsAttr("perm", {0, 0})}),
       "transpose: perm is not a permutation"},
      {"sum_to", makeCall("sum_to", {{{4, 5}}}, {{{1, 5}}}), ""},
      {"reduce_mean keepdims", makeCall("reduce_mean", {{{2, 3, 4}}}, {{{2, 1, 4}}}, {intsAttr("axes", {1})}), ""},
      {"reduce, unsorted axes", makeCall("reduce_sum", {{{2, 3, 4}}}, {{{1, 1, 1}}}, {intsAttr("axes", {1, 0})}),
       "reduce_sum: axes must be sorted and distinct"},
      {"softmax", makeCall("softmax", {{{2, 7}}}, {{{2, 7}}}, {intAttr("axis", 1)}), ""},
      {"softmax axis", makeCall("softmax", {{{2, 7}}}, {{{2, 7}}}, {intAttr("axis", 2)}),
       "softmax: axis 2 is outside [2, 7]"},
      {"gather", makeCall("gather", {{{10, 4}}, {{2, 3}, i64}}, {{{2, 3, 4}}}), ""},
      {"gather with f32 indices", makeCall("gather", {{{10, 4}}, {{3}}}, {{{3, 4}}}),
       "gather: indices 'in1' is f32, expected i64"},
      {"gather_grad", makeCall("gather_grad", {{{3}, i64}, {{3, 4}}}, {{{10, 4}}}), ""},
      {"layer_norm", makeCall("layer_norm", {{{4, 8}}, {{8}}, {{8}}}, {{{4, 8}}}, {intAttr("axis", 1)}), ""},
      {"layer_norm bias", makeCall("layer_norm", {{{4, 8}}, {{8}}, {{4}}}, {{{4, 8}}}, {intAttr("axis", 1)}),
       "layer_norm: bias 'in2' has shape [4], expected [8]"},
      {"rms_norm_grad", makeCall("rms_norm_grad", {{{4, 8}}, {{8}}, {{4, 8}}}, {{{4, 8}}, {{8}}},
                                 {intAttr("axis", 1), floatAttr("epsilon", 1e-6)}), ""},
      {"rms_norm without epsilon", makeCall("rms_norm", {{{4, 8}}, {{8}}}, {{{4, 8}}}, {intAttr("axis", 1)}),
       "rms_norm: attribute 'epsilon' is missing"},
      {"rms_norm_grad_add", makeCall("rms_norm_grad_add", {{{4, 8}}, {{8}}, {{4, 8}}, {{4, 8}}}, {{{4, 8}}, {{8}}},
                                     {intAttr("axis", 1), floatAttr("epsilon", 1e-6)}), ""},
      {"rms_norm_grad_add with dx_bf16",
       makeCall("rms_norm_grad_add", {{{4, 8}}, {{8}}, {{4, 8}}, {{4, 8}}}, {{{4, 8}}, {{8}}, {{4, 8}, bf16}},
                {intAttr("axis", 1), floatAttr("epsilon", 1e-6)}), ""},
      {"rms_norm_grad_add without dweight",
       makeCall("rms_norm_grad_add", {{{4, 8}}, {{8}}, {{4, 8}}, {{4, 8}}}, {{{4, 8}}},
                {intAttr("axis", 1), floatAttr("epsilon", 1e-6)}),
       "rms_norm_grad_add: 1 outputs, it writes 2 (dx, dweight) or 3 (and dx_bf16)"},
      {"rms_norm_grad_add with four outputs",
       makeCall("rms_norm_grad_add", {{{4, 8}}, {{8}}, {{4, 8}}, {{4, 8}}},
                {{{4, 8}}, {{8}}, {{4, 8}, bf16}, {{4, 8}, bf16}}, {intAttr("axis", 1), floatAttr("epsilon", 1e-6)}),
       "rms_norm_grad_add: 4 outputs, it writes 2 (dx, dweight) or 3 (and dx_bf16)"},
      {"rms_norm_grad_add addend of another shape",
       makeCall("rms_norm_grad_add", {{{4, 8}}, {{8}}, {{4, 8}}, {{8}}}, {{{4, 8}}, {{8}}},
                {intAttr("axis", 1), floatAttr("epsilon", 1e-6)}),
       "rms_norm_grad_add: addend 'in3' has shape [8], expected [4, 8]"},
      {"rms_norm_grad_add addend of another type",
       makeCall("rms_norm_grad_add", {{{4, 8}}, {{8}}, {{4, 8}}, {{4, 8}, DType::F64}}, {{{4, 8}}, {{8}}},
                {intAttr("axis", 1), floatAttr("epsilon", 1e-6)}),
       "rms_norm_grad_add: addend 'in3' is f64, expected f32"},
      {"rms_norm_grad_add dx_bf16 of another shape",
       makeCall("rms_norm_grad_add", {{{4, 8}}, {{8}}, {{4, 8}}, {{4, 8}}}, {{{4, 8}}, {{8}}, {{8, 4}, bf16}},
                {intAttr("axis", 1), floatAttr("epsilon", 1e-6)}),
       "rms_norm_grad_add: dx_bf16 'out2' has shape [8, 4], expected [4, 8]"},
      {"rms_norm_grad_add dx_bf16 not bf16",
       makeCall("rms_norm_grad_add", {{{4, 8}}, {{8}}, {{4, 8}}, {{4, 8}}}, {{{4, 8}}, {{8}}, {{4, 8}}},
                {intAttr("axis", 1), floatAttr("epsilon", 1e-6)}),
       "rms_norm_grad_add: dx_bf16 'out2' is f32, expected bf16"},
      {"rms_norm_grad_add dx_bf16 from f64",
       makeCall("rms_norm_grad_add",
                {{{4, 8}, DType::F64}, {{8}, DType::F64}, {{4, 8}, DType::F64}, {{4, 8}, DType::F64}},
                {{{4, 8}, DType::F64}, {{8}, DType::F64}, {{4, 8}, bf16}},
                {intAttr("axis", 1), floatAttr("epsilon", 1e-6)}),
       "rms_norm_grad_add: dx_bf16 is the bf16 copy of an f32 dx; x is f64"},
      {"softmax_ce", makeCall("softmax_ce", {{{4, 5, 2}}, {{4, 2}, i64}}, {{{}}}), ""},
      {"softmax_ce reduction", makeCall("softmax_ce", {{{4, 5}}, {{4}, i64}}, {{{}}}, {stringAttr("reduction", "max")}),
       "softmax_ce: reduction 'max' is not supported (mean or sum)"},
      {"next_token_ce_grad", makeCall("next_token_ce_grad", {{{2, 6, 11}}, {{2, 6}, i64}, {{1}}}, {{{2, 6, 11}}}), ""},
      {"next_token_ce loss not a scalar", makeCall("next_token_ce", {{{2, 6, 11}}, {{2, 6}, i64}}, {{{2}}}),
       "next_token_ce: loss must hold one element, has shape [2]"},
      {"where", makeCall("where", {{{4, 1}, DType::Bool}, {{5}}, {{4, 5}}}, {{{4, 5}}}), ""},
      {"concat", makeCall("concat", {{{2, 3}}, {{2, 4}}}, {{{2, 7}}}, {intAttr("axis", 1)}), ""},
      {"concat axis", makeCall("concat", {{{2, 3}}, {{2, 3}}}, {{{2, 6}}}, {intAttr("axis", 2)}),
       "concat: axis 2 out of range for output [2, 6]"},
      {"slice", makeCall("slice", {{{10, 4}}}, {{{3, 4}}},
                         {intsAttr("starts", {1, 0}), intsAttr("ends", {8, 4}), intsAttr("steps", {3, 1})}), ""},
      {"slice_grad of another shape", makeCall("slice_grad", {{{2, 4}}}, {{{10, 4}}},
                                               {intsAttr("starts", {1, 0}), intsAttr("ends", {8, 4}),
                                                intsAttr("steps", {3, 1})}),
       "slice_grad: input 'in0' has shape [2, 4], expected [3, 4]"},
      {"cast", makeCall("cast", {{{3}}}, {{{3}, i64}}), ""},
      {"grouped-query attention", makeCall("attention", {{{2, 8, 5, 16}}, {{2, 2, 7, 16}}, {{2, 2, 7, 16}}},
                                           {{{2, 8, 5, 16}}, {{2, 8, 5}}}, {floatAttr("scale", 0.25)}), ""},
      {"attention heads that do not divide", makeCall("attention", {{{2, 8, 5, 16}}, {{2, 3, 7, 16}}, {{2, 3, 7, 16}}},
                                                      {{{2, 8, 5, 16}}, {{2, 8, 5}}}, {floatAttr("scale", 0.25)}),
       "attention: k [2, 3, 7, 16] does not fit q [2, 8, 5, 16] as [B, Hkv, Skv, D] with Hkv dividing Hq"},
      {"attention_grad lse", makeCall("attention_grad",
                                      {{{1, 2, 3, 4}}, {{1, 2, 3, 4}}, {{1, 2, 3, 4}}, {{1, 2, 3, 4}}, {{1, 2, 4}},
                                       {{1, 2, 3, 4}}},
                                      {{{1, 2, 3, 4}}, {{1, 2, 3, 4}}, {{1, 2, 3, 4}}}, {floatAttr("scale", 0.5)}),
       "attention_grad: lse 'in4' has shape [1, 2, 4], expected [1, 2, 3]"},
      {"bf16 attention", makeCall("attention", {{{1, 2, 3, 4}, bf16}, {{1, 2, 3, 4}, bf16}, {{1, 2, 3, 4}, bf16}},
                                  {{{1, 2, 3, 4}, bf16}, {{1, 2, 3}}},
                                  {floatAttr("scale", 0.5), stringAttr("precision", "bf16")}), ""},
      {"bf16 attention without the precision",
       makeCall("attention", {{{1, 2, 3, 4}, bf16}, {{1, 2, 3, 4}, bf16}, {{1, 2, 3, 4}, bf16}},
                {{{1, 2, 3, 4}, bf16}, {{1, 2, 3}}}, {floatAttr("scale", 0.5)}),
       "attention: bf16 operands need the precision 'bf16', got 'fp32'"},
      {"rotary", makeCall("rotary", {{{2, 4, 6, 8}}, {{6, 8}}, {{6, 8}}}, {{{2, 4, 6, 8}}}), ""},
      {"rotary bf16 x, f32 result", makeCall("rotary", {{{2, 4, 6, 8}, bf16}, {{6, 8}}, {{6, 8}}}, {{{2, 4, 6, 8}}}), ""},
      {"rotary bf16 tables", makeCall("rotary", {{{2, 4, 6, 8}, bf16}, {{6, 8}, bf16}, {{6, 8}}}, {{{2, 4, 6, 8}, bf16}}),
       "rotary: cos 'in1' is bf16, expected f32 (with a bf16 x or output the tables stay f32)"},
      {"rotary odd dim", makeCall("rotary", {{{2, 7}}, {{7}}, {{7}}}, {{{2, 7}}}),
       "rotary: x [2, 7] must have an even last dim"},
      {"fill", makeCall("fill", {}, {{{3, 3}}}, {floatAttr("value", 1)}), ""},
      {"an attribute the kernel does not take", makeCall("matmul", {{{4, 3}}, {{3, 6}}}, {{{4, 6}}},
                                                         {intAttr("transpose_c", 1)}),
       "matmul: attribute 'transpose_c' is not one it takes (transpose_a, transpose_b, precision)"},
      {"an attribute on a kernel that takes none", makeCall("relu", {{{3}}}, {{{3}}}, {floatAttr("alpha", 0.1)}),
       "relu: attribute 'alpha' is not one it takes (none)"},
      {"an attribute given twice", makeCall("softmax", {{{2, 7}}}, {{{2, 7}}}, {intAttr("axis", 1), intAttr("axis", 0)}),
       "softmax: attribute 'axis' is given twice"},
      {"broadcast_to", makeCall("broadcast_to", {{{4, 1}}}, {{{3, 4, 5}}}), ""},
      {"layer_norm_grad", makeCall("layer_norm_grad", {{{4, 8}}, {{8}}, {{4, 8}}}, {{{4, 8}}, {{8}}, {{8}}},
                                   {intAttr("axis", 1)}), ""},
      {"rms_norm", makeCall("rms_norm", {{{2, 4, 8}}, {{4, 8}}}, {{{2, 4, 8}}},
                            {intAttr("axis", 1), floatAttr("epsilon", 1e-6)}), ""},
      {"softmax_ce_grad", makeCall("softmax_ce_grad", {{{4, 5}}, {{4}, i64}, {{}}}, {{{4, 5}}}), ""},
      {"next_token_ce", makeCall("next_token_ce", {{{2, 6, 11}}, {{2, 6}, i64}}, {{{}}}), ""},
      {"linear_ce", makeCall("linear_ce", {{{2, 6, 8}}, {{11, 8}}, {{2, 6}, i64}}, {{{}}, {{2, 6}}},
                             {intAttr("chunk", 4)}), ""},
      {"linear_ce bf16 operands, f32 results",
       makeCall("linear_ce", {{{2, 6, 8}, DType::BF16}, {{11, 8}, DType::BF16}, {{2, 6}, i64}}, {{{}}, {{2, 6}}},
                {intAttr("chunk", 4), stringAttr("precision", "bf16")}), ""},
      {"linear_ce weight of another hidden size",
       makeCall("linear_ce", {{{2, 6, 8}}, {{11, 9}}, {{2, 6}, i64}}, {{{}}, {{2, 6}}}, {intAttr("chunk", 4)}),
       "linear_ce: weight must be [V, H] with H = 8, got [11, 9]"},
      {"linear_ce chunk 0", makeCall("linear_ce", {{{2, 6, 8}}, {{11, 8}}, {{2, 6}, i64}}, {{{}}, {{2, 6}}},
                                     {intAttr("chunk", 0)}),
       "linear_ce: chunk must be at least 1, got 0"},
      {"linear_ce_grad", makeCall("linear_ce_grad", {{{2, 6, 8}}, {{11, 8}}, {{2, 6}, i64}, {{2, 6}}, {{}}},
                                  {{{2, 6, 8}}, {{11, 8}}}, {intAttr("chunk", 4), intAttr("ignore_index", -100)}), ""},
      {"linear_ce_grad dweight", makeCall("linear_ce_grad", {{{2, 6, 8}}, {{11, 8}}, {{2, 6}, i64}, {{2, 6}}, {{}}},
                                          {{{2, 6, 8}}, {{8, 11}}}, {intAttr("chunk", 4)}),
       "linear_ce_grad: dweight 'out1' has shape [8, 11], expected [11, 8]"},
      {"slice_grad", makeCall("slice_grad", {{{3, 4}}}, {{{10, 4}}},
                              {intsAttr("starts", {1, 0}), intsAttr("ends", {8, 4}), intsAttr("steps", {3, 1})}), ""},
      {"attention_grad", makeCall("attention_grad",
                                  {{{1, 4, 3, 8}}, {{1, 2, 5, 8}}, {{1, 2, 5, 8}}, {{1, 4, 3, 8}}, {{1, 4, 3}},
                                   {{1, 4, 3, 8}}},
                                  {{{1, 4, 3, 8}}, {{1, 2, 5, 8}}, {{1, 2, 5, 8}}},
                                  {floatAttr("scale", 0.5), intAttr("causal", 1)}), ""},
      // y = x * b (b broadcast), and its bf16 rounding: opcodes 2 (mul) and 21 (round_bf16).
      {"pointwise", makeCall("pointwise", {{{4, 5}}, {{5}}}, {{{4, 5}}, {{4, 5}}},
                             {intsAttr("code", {2, 0, 1, -1, 21, 2, -1, -1}), floatsAttr("constants", {}),
                              intsAttr("outputs", {2, 3})}), ""},
      {"pointwise input that does not broadcast",
       makeCall("pointwise", {{{4, 5}}, {{4}}}, {{{4, 5}}},
                {intsAttr("code", {2, 0, 1, -1}), floatsAttr("constants", {}), intsAttr("outputs", {2})}),
       "pointwise: input 'in1' has shape [4], which does not broadcast to [4, 5]"},
      {"pointwise outputs of two shapes",
       makeCall("pointwise", {{{4, 5}}}, {{{4, 5}}, {{5}}},
                {intsAttr("code", {6, 0, -1, -1}), floatsAttr("constants", {}), intsAttr("outputs", {1, 1})}),
       "pointwise: output 'out1' has shape [5], expected [4, 5]"},
  };
}

TEST(ShapeRules, AcceptWhatTheKernelsComputeAndNameWhatTheyRefuse) {
  for (const RuleCase& c : cases()) EXPECT_EQ(check(c.call), c.error) << c.what;
}

// Every family appears above with a case it accepts.
TEST(ShapeRules, EveryRuleHasAnAcceptedCase) {
  std::vector<ShapeRule> covered;
  for (const RuleCase& c : cases())
    if (c.error.empty()) covered.push_back(findKernelSpec(c.call.kernel)->rule);
  for (const KernelSpec& spec : kernelManifest()) {
    bool found = false;
    for (ShapeRule rule : covered) found = found || rule == spec.rule;
    EXPECT_TRUE(found) << spec.name << "'s rule has no accepted case";
  }
}

}  // namespace
}  // namespace megatrain::kernels
