// AttentionCases.cpp - gradient checks of the fused attention (multi-head, grouped-query,
// multi-query, causal or not) and rotary embedding ops written directly, and of a decomposed
// attention that the pipeline's mt-fuse-attention rewrites before differentiating, compiled with
// fusion on.
#include <cmath>
#include <sstream>

#include "GradCase.h"

namespace megatrain::gradcheck {
namespace {

// `%name = mt.constant` of `shape` holding f(i) for the row-major index i.
template <typename F>
std::string constant(const std::string& name, const std::vector<int64_t>& shape, F f) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::ostringstream os;
  os.precision(17);
  os << std::scientific << "  " << name << "_flat = mt.constant {value = dense<[";
  for (int64_t i = 0; i < n; ++i) os << (i ? ", " : "") << f(i);
  const std::string flat = T({n});
  os << "]> : " << flat << "} : " << flat << "\n  " << name << " = mt.reshape " << name
     << "_flat : (" << flat << ") -> " << T(shape) << "\n";
  return os.str();
}

GradCase attention(const std::string& name, std::vector<int64_t> q, std::vector<int64_t> kv,
                   double scale, bool causal) {
  std::vector<int64_t> lse(q.begin(), q.end() - 1);
  std::ostringstream attrs;
  attrs.precision(17);
  attrs << std::scientific << "{scale = " << scale << " : f64, causal = " << (causal ? "true" : "false") << "}";
  Param pq{"q", q, -1.5, 1.5}, pk{"k", kv, -1.5, 1.5}, pv{"v", kv};
  return {name, {pq, pk, pv},
          "  %y, %lse = mt.attention %q, %k, %v " + attrs.str() + " : (" + T(q) + ", " + T(kv) + ", " +
              T(kv) + ") -> (" + T(q) + ", " + T(lse) + ")",
          q};
}

// Attention with the operands whose `bshd` bit is set laid out [B, S, H, D]
// (q, kv: the [B, H, S, D] shapes); the gradient's layouts follow the
// forward's (mt-fold-head-transposes writes such ops).
GradCase attentionBshd(const std::string& name, std::vector<int64_t> q, std::vector<int64_t> kv,
                       bool causal, int64_t bshd) {
  auto laid = [](std::vector<int64_t> s, bool swap) {
    if (swap) std::swap(s[1], s[2]);
    return s;
  };
  std::vector<int64_t> lse(q.begin(), q.end() - 1);
  const std::vector<int64_t> sq = laid(q, bshd & 1), sk = laid(kv, bshd & 2), sv = laid(kv, bshd & 4),
                             sy = laid(q, bshd & 8);
  const std::string attrs = "{scale = 5.0e-01 : f64, causal = " + std::string(causal ? "true" : "false") +
                            ", bshd = " + std::to_string(bshd) + " : i64}";
  Param pq{"q", sq, -1.5, 1.5}, pk{"k", sk, -1.5, 1.5}, pv{"v", sv};
  return {name, {pq, pk, pv},
          "  %y, %lse = mt.attention %q, %k, %v " + attrs + " : (" + T(sq) + ", " + T(sk) + ", " + T(sv) +
              ") -> (" + T(sy) + ", " + T(lse) + ")",
          sy};
}

// rotary on x [B, S, H, D] (bshd = true), the tables broadcast to its [B, H, S, D] form.
GradCase rotaryBshd(const std::string& name, std::vector<int64_t> x, std::vector<int64_t> table) {
  const std::string body =
      constant("%cos", table, [](int64_t i) { return std::cos(0.7 * i + 0.3); }) +
      constant("%sin", table, [](int64_t i) { return std::sin(0.45 * i - 0.2); }) +
      "  %y = mt.rotary %x, %cos, %sin {bshd = true} : (" + T(x) + ", " + T(table) + ", " + T(table) +
      ") -> " + T(x);
  return {name, {P("x", x)}, body, x};
}

GradCase rotary(const std::string& name, std::vector<int64_t> x, std::vector<int64_t> table) {
  // Angles that differ between the halves, so that reading sin at the wrong
  // position shows.
  const std::string body =
      constant("%cos", table, [](int64_t i) { return std::cos(0.7 * i + 0.3); }) +
      constant("%sin", table, [](int64_t i) { return std::sin(0.45 * i - 0.2); }) +
      "  %y = mt.rotary %x, %cos, %sin : (" + T(x) + ", " + T(table) + ", " + T(table) + ") -> " + T(x);
  return {name, {P("x", x)}, body, x};
}

}  // namespace

