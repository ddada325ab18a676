// LlmCases.cpp - gradient checks of the primitives that exported LLM graphs use: math functions,
// max/min, where, concat, slice and cast, alone and composed as RMSNorm, GELU, rotary embeddings
// and a causal mask.
#include "GradCase.h"

namespace megatrain::gradcheck {
namespace {

// "array<i64: 1, 2>".
std::string ints(const std::vector<int64_t>& values) {
  std::string s = "array<i64";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : ": ") + std::to_string(values[i]);
  return s + ">";
}

std::string sliceOp(const std::string& result, const std::string& x, const std::vector<int64_t>& xShape,
                    const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                    const std::vector<int64_t>& steps, const std::vector<int64_t>& yShape) {
  return "  " + result + " = mt.slice " + x + " {starts = " + ints(starts) + ", ends = " + ints(ends) +
         ", steps = " + ints(steps) + "} : (" + T(xShape) + ") -> " + T(yShape) + "\n";
}

// A constant i1 tensor of `shape` from a row-major pattern of 0/1.
std::string boolConstant(const std::string& result, const std::vector<int64_t>& shape,
                         const std::vector<int>& bits) {
  std::string type = "tensor<";
  for (int64_t d : shape) type += std::to_string(d) + "x";
  type += "i1>";
  std::string flat = "tensor<" + std::to_string(bits.size()) + "xi1>";
  std::string values;
  for (size_t i = 0; i < bits.size(); ++i) values += std::string(i ? ", " : "") + (bits[i] ? "true" : "false");
  return "  " + result + "_flat = mt.constant {value = dense<[" + values + "]> : " + flat + "} : " + flat +
         "\n  " + result + " = mt.reshape " + result + "_flat : (" + flat + ") -> " + type + "\n";
}

Param Range(std::vector<int64_t> shape, double lo, double hi) { return {"", std::move(shape), lo, hi}; }

}  // namespace

