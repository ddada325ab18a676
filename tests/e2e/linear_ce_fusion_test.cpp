// linear_ce_fusion_test.cpp - mt-fuse-linear-ce on the tiny exports (tests/models/llm): the default compile holds
// one linear_ce and one linear_ce_grad and no next_token_ce, its arena is smaller than the compile with the pass off
// (--no-fuse-linear-ce: the [tokens, vocab] logits and their gradient exist), and both train 10 AdamW steps to the
// same losses, in fp32 and bf16, with the vocabulary (256) in one chunk and in chunks of 96 (the last one short).
// fp32 trains to the same bits here. bf16 rounds dlogits to bf16 on both sides, but the fused gradient reads the f32
// lse its forward stored where the unfused one recomputes it in double, so a few elements a step round to the
// neighbouring bf16: the losses drift apart by about 3e-5 in 10 steps.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
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

struct Case {
  std::string model;      // file name without .onnx
  std::string precision;  // fp32 | bf16
  int64_t chunk;          // 0: the pass chooses
  double tolerance;       // relative, per step
};

std::ostream& operator<<(std::ostream& os, const Case& c) {
  return os << c.model << "_" << c.precision << "_chunk" << c.chunk;
}

megatrain::plan::Plan compile(const Case& c, bool fuse) {
  mlir::MLIRContext context;
  context.getOrLoadDialect<megatrain::mt::MtDialect>();
  context.getOrLoadDialect<mlir::func::FuncDialect>();
  megatrain::OnnxImportOptions import;
  import.shapes["input_ids"] = {2, 32};
  const std::string model = kDir + "/" + c.model + ".onnx";
  auto module = megatrain::importOnnxModel(context, model, import);
  if (!module) throw std::runtime_error("import failed: " + model);
  megatrain::PipelineOptions options;
  options.lossMode = "next-token-ce";
  options.precision = c.precision;
  options.fuseLinearCe = fuse;
  options.linearCeChunk = c.chunk;
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

uint64_t deviceArena(const megatrain::plan::Plan& plan) {
  for (const auto& pool : plan.pools())
    if (pool.name() == "device") return pool.size_bytes();
  return 0;
}

std::vector<double> train(const megatrain::plan::Plan& plan, const std::string& model) {
  rt::Executor executor(plan, std::make_unique<rt::CpuBackend>());
  executor.loadWeights(rt::OnnxWeights(kDir + "/" + model + ".onnx"));
  executor.setInput("input_ids", rt::readNpy(kDir + "/input_ids.npy"));
  std::vector<double> losses;
  for (int step = 0; step < kSteps; ++step) losses.push_back(executor.runStep());
  return losses;
}

class LinearCeFusion : public ::testing::TestWithParam<Case> {};

TEST_P(LinearCeFusion, FusesAndTrainsAsUnfused) {
  const Case& c = GetParam();
  const megatrain::plan::Plan fusedPlan = compile(c, true);
  const megatrain::plan::Plan plainPlan = compile(c, false);

  std::map<std::string, int> fused = kernelCounts(fusedPlan), plain = kernelCounts(plainPlan);
  EXPECT_EQ(fused["linear_ce"], 1);
  EXPECT_EQ(fused["linear_ce_grad"], 1);
  EXPECT_EQ(fused["next_token_ce"], 0);
  EXPECT_EQ(fused["next_token_ce_grad"], 0);
  EXPECT_EQ(plain["linear_ce"], 0);
  EXPECT_EQ(plain["next_token_ce"], 1);
  for (const auto& step : fusedPlan.steps()) {
    if (!step.has_kernel() || step.kernel().kernel() != "linear_ce") continue;
    for (const auto& attr : step.kernel().attributes()) {
      if (attr.name() == "chunk") {
        EXPECT_EQ(attr.i(), c.chunk ? c.chunk : 256);
      }
    }
  }
  // The token input is found through the fused loss too.
  EXPECT_EQ(fusedPlan.header().token_input(), plainPlan.header().token_input());
  EXPECT_EQ(fusedPlan.header().tokens_per_step(), plainPlan.header().tokens_per_step());
  const uint64_t fusedArena = deviceArena(fusedPlan), plainArena = deviceArena(plainPlan);
  EXPECT_LT(fusedArena, plainArena);

  const std::vector<double> fusedLosses = train(fusedPlan, c.model);
  const std::vector<double> plainLosses = train(plainPlan, c.model);
  double worst = 0;
  for (int step = 0; step < kSteps; ++step) {
    const double err = std::fabs(fusedLosses[step] - plainLosses[step]) / std::fabs(plainLosses[step]);
    EXPECT_LT(err, c.tolerance) << "step " << step << ": fused " << fusedLosses[step] << " vs unfused "
                                << plainLosses[step];
    worst = std::max(worst, err);
  }
  EXPECT_LT(fusedLosses.back(), fusedLosses.front()) << "the fused plan does not train";
  std::printf("%s %s chunk %lld: arena %llu fused vs %llu unfused; worst loss rel diff %.2e\n", c.model.c_str(),
              c.precision.c_str(), static_cast<long long>(c.chunk), static_cast<unsigned long long>(fusedArena),
              static_cast<unsigned long long>(plainArena), worst);
}

INSTANTIATE_TEST_SUITE_P(TinyExports, LinearCeFusion,
                         ::testing::Values(Case{"llama_noopt", "fp32", 0, 1e-6}, Case{"llama_noopt", "fp32", 96, 1e-6},
                                           Case{"llama_noopt", "bf16", 96, 1e-4}, Case{"qwen2_noopt", "fp32", 0, 1e-6}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.model + "_" + info.param.precision + "_chunk" +
                                  std::to_string(info.param.chunk);
                         });

}  // namespace
