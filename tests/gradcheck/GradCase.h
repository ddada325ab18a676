// GradCase.h - one finite-difference gradient check and the shorthands the case lists are written with.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace megatrain::gradcheck {

// Central differences in float64: the truncation error is O(eps^2) and the
// rounding error O(1e-16 |L| / eps), both far below the tolerance.
constexpr double kEps = 1e-6;
constexpr double kRelTol = 1e-6;

struct Param {
  std::string name;
  std::vector<int64_t> shape;
  double lo = -1.0, hi = 1.0;
  // Keep values at least this far from 0, for ops with a kink there (relu).
  double awayFromZero = 0.0;
};

struct GradCase {
  std::string name;
  std::vector<Param> params;
  // MLIR ops that read the parameters as %<name> and define %y.
  std::string body;
  // The shape of %y, weighted by R and summed into the loss; nullopt when %y
  // is itself the scalar loss.
  std::optional<std::vector<int64_t>> yShape;
  // A case that rounds through f32 needs a wider step and tolerance.
  double eps = kEps;
  double relTol = kRelTol;
  // Empty: the fusion passes are off, so a composite checks the rules of its
  // primitives. Else they run, and the plan must hold this kernel (a
  // composite checked through the fused op a pass made of it).
  std::string fusedKernel;
};

// "tensor<2x3xf64>".
std::string T(const std::vector<int64_t>& shape);
Param P(std::string name, std::vector<int64_t> shape);
// Values in [0.5, 1.5]: denominators, logarithms and roots stay away from 0.
Param Positive(std::string name, std::vector<int64_t> shape);

// %y = mt.<op> %a, %b with params a and b.
GradCase binary(const std::string& name, const std::string& op, Param a, Param b,
                const std::vector<int64_t>& out);
// %y = mt.<op> %x <attrs> with param x, same type in and out.
GradCase unary(const std::string& name, const std::string& op, Param x, const std::string& attrs = "");

// Cases by family (GradCheck.cpp holds the original ops).
std::vector<GradCase> llmPrimitiveCases();
// The fused ops (rms_norm, silu, swiglu, gelu) and the compositions the
// fusion passes rewrite into them (FusedCases.cpp).
std::vector<GradCase> fusedOpCases();
// The fused attention and rotary ops and a decomposed grouped-query attention
// that mt-fuse-attention rewrites (AttentionCases.cpp).
std::vector<GradCase> attentionCases();

}  // namespace megatrain::gradcheck
