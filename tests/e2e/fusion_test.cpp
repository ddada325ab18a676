// fusion_test.cpp - the fusion passes on the tiny exports (tests/models/llm): the default compile of
// each holds the fused kernels (one rms_norm per RMSNorm site, one swiglu per MLP, one attention
// per layer and one rotary per query and key of each layer for Llama, Qwen2 and Mistral; one gelu
// per MLP and one attention per layer for GPT-2) and none of the primitives they replace, and
// trains 10 AdamW steps to the losses of the same model compiled with fusion off.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "megatrain/Dialect/MtDialect.h"
#include "megatrain/Frontend/OnnxImporter.h"
#include "megatrain/Pipeline.h"
#include "megatrain/Plan/PlanEmitter.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/Npy.h"
#include "megatrain/runtime/OnnxWeights.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"

namespace {

namespace rt = megatrain::runtime;

const std::string kDir = MEGATRAIN_LLM_MODELS_DIR;
constexpr int kSteps = 10;

struct Export {
  std::string name;  // file name without .onnx
  // Kernel counts the fused plan must have (forward and gradient kernels);
  // the primitives fusion removes must be absent.
  std::map<std::string, int> kernels;
};

std::ostream& operator<<(std::ostream& os, const Export& e) { return os << e.name; }

megatrain::plan::Plan compile(const std::string& model, bool fusion) {
  mlir::MLIRContext context;
  context.getOrLoadDialect<megatrain::mt::MtDialect>();
  context.getOrLoadDialect<mlir::func::FuncDialect>();
  megatrain::OnnxImportOptions import;
  import.shapes["input_ids"] = {2, 32};
  auto module = megatrain::importOnnxModel(context, model, import);
  if (!module) throw std::runtime_error("import failed: " + model);
  megatrain::PipelineOptions options;
  options.lossMode = "next-token-ce";
  options.fusion = fusion;
  // The kernels counted are the pattern passes' own; mt-fuse-pointwise would fold some
  // (gelu after its bias add) into pointwise programs (tests/e2e/fuse_pointwise_bitwise.sh),
  // and mt-fuse-matmul-epilogues a tanh gelu after its bias into matmul_bias_gelu
  // (tests/e2e/matmul_epilogues_bitwise.sh), and mt-fuse-norm-grad-adds an rms_norm_grad and
  // the add after it into rms_norm_grad_add (tests/e2e/fuse_norm_grad_adds_bitwise.sh).
  options.fusePointwise = false;
  options.matmulEpilogues = false;
  options.fuseNormGradAdds = false;
  mlir::PassManager pm(&context);
  megatrain::buildPipeline(pm, options, megatrain::EmitStage::Plan);
  if (mlir::failed(pm.run(*module))) throw std::runtime_error("pipeline failed: " + model);
  auto plan = megatrain::emitPlan(*module, {});
  if (mlir::failed(plan)) throw std::runtime_error("emission failed: " + model);
  return *plan;
}

std::map<std::string, int> kernelCounts(const megatrain::plan::Plan& plan) {
  std::map<std::string, int> counts;
  for (const auto& step : plan.steps())
    if (step.has_kernel()) counts[step.kernel().kernel()]++;
  return counts;
}

std::vector<double> train(const megatrain::plan::Plan& plan, const std::string& model) {
  rt::Executor executor(plan, std::make_unique<rt::CpuBackend>());
  executor.loadWeights(rt::OnnxWeights(model));
  executor.setInput("input_ids", rt::readNpy(kDir + "/input_ids.npy"));
  std::vector<double> losses;
  for (int step = 0; step < kSteps; ++step) losses.push_back(executor.runStep());
  return losses;
}

class FusedExport : public ::testing::TestWithParam<Export> {};

TEST_P(FusedExport, HoldsTheFusedKernelsAndTrainsAsUnfused) {
  const Export& e = GetParam();
  const std::string model = kDir + "/" + e.name + ".onnx";
  const megatrain::plan::Plan fusedPlan = compile(model, true);
  const megatrain::plan::Plan plainPlan = compile(model, false);

  std::map<std::string, int> fused = kernelCounts(fusedPlan), plain = kernelCounts(plainPlan);
  for (const auto& [kernel, count] : e.kernels) {
    EXPECT_EQ(fused[kernel], count) << kernel << " kernels in the fused plan";
    EXPECT_EQ(plain[kernel], 0) << kernel << " kernels with fusion off";
  }
  // What the fused ops replace: none of it is left.
  for (const char* primitive : {"sigmoid", "sqrt", "reciprocal", "tanh", "powf", "erf"})
    EXPECT_EQ(fused[primitive], 0) << primitive << " kernels left in the fused plan";
  EXPECT_LT(fusedPlan.steps_size(), plainPlan.steps_size());

  const std::vector<double> fusedLosses = train(fusedPlan, model);
  const std::vector<double> plainLosses = train(plainPlan, model);
  double worst = 0;
  for (int step = 0; step < kSteps; ++step) {
    const double err = std::fabs(fusedLosses[step] - plainLosses[step]) / std::fabs(plainLosses[step]);
    EXPECT_LT(err, 1e-5) << "step " << step << ": fused " << fusedLosses[step] << " vs unfused "
                         << plainLosses[step];
    worst = std::max(worst, err);
  }
  std::printf("%s: %d steps fused vs %d unfused; worst loss rel diff %.2e\n", e.name.c_str(),
              fusedPlan.steps_size(), plainPlan.steps_size(), worst);
}

// Two decoder layers each: RMSNorm before attention and before the MLP, one
// final RMSNorm (5 sites), one gated MLP, one causal attention and a rotary
// embedding of q and of k per layer; GPT-2 has one GELU MLP and one attention
// per layer, no rotary, and its LayerNormalization nodes import as layer_norm
// anyway.
const std::map<std::string, int> kLlamaLike = {
    {"rms_norm", 5},  {"rms_norm_grad", 5},  {"swiglu", 2}, {"swiglu_grad", 2},
    {"attention", 2}, {"attention_grad", 2}, {"rotary", 4}, {"rotary_grad", 4}};
const std::map<std::string, int> kGpt2 = {
    {"gelu", 2}, {"gelu_grad", 2}, {"attention", 2}, {"attention_grad", 2}, {"rotary", 0}};

INSTANTIATE_TEST_SUITE_P(
    TinyExports, FusedExport,
    ::testing::Values(Export{"llama_noopt", kLlamaLike}, Export{"llama_opt", kLlamaLike},
                      Export{"llama_opset23_opt", kLlamaLike}, Export{"qwen2_noopt", kLlamaLike},
                      Export{"qwen2_opt", kLlamaLike}, Export{"mistral_noopt", kLlamaLike},
                      Export{"mistral_opt", kLlamaLike}, Export{"gpt2_noopt", kGpt2},
                      Export{"gpt2_opt", kGpt2}),
    [](const ::testing::TestParamInfo<Export>& info) { return info.param.name; });

}  // namespace
