// EvaluationTest.cpp - an evaluation plan on cuda beside a training plan on cuda: the eval loss is the training forward loss.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "CudaBackend.h"
#include "CudaHarness.h"
#include "TinyPlans.h"
#include "megatrain/runtime/Evaluation.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/OnnxWeights.h"

namespace megatrain::runtime::testing {
namespace {

// Two CUDA backends in one process, as megatrain-run --eval-plan makes them:
// the evaluation reads the training executor's host masters, and its loss on
// a batch is the loss the next training step computes on that batch. The
// same kernels run on the same operands, so the values agree to the bit in
// practice; the bar is 1e-6 relative, kernel nondeterminism's margin.
TEST(CudaEvaluation, EvalLossIsTheTrainingForwardLoss) {
  const std::string dir = makeTempDir();
  std::mt19937 rng(testSeed());
  writeModel(dir + "/tokens.onnx", {{"E", randomTensor({5, 3}, plan::F32, rng)}});
  Executor training(tokenPlan(plan::F32), makeCudaBackend(0));
  training.loadWeights(OnnxWeights(dir + "/tokens.onnx"));
  const std::vector<int64_t> rows = {1, 4, 2, 0, 3, 3, 1, 2};
  HostArray tokens = HostArray::zeros(ElementType::I64, {2, 4});
  std::copy(rows.begin(), rows.end(), tokens.data<int64_t>());
  training.setInput("tokens", tokens);
  {
    std::ofstream out(dir + "/eval.bin", std::ios::binary);
    for (int64_t token : rows) {
      const uint16_t value = static_cast<uint16_t>(token);
      out.write(reinterpret_cast<const char*>(&value), sizeof value);
    }
  }
  Evaluator evaluator(std::make_unique<Executor>(tokenEvalPlan(plan::F32, 2), makeCudaBackend(0)),
                      EvalBatches({dir + "/eval.bin"}, TokenDType::U16, 2, 4, 0));
  for (int step = 1; step <= 3; ++step) {
    training.runStep();
    const std::vector<double> before = training.readTensor("E");
    const double evaluated = evaluator.run(training).loss;
    EXPECT_EQ(training.readTensor("E"), before) << "evaluation changed the weights";
    const double next = training.runStep();
    ASSERT_TRUE(std::isfinite(evaluated));
    EXPECT_NEAR(evaluated, next, 1e-6 * std::abs(next)) << "after step " << step;
  }
}

}  // namespace
}  // namespace megatrain::runtime::testing