std::vector<GradCase> llmPrimitiveCases() {
  std::vector<GradCase> cases;
  auto add = [&](GradCase c) { cases.push_back(std::move(c)); };

  // Unary math; roots, logarithms and reciprocals on positive values.
  add(unary("neg", "neg", P("", {3, 4})));
  add(unary("sqrt", "sqrt", Positive("", {3, 4})));
  add(unary("reciprocal", "reciprocal", Positive("", {3, 4})));
  add(unary("exp", "exp", P("", {3, 4})));
  add(unary("log", "log", Positive("", {3, 4})));
  add(unary("erf", "erf", Range({3, 4}, -2, 2)));
  add(unary("cos", "cos", Range({3, 4}, -3, 3)));
  add(unary("sin", "sin", Range({3, 4}, -3, 3)));

  // powf: the exponents RMSNorm and friends use, and the ones the rule
  // special-cases (0, 1, 2).
  add(unary("powf_square", "powf", P("", {3, 4}), "{exponent = 2.0 : f64}"));
  add(unary("powf_cube_negative_bases", "powf", P("", {3, 4}), "{exponent = 3.0 : f64}"));
  add(unary("powf_rsqrt", "powf", Positive("", {3, 4}), "{exponent = -0.5 : f64}"));
  add(unary("powf_half", "powf", Positive("", {3, 4}), "{exponent = 0.5 : f64}"));
  add(unary("powf_one", "powf", P("", {3, 4}), "{exponent = 1.0 : f64}"));
  add(unary("powf_zero", "powf", P("", {3, 4}), "{exponent = 0.0 : f64}"));

  // max/min: dy goes to the chosen side, summed down where it broadcast.
  add(binary("max_same", "max", P("", {3, 4}), P("", {3, 4}), {3, 4}));
  add(binary("max_broadcast_both", "max", P("", {2, 1, 4}), P("", {3, 1}), {2, 3, 4}));
  add(binary("min_broadcast_rhs", "min", P("", {3, 4}), P("", {4}), {3, 4}));
  add(binary("min_scalar_lhs", "min", P("", {}), P("", {3, 4}), {3, 4}));

  // where: three-way broadcasting, gradients zero where not selected.
  add({"where_broadcast_all", {P("x", {2, 1, 4}), P("z", {3, 1})},
       boolConstant("%c", {3, 4}, {1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 0}) +
           "  %y = mt.where %c, %x, %z : (tensor<3x4xi1>, " + T({2, 1, 4}) + ", " + T({3, 1}) + ") -> " +
           T({2, 3, 4}),
       std::vector<int64_t>{2, 3, 4}});
  add({"where_scalar_operand_larger_cond", {P("x", {3, 1}), P("z", {})},
       boolConstant("%c", {2, 3, 4}, {1, 0, 0, 1, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1, 1, 0, 1, 1, 0, 1, 0, 0, 0, 1}) +
           "  %y = mt.where %c, %x, %z : (tensor<2x3x4xi1>, " + T({3, 1}) + ", " + T({}) + ") -> " +
           T({2, 3, 4}),
       std::vector<int64_t>{2, 3, 4}});
  // A condition computed in the graph (isnan, all false here): x gets all of dy.
  add({"where_isnan_guard", {P("x", {3, 4}), P("z", {})},
       "  %m = mt.isnan %x : (" + T({3, 4}) + ") -> tensor<3x4xi1>\n"
       "  %y = mt.where %m, %z, %x : (tensor<3x4xi1>, " + T({}) + ", " + T({3, 4}) + ") -> " + T({3, 4}),
       std::vector<int64_t>{3, 4}});

  // concat along a middle axis (three inputs), the last axis, and one value twice.
  add({"concat_middle_axis", {P("a", {2, 3, 4}), P("b", {2, 1, 4}), P("c", {2, 2, 4})},
       "  %y = mt.concat %a, %b, %c {axis = 1 : i64} : (" + T({2, 3, 4}) + ", " + T({2, 1, 4}) + ", " +
           T({2, 2, 4}) + ") -> " + T({2, 6, 4}),
       std::vector<int64_t>{2, 6, 4}});
  add({"concat_last_axis", {P("a", {3, 2}), P("b", {3, 3})},
       "  %y = mt.concat %a, %b {axis = 1 : i64} : (" + T({3, 2}) + ", " + T({3, 3}) + ") -> " + T({3, 5}),
       std::vector<int64_t>{3, 5}});
  add({"concat_same_value_twice", {P("x", {2, 3})},
       "  %y = mt.concat %x, %x {axis = 0 : i64} : (" + T({2, 3}) + ", " + T({2, 3}) + ") -> " + T({4, 3}),
       std::vector<int64_t>{4, 3}});

  // slice: steps that do and do not divide the range; overlapping slices accumulate.
  add({"slice_steps", {P("x", {4, 6, 5})},
       sliceOp("%y", "%x", {4, 6, 5}, {1, 0, 1}, {4, 6, 5}, {2, 3, 2}, {2, 2, 2}),
       std::vector<int64_t>{2, 2, 2}});
  add({"slice_range", {P("x", {3, 8})}, sliceOp("%y", "%x", {3, 8}, {0, 2}, {3, 6}, {1, 1}, {3, 4}),
       std::vector<int64_t>{3, 4}});
  add({"slice_overlapping_twice", {P("x", {5, 2})},
       sliceOp("%s", "%x", {5, 2}, {0, 0}, {3, 2}, {1, 1}, {3, 2}) +
           sliceOp("%t", "%x", {5, 2}, {1, 0}, {5, 2}, {2, 1}, {2, 2}) +
           "  %t3 = mt.concat %t, %t {axis = 0 : i64} : (" + T({2, 2}) + ", " + T({2, 2}) + ") -> " + T({4, 2}) +
           "\n" + sliceOp("%t2", "%t3", {4, 2}, {0, 0}, {3, 2}, {1, 1}, {3, 2}) +
           "  %y = mt.add %s, %t2 : (" + T({3, 2}) + ", " + T({3, 2}) + ") -> " + T({3, 2}),
       std::vector<int64_t>{3, 2}});

  // cast: through f32 and back (the gradient is cast back; the values round
  // to f32, hence the wide step), and through i64 and i1 (no gradient flows
  // through them, so they act as constants).
  {
    GradCase c{"cast_f32_round_trip", {P("x", {3, 4})},
               "  %f = mt.cast %x : (" + T({3, 4}) + ") -> tensor<3x4xf32>\n"
               "  %n = mt.neg %f : tensor<3x4xf32>\n"
               "  %y = mt.cast %n : (tensor<3x4xf32>) -> " + T({3, 4}),
               std::vector<int64_t>{3, 4}};
    c.eps = 1e-3;
    c.relTol = 1e-4;
    add(c);
  }
  add({"cast_through_i64_is_constant", {P("x", {3, 4})},
       "  %s = mt.scale %x {alpha = 3.0 : f64} : " + T({3, 4}) + "\n"
       "  %i = mt.cast %s : (" + T({3, 4}) + ") -> tensor<3x4xi64>\n"
       "  %f = mt.cast %i : (tensor<3x4xi64>) -> " + T({3, 4}) + "\n"
       "  %y = mt.mul %x, %f : (" + T({3, 4}) + ", " + T({3, 4}) + ") -> " + T({3, 4}),
       std::vector<int64_t>{3, 4}});
  add({"cast_through_bool_is_constant", {Param{"x", {3, 4}, -1.0, 1.0, 0.05}},
       "  %b = mt.cast %x : (" + T({3, 4}) + ") -> tensor<3x4xi1>\n"
       "  %f = mt.cast %b : (tensor<3x4xi1>) -> " + T({3, 4}) + "\n"
       "  %e = mt.exp %x : " + T({3, 4}) + "\n"
       "  %y = mt.mul %e, %f : (" + T({3, 4}) + ", " + T({3, 4}) + ") -> " + T({3, 4}),
       std::vector<int64_t>{3, 4}});

  // Composites, as the exporters write them.
  // Llama's RMSNorm: x * 1/sqrt(mean(x^2) + eps) * w.
  add({"rms_norm", {P("x", {2, 3, 8}), P("w", {8})},
       "  %sq = mt.powf %x {exponent = 2.0 : f64} : " + T({2, 3, 8}) + "\n"
       "  %ms = mt.reduce_mean %sq {axes = array<i64: 2>, keepdims = true} : (" + T({2, 3, 8}) + ") -> " +
           T({2, 3, 1}) + "\n"
       "  %eps = mt.constant {value = dense<1.0e-6> : tensor<f64>} : tensor<f64>\n"
       "  %v = mt.add %ms, %eps : (" + T({2, 3, 1}) + ", tensor<f64>) -> " + T({2, 3, 1}) + "\n"
       "  %root = mt.sqrt %v : " + T({2, 3, 1}) + "\n"
       "  %inv = mt.reciprocal %root : " + T({2, 3, 1}) + "\n"
       "  %n = mt.mul %x, %inv : (" + T({2, 3, 8}) + ", " + T({2, 3, 1}) + ") -> " + T({2, 3, 8}) + "\n"
       "  %y = mt.mul %n, %w : (" + T({2, 3, 8}) + ", " + T({8}) + ") -> " + T({2, 3, 8}),
       std::vector<int64_t>{2, 3, 8}});
  // Exact GELU: 0.5 x (1 + erf(x / sqrt 2)).
  add({"gelu_erf", {Param{"x", {3, 5}, -3.0, 3.0}},
       "  %s = mt.scale %x {alpha = 0.70710678118654752 : f64} : " + T({3, 5}) + "\n"
       "  %e = mt.erf %s : " + T({3, 5}) + "\n"
       "  %one = mt.constant {value = dense<1.0> : tensor<f64>} : tensor<f64>\n"
       "  %p = mt.add %e, %one : (" + T({3, 5}) + ", tensor<f64>) -> " + T({3, 5}) + "\n"
       "  %h = mt.mul %x, %p : (" + T({3, 5}) + ", " + T({3, 5}) + ") -> " + T({3, 5}) + "\n"
       "  %y = mt.scale %h {alpha = 0.5 : f64} : " + T({3, 5}),
       std::vector<int64_t>{3, 5}});
  // Rotary embedding: x cos + rotate_half(x) sin, rotate_half = concat(-x2, x1),
  // with trainable angles so that cos and sin are differentiated too.
  add({"rotary_embedding", {P("x", {2, 4, 6}), Range({4, 6}, -3, 3)},
       sliceOp("%x1", "%x", {2, 4, 6}, {0, 0, 0}, {2, 4, 3}, {1, 1, 1}, {2, 4, 3}) +
           sliceOp("%x2", "%x", {2, 4, 6}, {0, 0, 3}, {2, 4, 6}, {1, 1, 1}, {2, 4, 3}) +
           "  %n2 = mt.neg %x2 : " + T({2, 4, 3}) + "\n"
           "  %rot = mt.concat %n2, %x1 {axis = 2 : i64} : (" + T({2, 4, 3}) + ", " + T({2, 4, 3}) + ") -> " +
           T({2, 4, 6}) + "\n"
           "  %c = mt.cos %th : " + T({4, 6}) + "\n"
           "  %s = mt.sin %th : " + T({4, 6}) + "\n"
           "  %a = mt.mul %x, %c : (" + T({2, 4, 6}) + ", " + T({4, 6}) + ") -> " + T({2, 4, 6}) + "\n"
           "  %b = mt.mul %rot, %s : (" + T({2, 4, 6}) + ", " + T({4, 6}) + ") -> " + T({2, 4, 6}) + "\n"
           "  %y = mt.add %a, %b : (" + T({2, 4, 6}) + ", " + T({2, 4, 6}) + ") -> " + T({2, 4, 6}),
       std::vector<int64_t>{2, 4, 6}});
  cases.back().params[1].name = "th";
  // A causal mask before softmax: masked scores get no gradient.
  add({"causal_mask_softmax", {Range({2, 4, 4}, -2, 2)},
       boolConstant("%mask", {4, 4}, {1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1}) +
           "  %low = mt.constant {value = dense<-1.0e30> : tensor<f64>} : tensor<f64>\n"
           "  %m = mt.where %mask, %x, %low : (tensor<4x4xi1>, " + T({2, 4, 4}) + ", tensor<f64>) -> " +
           T({2, 4, 4}) + "\n"
           "  %y = mt.softmax %m {axis = 2 : i64} : " + T({2, 4, 4}),
       std::vector<int64_t>{2, 4, 4}});
  cases.back().params[0].name = "x";
  return cases;
}

}  // namespace megatrain::gradcheck
