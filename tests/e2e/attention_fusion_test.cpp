// attention_fusion_test.cpp - the attention and rotary fusion on the tiny exports
// (tests/models/llm): the fused compile holds one mt.attention per layer and one mt.rotary per
// query and key of each layer (models with rotary embeddings), none of the softmaxes and repeated
// kv heads they replace, and trains the same 10 AdamW steps as the unfused compile (--no-fusion)
// to within 1e-5 relative. The norm and activation fusion run too (fusion_test.cpp checks them).
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
constexpr int kLayers = 2;  // every tiny export (tests/models/make_llm_models.py)
constexpr int kSteps = 10;

struct Compiled {
  megatrain::plan::Plan plan;
  std::map<std::string, int> stepOps;  // op name -> count in the training step
};

Compiled compile(const std::string& model, bool fusion) {
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
  Compiled out;
  // The training step (forward, gradients, updates): every op by name.
  mlir::PassManager training(&context);
  megatrain::buildPipeline(training, options, megatrain::EmitStage::Training);
  if (mlir::failed(training.run(*module))) throw std::runtime_error("pipeline failed: " + model);
  module->walk([&](mlir::Operation* op) { out.stepOps[op->getName().getStringRef().str()]++; });

  mlir::PassManager planning(&context);
  megatrain::buildPlanningPipeline(planning, options, megatrain::EmitStage::Plan);
  if (mlir::failed(planning.run(*module))) throw std::runtime_error("planning failed: " + model);
  auto plan = megatrain::emitPlan(*module, {});
  if (mlir::failed(plan)) throw std::runtime_error("emission failed: " + model);
  out.plan = *plan;
  return out;
}

std::vector<double> train(const std::string& model, const megatrain::plan::Plan& plan) {
  rt::Executor executor(plan, std::make_unique<rt::CpuBackend>());
  executor.loadWeights(rt::OnnxWeights(model));
  executor.setInput("input_ids", rt::readNpy(kDir + "/input_ids.npy"));
  std::vector<double> losses;
  for (int step = 0; step < kSteps; ++step) losses.push_back(executor.runStep());
  return losses;
}

struct Export {
  std::string name;
  bool rotary;
};

class FusedExport : public ::testing::TestWithParam<Export> {};

TEST_P(FusedExport, FusesEveryLayerAndTrainsAsUnfused) {
  const Export& e = GetParam();
  const std::string model = kDir + "/" + e.name + ".onnx";
  const Compiled fused = compile(model, true);
  const Compiled plain = compile(model, false);

  auto count = [](const Compiled& c, const char* op) {
    auto it = c.stepOps.find(op);
    return it == c.stepOps.end() ? 0 : it->second;
  };
  EXPECT_EQ(count(fused, "mt.attention"), kLayers);
  EXPECT_EQ(count(fused, "mt.attention_grad"), kLayers);
  EXPECT_EQ(count(fused, "mt.softmax"), 0);
  EXPECT_EQ(count(fused, "mt.softmax_grad"), 0);
  EXPECT_EQ(count(fused, "mt.rotary"), e.rotary ? 2 * kLayers : 0);
  EXPECT_EQ(count(fused, "mt.rotary_grad"), e.rotary ? 2 * kLayers : 0);
  EXPECT_EQ(count(fused, "mt.concat"), 0) << "rotate_half's concat should be fused";
  // Unfused: the decomposed forms are all there.
  EXPECT_EQ(count(plain, "mt.attention"), 0);
  EXPECT_EQ(count(plain, "mt.rotary"), 0);
  EXPECT_EQ(count(plain, "mt.softmax"), kLayers);

  const std::vector<double> lossesFused = train(model, fused.plan);
  const std::vector<double> lossesPlain = train(model, plain.plan);
  double worst = 0;
  for (int i = 0; i < kSteps; ++i) {
    const double err = std::fabs(lossesFused[i] - lossesPlain[i]) / std::fabs(lossesPlain[i]);
    EXPECT_LT(err, 1e-5) << "step " << i << ": fused " << lossesFused[i] << ", unfused " << lossesPlain[i];
    worst = std::max(worst, err);
  }
  std::printf("%s: worst loss rel err fused vs unfused %.2e\n", e.name.c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(TinyExports, FusedExport,
                         ::testing::Values(Export{"llama_noopt", true}, Export{"llama_opt", true},
                                           Export{"qwen2_noopt", true}, Export{"qwen2_opt", true},
                                           Export{"mistral_noopt", true}, Export{"mistral_opt", true},
                                           Export{"gpt2_noopt", false}, Export{"gpt2_opt", false},
                                           Export{"llama_opset23_opt", true}),
                         [](const ::testing::TestParamInfo<Export>& info) { return info.param.name; });

}  // namespace
