//===- OpSuggestions.cpp - what to use instead of an unsupported ONNX op ---===//
#include "OpSuggestions.h"

#include <algorithm>

namespace megatrain::onnx_import {

namespace {
/// Ops megatrain does not import, and what to use instead.
struct Alternative {
  const char *op;
  const char *instead;
};
constexpr Alternative kAlternatives[] = {
    {"Einsum", "MatMul (with Transpose/Reshape)"},
    {"FusedMatMul", "MatMul"},
    {"MatMulNBits", "MatMul (export the model in float32)"},
    {"QuantizeLinear", "Cast (export the model in float32)"},
    {"DequantizeLinear", "Cast (export the model in float32)"},
    {"SkipLayerNormalization", "LayerNormalization (with Add)"},
    {"SimplifiedLayerNormalization", "RMSNormalization"},
    {"SkipSimplifiedLayerNormalization", "RMSNormalization (with Add)"},
    {"FastGelu", "Gelu"},
    {"BiasGelu", "Gelu (with Add)"},
    {"QuickGelu", "Sigmoid and Mul"},
    {"GroupQueryAttention", "Attention"},
    {"MultiHeadAttention", "Attention"},
    {"RotaryEmbedding", "Mul, Slice, Neg and Concat (torch.onnx.export's rotary form)"},
    {"LogSoftmax", "Softmax and Log"},
    {"HardSigmoid", "Sigmoid"},
    {"HardSwish", "Sigmoid and Mul"},
    {"LeakyRelu", "Relu"},
    {"Elu", "Relu"},
    {"Selu", "Relu"},
    {"PRelu", "Relu"},
    {"Mish", "Softplus, Tanh and Mul"},
    {"ReduceMax", "ReduceMean (ReduceMax is folded only on values known at import time)"},
    {"ReduceMin", "ReduceMean (ReduceMin is folded only on values known at import time)"},
    {"ReduceProd", "ReduceSum"},
    {"ReduceL2", "Mul, ReduceSum and Sqrt"},
    {"Conv", "MatMul (a 1x1 convolution is a MatMul)"},
    {"ScatterND", "Where (with a mask known at import time)"},
    {"ScatterElements", "Where (with a mask known at import time)"},
    {"Dropout", "Identity (export in eval mode: model.eval())"},
};
} // namespace

std::string nearestSupported(llvm::StringRef op,
                             llvm::ArrayRef<llvm::StringRef> supported) {
  for (const Alternative &alt : kAlternatives)
    if (op == alt.op)
      return alt.instead;
  std::string best;
  unsigned bestDistance = ~0u;
  // Ties go to the alphabetically first name, so the answer does not depend
  // on the order of `supported`.
  for (llvm::StringRef candidate : supported) {
    unsigned d = op.edit_distance(candidate, /*AllowReplacements=*/true);
    if (d < bestDistance || (d == bestDistance && candidate < best)) {
      bestDistance = d;
      best = candidate.str();
    }
  }
  if (bestDistance <= std::max<size_t>(2, op.size() / 3))
    return best;
  return "none by name (docs/frontends.md lists the supported ops)";
}

} // namespace megatrain::onnx_import
