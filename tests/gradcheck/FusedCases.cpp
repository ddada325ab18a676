// FusedCases.cpp - gradient checks of the fused ops (rms_norm, silu, swiglu, gelu) written directly,
// and of the exported compositions the fusion passes rewrite into them (RMSNorm, SwiGLU, both GELU
// forms, a decomposed LayerNorm), compiled with fusion on.
#include "GradCase.h"

namespace megatrain::gradcheck {
namespace {

Param Range(std::vector<int64_t> shape, double lo, double hi) { return {"", std::move(shape), lo, hi}; }

// A composite compiled with the fusion passes; the plan must hold `kernel`.
GradCase fused(GradCase c, const std::string& kernel) {
  c.fusedKernel = kernel;
  return c;
}

}  // namespace

std::vector<GradCase> fusedOpCases() {
  std::vector<GradCase> cases;
  auto add = [&](GradCase c) { cases.push_back(std::move(c)); };

  // The ops themselves.
  add({"rms_norm_op_last_axis", {P("x", {3, 5}), Positive("w", {5})},
       "  %y = mt.rms_norm %x, %w {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (" + T({3, 5}) + ", " +
           T({5}) + ") -> " + T({3, 5}),
       std::vector<int64_t>{3, 5}});
  add({"rms_norm_op_two_axes", {P("x", {2, 3, 4}), Positive("w", {3, 4})},
       "  %y = mt.rms_norm %x, %w {axis = 1 : i64, epsilon = 1.0e-6 : f64} : (" + T({2, 3, 4}) + ", " +
           T({3, 4}) + ") -> " + T({2, 3, 4}),
       std::vector<int64_t>{2, 3, 4}});
  add(unary("silu_op", "silu", Range({3, 5}, -4, 4)));
  add({"swiglu_op", {Range({3, 5}, -4, 4), P("u", {3, 5})},
       "  %y = mt.swiglu %g, %u : " + T({3, 5}), std::vector<int64_t>{3, 5}});
  cases.back().params[0].name = "g";
  add(unary("gelu_op_erf", "gelu", Range({3, 5}, -3, 3), "{approximate = \"none\"}"));
  add(unary("gelu_op_tanh", "gelu", Range({3, 5}, -3, 3), "{approximate = \"tanh\"}"));

  // The output projection fused with the next-token loss: chunks of 3 over a
  // vocabulary of 7 (the last chunk short), one ignored target.
  const std::string tokens =
      "  %tokens = mt.constant {value = dense<[[3, 5, 0, 6], [1, 2, 2, 4]]> : tensor<2x4xi64>} : "
      "tensor<2x4xi64>\n";
  add({"linear_ce_op_chunks", {P("h", {2, 4, 3}), P("w", {7, 3})},
       tokens + "  %y, %lse = mt.linear_ce %h, %w, %tokens {chunk = 3 : i64, ignore_index = 5 : i64} : (" +
           T({2, 4, 3}) + ", " + T({7, 3}) + ", tensor<2x4xi64>) -> (tensor<f64>, " + T({2, 4}) + ")",
       std::nullopt});
  // The same loss as an export writes it, fused by mt-fuse-linear-ce.
  add(fused({"linear_ce_fused_from_projection", {P("h", {2, 4, 3}), P("w", {7, 3})},
             tokens + "  %wt = mt.transpose %w {perm = array<i64: 1, 0>} : (" + T({7, 3}) + ") -> " +
                 T({3, 7}) + "\n"
                 "  %l = mt.matmul %h, %wt : (" + T({2, 4, 3}) + ", " + T({3, 7}) + ") -> " + T({2, 4, 7}) + "\n"
                 "  %y = mt.next_token_ce %l, %tokens {ignore_index = 5 : i64} : (" + T({2, 4, 7}) +
                 ", tensor<2x4xi64>) -> tensor<f64>",
             std::nullopt},
            "linear_ce"));

  // The compositions, as the importer writes them from the tiny exports
  // (tests/models/llm), compiled with fusion on.
  // Llama's RMSNorm: weight * (x * 1/sqrt(mean(x * x) + eps)).
  add(fused({"rms_norm_fused_from_llama", {P("x", {2, 3, 8}), Positive("w", {8})},
             "  %sq = mt.mul %x, %x : (" + T({2, 3, 8}) + ", " + T({2, 3, 8}) + ") -> " + T({2, 3, 8}) + "\n"
             "  %ms = mt.reduce_mean %sq {axes = array<i64: 2>, keepdims = true} : (" + T({2, 3, 8}) +
                 ") -> " + T({2, 3, 1}) + "\n"
             "  %eps = mt.constant {value = dense<1.0e-6> : tensor<f64>} : tensor<f64>\n"
             "  %v = mt.add %ms, %eps : (" + T({2, 3, 1}) + ", tensor<f64>) -> " + T({2, 3, 1}) + "\n"
             "  %root = mt.sqrt %v : " + T({2, 3, 1}) + "\n"
             "  %inv = mt.reciprocal %root : " + T({2, 3, 1}) + "\n"
             "  %n = mt.mul %x, %inv : (" + T({2, 3, 8}) + ", " + T({2, 3, 1}) + ") -> " + T({2, 3, 8}) + "\n"
             "  %y = mt.mul %w, %n : (" + T({8}) + ", " + T({2, 3, 8}) + ") -> " + T({2, 3, 8}),
             std::vector<int64_t>{2, 3, 8}},
            "rms_norm"));
  // Llama's MLP activation: (gate * sigmoid(gate)) * up.
  add(fused({"swiglu_fused_from_llama", {Range({2, 3, 6}, -4, 4), P("u", {2, 3, 6})},
             "  %s = mt.sigmoid %g : " + T({2, 3, 6}) + "\n"
             "  %a = mt.mul %g, %s : (" + T({2, 3, 6}) + ", " + T({2, 3, 6}) + ") -> " + T({2, 3, 6}) + "\n"
             "  %y = mt.mul %a, %u : (" + T({2, 3, 6}) + ", " + T({2, 3, 6}) + ") -> " + T({2, 3, 6}),
             std::vector<int64_t>{2, 3, 6}},
            "swiglu"));
  cases.back().params[0].name = "g";
  // SiLU alone: scaled before the harness multiplies it by R, which would
  // otherwise make it a swiglu gate.
  add(fused({"silu_fused", {Range({3, 5}, -4, 4)},
             "  %s = mt.sigmoid %x : " + T({3, 5}) + "\n"
             "  %a = mt.mul %s, %x : (" + T({3, 5}) + ", " + T({3, 5}) + ") -> " + T({3, 5}) + "\n"
             "  %y = mt.scale %a {alpha = -1.5 : f64} : " + T({3, 5}),
             std::vector<int64_t>{3, 5}},
            "silu"));
  cases.back().params[0].name = "x";
  // GPT-2's NewGELU: (x * 0.5) * (1 + tanh(0.79788 * (x + x^3 * 0.044715))).
  add(fused({"gelu_tanh_fused_from_gpt2", {Range({2, 3, 5}, -3, 3)},
             "  %half = mt.constant {value = dense<0.5> : tensor<f64>} : tensor<f64>\n"
             "  %k = mt.constant {value = dense<0.044715> : tensor<f64>} : tensor<f64>\n"
             "  %c = mt.constant {value = dense<0.79788456080286541> : tensor<f64>} : tensor<f64>\n"
             "  %one = mt.constant {value = dense<1.0> : tensor<f64>} : tensor<f64>\n"
             "  %h = mt.mul %x, %half : (" + T({2, 3, 5}) + ", tensor<f64>) -> " + T({2, 3, 5}) + "\n"
             "  %p = mt.powf %x {exponent = 3.0 : f64} : " + T({2, 3, 5}) + "\n"
             "  %pk = mt.mul %p, %k : (" + T({2, 3, 5}) + ", tensor<f64>) -> " + T({2, 3, 5}) + "\n"
             "  %s = mt.add %x, %pk : (" + T({2, 3, 5}) + ", " + T({2, 3, 5}) + ") -> " + T({2, 3, 5}) + "\n"
             "  %i = mt.mul %s, %c : (" + T({2, 3, 5}) + ", tensor<f64>) -> " + T({2, 3, 5}) + "\n"
             "  %t = mt.tanh %i : " + T({2, 3, 5}) + "\n"
             "  %o = mt.add %t, %one : (" + T({2, 3, 5}) + ", tensor<f64>) -> " + T({2, 3, 5}) + "\n"
             "  %y = mt.mul %h, %o : (" + T({2, 3, 5}) + ", " + T({2, 3, 5}) + ") -> " + T({2, 3, 5}),
             std::vector<int64_t>{2, 3, 5}},
            "gelu"));
  cases.back().params[0].name = "x";
  // torch's exact GELU export: (x * (erf(x / 1.41421) + 1)) * 0.5.
  add(fused({"gelu_erf_fused_from_torch", {Range({3, 5}, -3, 3)},
             "  %r2 = mt.constant {value = dense<1.4142135623730951> : tensor<f64>} : tensor<f64>\n"
             "  %one = mt.constant {value = dense<1.0> : tensor<f64>} : tensor<f64>\n"
             "  %half = mt.constant {value = dense<0.5> : tensor<f64>} : tensor<f64>\n"
             "  %s = mt.div %x, %r2 : (" + T({3, 5}) + ", tensor<f64>) -> " + T({3, 5}) + "\n"
             "  %e = mt.erf %s : " + T({3, 5}) + "\n"
             "  %p = mt.add %e, %one : (" + T({3, 5}) + ", tensor<f64>) -> " + T({3, 5}) + "\n"
             "  %m = mt.mul %x, %p : (" + T({3, 5}) + ", " + T({3, 5}) + ") -> " + T({3, 5}) + "\n"
             "  %y = mt.mul %m, %half : (" + T({3, 5}) + ", tensor<f64>) -> " + T({3, 5}),
             std::vector<int64_t>{3, 5}},
            "gelu"));
  cases.back().params[0].name = "x";
  // A layer norm in primitives: (x - mean) / sqrt(mean((x - mean)^2) + eps) * g + b.
  add(fused({"layer_norm_fused_from_primitives", {P("x", {3, 6}), Positive("g", {6}), P("b", {6})},
             "  %mu = mt.reduce_mean %x {axes = array<i64: 1>, keepdims = true} : (" + T({3, 6}) + ") -> " +
                 T({3, 1}) + "\n"
             "  %d = mt.sub %x, %mu : (" + T({3, 6}) + ", " + T({3, 1}) + ") -> " + T({3, 6}) + "\n"
             "  %sq = mt.powf %d {exponent = 2.0 : f64} : " + T({3, 6}) + "\n"
             "  %var = mt.reduce_mean %sq {axes = array<i64: 1>, keepdims = true} : (" + T({3, 6}) + ") -> " +
                 T({3, 1}) + "\n"
             "  %eps = mt.constant {value = dense<1.0e-5> : tensor<f64>} : tensor<f64>\n"
             "  %v = mt.add %var, %eps : (" + T({3, 1}) + ", tensor<f64>) -> " + T({3, 1}) + "\n"
             "  %root = mt.sqrt %v : " + T({3, 1}) + "\n"
             "  %n = mt.div %d, %root : (" + T({3, 6}) + ", " + T({3, 1}) + ") -> " + T({3, 6}) + "\n"
             "  %s = mt.mul %n, %g : (" + T({3, 6}) + ", " + T({6}) + ") -> " + T({3, 6}) + "\n"
             "  %y = mt.add %s, %b : (" + T({3, 6}) + ", " + T({6}) + ") -> " + T({3, 6}),
             std::vector<int64_t>{3, 6}},
            "layer_norm"));
  return cases;
}

}  // namespace megatrain::gradcheck
