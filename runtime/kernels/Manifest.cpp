// Manifest.cpp - the kernel manifest: every kernel a plan may name, its operand counts and shape rule.
#include "megatrain/kernels/Manifest.h"

#include "megatrain/kernels/ShapeRules.h"

namespace megatrain::kernels {

const std::vector<KernelSpec>& kernelManifest() {
  static const std::vector<KernelSpec> manifest = {
      // elementwise (elementwise.cpp / elementwise.cu)
      {"fill", 0, 1, fillRule},
      {"add", 2, 1, broadcastBinaryRule},
      {"sub", 2, 1, broadcastBinaryRule},
      {"mul", 2, 1, broadcastBinaryRule},
      {"div", 2, 1, broadcastBinaryRule},
      {"max", 2, 1, broadcastBinaryRule},
      {"min", 2, 1, broadcastBinaryRule},
      {"max_grad", 3, 2, minMaxGradRule},
      {"min_grad", 3, 2, minMaxGradRule},
      {"scale", 1, 1, sameShapesRule},
      {"relu", 1, 1, sameShapesRule},
      {"relu_grad", 2, 1, sameShapesRule},
      {"tanh", 1, 1, sameShapesRule},
      {"tanh_grad", 2, 1, sameShapesRule},
      {"sigmoid", 1, 1, sameShapesRule},
      {"sigmoid_grad", 2, 1, sameShapesRule},
      {"softplus", 1, 1, sameShapesRule},
      {"neg", 1, 1, sameShapesRule},
      {"sqrt", 1, 1, sameShapesRule},
      {"reciprocal", 1, 1, sameShapesRule},
      {"exp", 1, 1, sameShapesRule},
      {"log", 1, 1, sameShapesRule},
      {"erf", 1, 1, sameShapesRule},
      {"erf_grad", 2, 1, sameShapesRule},
      {"cos", 1, 1, sameShapesRule},
      {"sin", 1, 1, sameShapesRule},
      {"powf", 1, 1, sameShapesRule},
      {"isnan", 1, 1, sameShapesRule},
      // activations (activation.cpp / activation.cu)
      {"silu", 1, 1, sameShapesRule},
      {"silu_grad", 2, 1, sameShapesRule},
      {"swiglu", 2, 1, sameShapesRule},
      {"swiglu_grad", 3, 2, sameShapesRule},
      {"gelu", 1, 1, geluRule},
      {"gelu_grad", 2, 1, geluRule},
      // matmul
      {"matmul", 2, 1, matmulRule},
      // shape kernels
      {"reshape", 1, 1, reshapeRule},
      {"transpose", 1, 1, transposeRule},
      {"broadcast_to", 1, 1, broadcastToRule},
      {"sum_to", 1, 1, sumToRule},
      // reductions
      {"reduce_sum", 1, 1, reduceRule},
      {"reduce_mean", 1, 1, reduceRule},
      // softmax
      {"softmax", 1, 1, softmaxRule},
      {"softmax_grad", 2, 1, softmaxRule},
      // gather
      {"gather", 2, 1, gatherRule},
      {"gather_grad", 2, 1, gatherGradRule},
      // normalizations
      {"layer_norm", 3, 1, layerNormRule},
      {"layer_norm_grad", 3, 3, layerNormGradRule},
      {"rms_norm", 2, 1, rmsNormRule},
      {"rms_norm_grad", 3, 2, rmsNormGradRule},
      // losses
      {"softmax_ce", 2, 1, softmaxCeRule},
      {"softmax_ce_grad", 3, 1, softmaxCeGradRule},
      {"next_token_ce", 2, 1, nextTokenCeRule},
      {"next_token_ce_grad", 3, 1, nextTokenCeGradRule},
      // where, concat, slice, cast
      {"where", 3, 1, whereRule},
      {"concat", KernelSpec::kAnyInputs, 1, concatRule},
      {"slice", 1, 1, sliceRule},
      {"slice_grad", 1, 1, sliceGradRule},
      {"cast", 1, 1, castRule},
      // attention and rotary embeddings
      {"attention", 3, 2, attentionRule},
      {"attention_grad", 6, 3, attentionGradRule},
      {"rotary", 3, 1, rotaryRule},
      {"rotary_grad", 3, 1, rotaryRule},
  };
  return manifest;
}

const KernelSpec* findKernelSpec(std::string_view name) {
  for (const KernelSpec& spec : kernelManifest())
    if (name == spec.name) return &spec;
  return nullptr;
}

void checkKernelCall(const KernelSpec& spec, const KernelCall& call) {
  const bool variadic = spec.inputs == KernelSpec::kAnyInputs;
  const bool inputsOk = variadic ? call.numIn >= 1 : call.numIn == spec.inputs;
  if (!inputsOk || call.numOut != spec.outputs)
    fail(call, std::to_string(call.numIn) + " inputs and " + std::to_string(call.numOut) + " outputs, it takes " +
                   (variadic ? std::string("one or more") : std::to_string(spec.inputs)) + " and " +
                   std::to_string(spec.outputs));
  spec.rule(call);
}

}  // namespace megatrain::kernels