std::vector<GradCase> attentionCases() {
  std::vector<GradCase> cases;
  // Attention: dq, dk and dv from the recomputed probabilities; dk and dv
  // summed over the query heads that share a kv head.
  cases.push_back(attention("attention_mha_causal", {2, 2, 4, 3}, {2, 2, 4, 3}, 0.5, true));
  cases.push_back(attention("attention_gqa_causal", {1, 4, 3, 3}, {1, 2, 3, 3}, 0.6, true));
  cases.push_back(attention("attention_mqa_causal", {2, 4, 3, 2}, {2, 1, 3, 2}, 0.7, true));
  cases.push_back(attention("attention_gqa_not_causal_longer_keys", {1, 4, 2, 3}, {1, 2, 5, 3}, 0.5, false));
  cases.push_back(attention("attention_causal_longer_keys", {1, 2, 3, 2}, {1, 2, 4, 2}, 1.0, true));

  // Rotary: cos and sin as the exports hold them ([1, 1, S, D]) and as a
  // plain [S, D] table.
  cases.push_back(rotary("rotary_tables_1x1xSxD", {2, 3, 4, 6}, {1, 1, 4, 6}));
  cases.push_back(rotary("rotary_tables_SxD", {2, 4, 4}, {4, 4}));

  // The [B, S, H, D] layouts of mt-fold-head-transposes: every operand, and
  // q, v alone on grouped-query attention with more keys than queries; rotary
  // on x [B, S=4, H=3, D].
  cases.push_back(attentionBshd("attention_gqa_causal_bshd_all", {1, 4, 3, 2}, {1, 2, 3, 2}, true, 15));
  cases.push_back(
      attentionBshd("attention_gqa_longer_keys_bshd_q_v", {1, 4, 2, 3}, {1, 2, 5, 3}, false, 1 | 4));
  cases.push_back(rotaryBshd("rotary_bshd_tables_1x1xSxD", {2, 4, 3, 6}, {1, 1, 4, 6}));

  // The decomposed form of grouped-query causal attention (as
  // tests/lit/passes/fuse_attention.mlir's Llama fragment), which the
  // pipeline fuses before autodiff: the fused gradient must match the
  // finite differences of the graph as written.
  {
    const std::vector<int64_t> q{1, 4, 3, 2}, kv{1, 2, 3, 2}, kv5{1, 2, 1, 3, 2}, wide{1, 2, 2, 3, 2},
        s{1, 4, 3, 3};
    // The mask as the exports fold it: one constant, the lowest float above the diagonal.
    std::string body =
        "  %mask = mt.constant {value = dense<[[0.0, -3.4028234663852886e38, -3.4028234663852886e38], "
        "[0.0, 0.0, -3.4028234663852886e38], [0.0, 0.0, 0.0]]> : " + T({3, 3}) + "} : " + T({3, 3}) + "\n"
        "  %half = mt.constant {value = dense<0.75> : tensor<f64>} : tensor<f64>\n"
        "  %k5 = mt.reshape %k : (" + T(kv) + ") -> " + T(kv5) + "\n"
        "  %kb = mt.broadcast_to %k5 : (" + T(kv5) + ") -> " + T(wide) + "\n"
        "  %kr = mt.reshape %kb : (" + T(wide) + ") -> " + T(q) + "\n"
        "  %v5 = mt.reshape %v : (" + T(kv) + ") -> " + T(kv5) + "\n"
        "  %vb = mt.broadcast_to %v5 : (" + T(kv5) + ") -> " + T(wide) + "\n"
        "  %vr = mt.reshape %vb : (" + T(wide) + ") -> " + T(q) + "\n"
        "  %qs = mt.mul %q, %half : (" + T(q) + ", tensor<f64>) -> " + T(q) + "\n"
        "  %ks = mt.mul %kr, %half : (" + T(q) + ", tensor<f64>) -> " + T(q) + "\n"
        "  %sc = mt.matmul %qs, %ks {transpose_b = true} : (" + T(q) + ", " + T(q) + ") -> " + T(s) + "\n"
        "  %am = mt.add %sc, %mask : (" + T(s) + ", " + T({3, 3}) + ") -> " + T(s) + "\n"
        "  %p = mt.softmax %am {axis = 3 : i64} : " + T(s) + "\n"
        "  %y = mt.matmul %p, %vr : (" + T(s) + ", " + T(q) + ") -> " + T(q);
    GradCase c{"attention_decomposed_gqa_fused", {P("q", q), P("k", kv), P("v", kv)}, body, q};
    c.fusedKernel = "attention";
    cases.push_back(c);
  }
  return cases;
}

}  // namespace megatrain::gradcheck
