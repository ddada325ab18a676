// planning_test.cpp - memory planning is exact: training with the planned arena
// (buffers sharing bytes) and with planning disabled (every buffer its own bytes)
// gives bitwise-identical losses, weights and optimizer state.
#include "megatrain/Frontend/OnnxImporter.h"
#include "megatrain/Pipeline.h"
#include "megatrain/Plan/PlanEmitter.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/HostArray.h"
#include "megatrain/runtime/OnnxWeights.h"

#include "megatrain/Dialect/MtDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <random>

namespace {

using megatrain::runtime::ElementType;
using megatrain::runtime::HostArray;

const std::string kModels = MEGATRAIN_MODELS_DIR;

megatrain::plan::Plan compile(const std::string& model, const megatrain::OnnxImportOptions& import,
                              megatrain::PipelineOptions options) {
  mlir::MLIRContext context;
  context.getOrLoadDialect<megatrain::mt::MtDialect>();
  context.getOrLoadDialect<mlir::func::FuncDialect>();
  auto module = megatrain::importOnnxModel(context, model, import);
  if (!module) throw std::runtime_error("import failed: " + model);
  mlir::PassManager pm(&context);
  megatrain::buildPipeline(pm, options, megatrain::EmitStage::Plan);
  if (mlir::failed(pm.run(*module))) throw std::runtime_error("pipeline failed: " + model);
  auto plan = megatrain::emitPlan(*module, {});
  if (mlir::failed(plan)) throw std::runtime_error("emission failed: " + model);
  return *plan;
}

// Everything a run leaves behind that must not depend on memory placement.
struct Outcome {
  std::vector<double> losses;
  std::map<std::string, std::vector<std::byte>> hostState;  // params, grads, moments
  uint64_t arenaBytes = 0;
};

using Feed = std::function<void(megatrain::runtime::Executor&, int step)>;

Outcome train(const megatrain::plan::Plan& plan, const std::string& model, const Feed& feed,
              int steps) {
  megatrain::runtime::Executor executor(plan,
                                        std::make_unique<megatrain::runtime::CpuBackend>());
  executor.loadWeights(megatrain::runtime::OnnxWeights(model));
  Outcome out;
  for (int s = 0; s < steps; ++s) {
    feed(executor, s);
    out.losses.push_back(executor.runStep());
  }
  for (const auto& t : plan.tensors()) {
    auto role = t.role();
    if (role == megatrain::plan::PARAMETER || role == megatrain::plan::GRADIENT ||
        role == megatrain::plan::OPTIMIZER_STATE)
      out.hostState[t.name()] = executor.readBytes(t.name());
  }
  for (const auto& p : plan.pools())
    if (p.tier() == megatrain::plan::DEVICE) out.arenaBytes = p.size_bytes();
  return out;
}

void expectBitwiseEqual(const Outcome& planned, const Outcome& unplanned) {
  ASSERT_EQ(planned.losses.size(), unplanned.losses.size());
  for (size_t i = 0; i < planned.losses.size(); ++i) {
    EXPECT_TRUE(std::isfinite(planned.losses[i])) << "step " << i;
    EXPECT_EQ(0, std::memcmp(&planned.losses[i], &unplanned.losses[i], sizeof(double)))
        << "loss differs at step " << i << ": " << planned.losses[i] << " vs "
        << unplanned.losses[i];
  }
  ASSERT_EQ(planned.hostState.size(), unplanned.hostState.size());
  ASSERT_FALSE(planned.hostState.empty());
  for (const auto& [name, bytes] : planned.hostState) {
    auto it = unplanned.hostState.find(name);
    ASSERT_NE(it, unplanned.hostState.end()) << name;
    EXPECT_TRUE(bytes == it->second) << "host tensor " << name << " differs";
  }
}

TEST(MemoryPlanning, TinyTransformerBitwiseIdenticalWithAndWithoutReuse) {
  const std::string model = kModels + "/tiny_transformer.onnx";
  megatrain::OnnxImportOptions import;
  import.shapes["input_ids"] = {4, 64};
  megatrain::PipelineOptions options;
  options.lossMode = "next-token-ce";
  options.lr = 3e-3;
  auto planned = compile(model, import, options);
  options.noMemoryReuse = true;
  auto unplanned = compile(model, import, options);

  // A deterministic byte stream stands in for text: the property is placement
  // independence, not learning.
  Feed feed = [](megatrain::runtime::Executor& ex, int step) {
    HostArray ids = HostArray::zeros(ElementType::I64, {4, 64});
    std::mt19937 rng(1234 + step);
    for (int64_t i = 0; i < ids.elements(); ++i) ids.data<int64_t>()[i] = rng() % 256;
    ex.setInput("input_ids", ids);
  };
  Outcome a = train(planned, model, feed, 20);
  Outcome b = train(unplanned, model, feed, 20);
  EXPECT_LT(a.arenaBytes, b.arenaBytes) << "reuse should shrink the arena";
  expectBitwiseEqual(a, b);
}

TEST(MemoryPlanning, MlpBitwiseIdenticalWithAndWithoutReuse) {
  const std::string model = kModels + "/mlp.onnx";
  megatrain::OnnxImportOptions import;
  import.shapes["x"] = {32, 16};
  import.shapes["labels"] = {32};
  megatrain::PipelineOptions options;
  options.lossMode = "output";
  options.lossOutput = "loss";
  options.lr = 1e-2;
  auto planned = compile(model, import, options);
  options.noMemoryReuse = true;
  auto unplanned = compile(model, import, options);

  // A learnable task: the label is the argmax of a fixed linear map of x.
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> map(16 * 10);
  for (float& w : map) w = normal(rng);
  Feed feed = [&map](megatrain::runtime::Executor& ex, int step) {
    std::mt19937 r(100 + step);
    std::normal_distribution<float> n;
    HostArray x = HostArray::zeros(ElementType::F32, {32, 16});
    HostArray y = HostArray::zeros(ElementType::I64, {32});
    for (int b = 0; b < 32; ++b) {
      float best = -1e30f;
      for (int k = 0; k < 16; ++k) x.data<float>()[b * 16 + k] = n(r);
      for (int c = 0; c < 10; ++c) {
        float s = 0;
        for (int k = 0; k < 16; ++k) s += x.data<float>()[b * 16 + k] * map[k * 10 + c];
        if (s > best) best = s, y.data<int64_t>()[b] = c;
      }
    }
    ex.setInput("x", x);
    ex.setInput("labels", y);
  };
  Outcome a = train(planned, model, feed, 20);
  Outcome b = train(unplanned, model, feed, 20);
  EXPECT_LT(a.arenaBytes, b.arenaBytes);
  expectBitwiseEqual(a, b);
  // And it learns: the mean loss of the last 5 steps is well below the first.
  double tail = 0;
  for (int i = 15; i < 20; ++i) tail += a.losses[i] / 5;
  EXPECT_LT(tail, 0.8 * a.losses[0]);
}

}  // namespace
