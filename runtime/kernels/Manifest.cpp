// Manifest.cpp - the kernel manifest: every kernel a plan may name, its operand counts and shape rule.
#include "megatrain/kernels/Manifest.h"

#include <string>

#include "megatrain/kernels/ShapeRules.h"

namespace megatrain::kernels {

const std::vector<KernelSpec>& kernelManifest() {
  static const std::vector<KernelSpec> manifest = {
      // elementwise (elementwise.cpp / elementwise.cu)
      {"fill", 0, 1, fillRule, {"value"}},
      {"add", 2, 1, broadcastBinaryRule},
      {"sub", 2, 1, broadcastBinaryRule},
      {"mul", 2, 1, broadcastBinaryRule},
      {"div", 2, 1, broadcastBinaryRule},
      {"max", 2, 1, broadcastBinaryRule},
      {"min", 2, 1, broadcastBinaryRule},
      {"max_grad", 3, 2, minMaxGradRule},
      {"min_grad", 3, 2, minMaxGradRule},
      {"scale", 1, 1, sameShapesRule, {"alpha"}},
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
      {"powf", 1, 1, sameShapesRule, {"exponent"}},
      {"isnan", 1, 1, sameShapesRule},
      // activations (activation.cpp / activation.cu)
      {"silu", 1, 1, sameShapesRule},
      {"silu_grad", 2, 1, sameShapesRule},
      {"swiglu", 2, 1, sameShapesRule},
      {"swiglu_grad", 3, 2, sameShapesRule},
      {"gelu", 1, 1, geluRule, {"approximate"}},
      {"gelu_grad", 2, 1, geluRule, {"approximate"}},
      // matmul
      {"matmul", 2, 1, matmulRule, {"transpose_a", "transpose_b", "precision"}},
      {"matmul_add", 3, 1, matmulAddRule, {"transpose_a", "transpose_b", "precision"}},
      {"matmul_bias_gelu", 3, 2, matmulBiasGeluRule, {"transpose_a", "transpose_b", "precision"}},
      {"matmul_gelu_grad", 3, 1, matmulGeluGradRule, {"transpose_a", "transpose_b", "precision"}},
      // shape kernels
      {"reshape", 1, 1, reshapeRule},
      {"transpose", 1, 1, transposeRule, {"perm"}},
      {"broadcast_to", 1, 1, broadcastToRule},
      {"sum_to", 1, 1, sumToRule},
      // reductions
      {"reduce_sum", 1, 1, reduceRule, {"axes", "keepdims"}},
      {"reduce_mean", 1, 1, reduceRule, {"axes", "keepdims"}},
      // softmax
      {"softmax", 1, 1, softmaxRule, {"axis"}},
      {"softmax_grad", 2, 1, softmaxRule, {"axis"}},
      // gather
      {"gather", 2, 1, gatherRule, {"axis"}},
      {"gather_grad", 2, 1, gatherGradRule, {"axis"}},
      // normalizations
      {"layer_norm", 3, 1, layerNormRule, {"axis", "epsilon"}},
      {"layer_norm_grad", 3, 3, layerNormGradRule, {"axis", "epsilon"}},
      {"rms_norm", 2, 1, rmsNormRule, {"axis", "epsilon"}},
      {"rms_norm_grad", 3, 2, rmsNormGradRule, {"axis", "epsilon"}},
      {"rms_norm_grad_add", 4, KernelSpec::kAnyOutputs, rmsNormGradAddRule, {"axis", "epsilon"}},
      // losses
      {"softmax_ce", 2, 1, softmaxCeRule, {"ignore_index", "reduction"}},
      {"softmax_ce_grad", 3, 1, softmaxCeGradRule, {"ignore_index", "reduction"}},
      {"next_token_ce", 2, 1, nextTokenCeRule, {"ignore_index"}},
      {"next_token_ce_grad", 3, 1, nextTokenCeGradRule, {"ignore_index"}},
      {"linear_ce", 3, 2, linearCeRule, {"ignore_index", "chunk", "precision"}},
      {"linear_ce_grad", 5, 2, linearCeGradRule, {"ignore_index", "chunk", "precision"}},
      // where, concat, slice, cast
      {"where", 3, 1, whereRule},
      {"concat", KernelSpec::kAnyInputs, 1, concatRule, {"axis"}},
      {"slice", 1, 1, sliceRule, {"starts", "ends", "steps"}},
      {"slice_grad", 1, 1, sliceGradRule, {"starts", "ends", "steps"}},
      {"cast", 1, 1, castRule},
      // attention and rotary embeddings
      {"attention", 3, 2, attentionRule, {"scale", "causal", "precision", "bshd"}},
      {"attention_grad", 6, 3, attentionGradRule, {"scale", "causal", "precision", "bshd"}},
      {"rotary", 3, 1, rotaryRule, {"bshd"}},
      {"rotary_grad", 3, 1, rotaryRule, {"bshd"}},
      // fused pointwise chains (pointwise.cpp / pointwise.cu)
      {"pointwise", KernelSpec::kAnyInputs, KernelSpec::kAnyOutputs, pointwiseRule,
       {"code", "constants", "outputs"}},
  };
  return manifest;
}

const KernelSpec* findKernelSpec(std::string_view name) {
  for (const KernelSpec& spec : kernelManifest())
    if (name == spec.name) return &spec;
  return nullptr;
}

void checkKernelAttributes(const KernelSpec& spec, const KernelCall& call) {
  const std::vector<Attribute>& given = call.attrs.list();
  for (size_t i = 0; i < given.size(); ++i) {
    const std::string& name = given[i].name;
    bool known = false;
    for (const char* allowed : spec.attributes) known = known || name == allowed;
    if (!known) {
      std::string list;
      for (const char* allowed : spec.attributes) list += std::string(list.empty() ? "" : ", ") + allowed;
      fail(call, "attribute '" + name + "' is not one it takes (" + (list.empty() ? "none" : list) + ")");
    }
    for (size_t j = 0; j < i; ++j)
      if (given[j].name == name) fail(call, "attribute '" + name + "' is given twice");
  }
}

void checkKernelCall(const KernelSpec& spec, const KernelCall& call) {
  const bool variadic = spec.inputs == KernelSpec::kAnyInputs;
  const bool anyOutputs = spec.outputs == KernelSpec::kAnyOutputs;
  const bool inputsOk = variadic ? call.numIn >= 1 : call.numIn == spec.inputs;
  const bool outputsOk = anyOutputs ? call.numOut >= 1 : call.numOut == spec.outputs;
  if (!inputsOk || !outputsOk)
    fail(call, std::to_string(call.numIn) + " inputs and " + std::to_string(call.numOut) + " outputs, it takes " +
                   (variadic ? std::string("one or more") : std::to_string(spec.inputs)) + " and " +
                   (anyOutputs ? std::string("one or more") : std::to_string(spec.outputs)));
  checkKernelAttributes(spec, call);
  spec.rule(call);
}

}  // namespace megatrain::kernels
