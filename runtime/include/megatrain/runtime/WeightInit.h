// WeightInit.h - --init normal:STD: parameters drawn from a seeded normal distribution, norms 1, biases 0.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "megatrain/runtime/WeightSource.h"

namespace megatrain::runtime {

// What a parameter starts as, decided by its name and rank the way Hugging
// Face models name them:
// - Zeros: a name ending in ".bias" (any rank);
// - Ones: a rank-1 tensor named "<module>.weight" whose module (the last
//   component before ".weight") contains "norm" in any case (input_layernorm,
//   post_attention_layernorm, norm, q_norm, final_layer_norm, LayerNorm) or
//   starts with "ln" (GPT-2's ln_1, ln_2, ln_f);
// - Normal: everything else (embeddings, projections, a rank-1 weight of any
//   other module), N(0, std^2).
// Models whose norms store w - 1 (Gemma's RMSNorm) want zeros there, not ones.
enum class InitKind { Normal, Ones, Zeros };
InitKind initKind(const std::string& name, size_t rank);

// "normal:STD" with STD a positive finite number; Error naming --init otherwise.
double parseNormalInit(const std::string& text);

// Every parameter from initKind. A normal element depends only on the seed,
// the parameter's name and the element's index (a counter-based generator:
// SplitMix64 over a hash of seed and name, Box-Muller in double), so the
// values are the same on every backend, for every plan of the model, and in
// whatever order the parameters are read.
class NormalInit : public WeightSource {
 public:
  NormalInit(double std, uint64_t seed);

  const std::string& path() const override { return description_; }
  void read(const std::string& name, plan::DType dtype, const std::vector<int64_t>& shape, void* out,
            size_t outBytes) const override;

 private:
  double std_;
  uint64_t seed_;
  std::string description_;
};

}  // namespace megatrain::runtime
