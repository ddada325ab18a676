// EvaluationTest.cpp - evaluation plans: checked against the training plan, fed fixed batches, the training forward loss bitwise.
#include <cmath>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "TestUtil.h"
#include "TinyPlans.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/PlanVerifier.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/Evaluation.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/OnnxWeights.h"
#include "megatrain/runtime/PlanLoader.h"

namespace megatrain::runtime::testing {
namespace {

// A uint16 token file holding `tokens`, with its sidecar.
std::string writeTokenFile(const std::string& dir, const std::string& name, const std::vector<int64_t>& tokens) {
  const std::string path = dir + "/" + name;
  std::ofstream out(path, std::ios::binary);
  for (int64_t token : tokens) {
    const uint16_t value = static_cast<uint16_t>(token);
    out.write(reinterpret_cast<const char*>(&value), sizeof value);
  }
  std::ofstream(path + ".json") << "{\"dtype\": \"uint16\", \"vocab\": 5}";
  return path;
}

std::string errorOf(const std::function<void()>& run) {
  try {
    run();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

class EvaluationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = makeTempDir();
    std::mt19937 rng(5);
    writeModel(dir_ + "/tokens.onnx", {{"E", randomTensor({5, 3}, plan::F32, rng)}});
  }

  std::string dir_;
};

// After any number of training steps, the eval loss of a batch is the loss the
// training plan's forward computes on that batch with the same weights: the
// training step that follows returns it, bit for bit.
TEST_F(EvaluationTest, EvalLossIsTheTrainingForwardLossBitwise) {
  Executor training(tokenPlan(plan::F32), std::make_unique<CpuBackend>());
  training.loadWeights(OnnxWeights(dir_ + "/tokens.onnx"));
  const std::vector<int64_t> rows = {1, 4, 2, 0, 3, 3, 1, 2};  // [2, 4]
  HostArray tokens = HostArray::zeros(ElementType::I64, {2, 4});
  std::copy(rows.begin(), rows.end(), tokens.data<int64_t>());
  training.setInput("tokens", tokens);

  // The eval set: those two rows as the first batch, then two more windows.
  std::vector<int64_t> file = rows;
  file.insert(file.end(), {0, 1, 2, 3, 4, 3, 2, 1, 0});  // 17 tokens: 4 windows of 4
  const std::string path = writeTokenFile(dir_, "eval.bin", file);
  Evaluator evaluator(std::make_unique<Executor>(tokenEvalPlan(plan::F32, 2), std::make_unique<CpuBackend>()),
                      EvalBatches({path}, TokenDType::U16, 2, 4, 1));
  ASSERT_EQ(evaluator.batches(), 1);

  for (int step = 0; step < 3; ++step) {
    training.runStep();
    const std::vector<std::byte> before = training.readBytes("E");
    const std::vector<std::byte> momentsBefore = training.readBytes("adam_m:E");
    const EvalResult result = evaluator.run(training);
    EXPECT_EQ(training.readBytes("E"), before) << "evaluation changed the weights";
    EXPECT_EQ(training.readBytes("adam_m:E"), momentsBefore);
    const double next = training.runStep();
    EXPECT_EQ(result.loss, next) << "after step " << step + 1;
    EXPECT_EQ(result.perplexity, std::exp(result.loss));
    EXPECT_EQ(result.batches, 1);
  }
  EXPECT_EQ(training.optimizerStep(), 6) << "AdamW's step count counts training steps only";
}

// Batch k holds windows kB .. kB+B-1, files in the order given; the mean is
// over batches, and the same every run.
TEST_F(EvaluationTest, BatchesAreFixedWindowsInFileOrder) {
  const std::string a = writeTokenFile(dir_, "a.bin", {0, 1, 2, 3, 4, 0, 1, 2, 3});  // 2 windows (1 token left)
  const std::string b = writeTokenFile(dir_, "b.bin", {4, 4, 4, 4, 3, 3, 3, 3, 2, 2, 2, 2});  // 3 windows
  EvalBatches batches({a, b}, TokenDType::U16, 2, 4, 0);
  ASSERT_EQ(batches.count(), 2);  // 5 windows: 2 whole batches of 2
  HostArray out = HostArray::zeros(ElementType::I64, {2, 4});
  batches.fill(0, out);
  EXPECT_EQ(std::vector<int64_t>(out.data<int64_t>(), out.data<int64_t>() + 8),
            (std::vector<int64_t>{0, 1, 2, 3, 4, 0, 1, 2}));
  batches.fill(1, out);
  EXPECT_EQ(std::vector<int64_t>(out.data<int64_t>(), out.data<int64_t>() + 8),
            (std::vector<int64_t>{4, 4, 4, 4, 3, 3, 3, 3}));

  Executor training(tokenPlan(plan::F32), std::make_unique<CpuBackend>());
  training.loadWeights(OnnxWeights(dir_ + "/tokens.onnx"));
  Evaluator evaluator(std::make_unique<Executor>(tokenEvalPlan(plan::F32, 2), std::make_unique<CpuBackend>()),
                      EvalBatches({a, b}, TokenDType::U16, 2, 4, 0));
  const EvalResult first = evaluator.run(training);
  const EvalResult again = evaluator.run(training);
  EXPECT_EQ(first.loss, again.loss);

  // The mean of the two batches' losses, each from its own evaluation.
  Evaluator one(std::make_unique<Executor>(tokenEvalPlan(plan::F32, 2), std::make_unique<CpuBackend>()),
                EvalBatches({a}, TokenDType::U16, 2, 4, 0));
  Evaluator other(std::make_unique<Executor>(tokenEvalPlan(plan::F32, 2), std::make_unique<CpuBackend>()),
                  EvalBatches({b}, TokenDType::U16, 2, 4, 1));
  EXPECT_EQ(first.loss, (one.run(training).loss + other.run(training).loss) / 2);
}

TEST_F(EvaluationTest, TooLittleEvalDataIsNamed) {
  const std::string a = writeTokenFile(dir_, "a.bin", {0, 1, 2, 3, 4, 0, 1, 2, 3});
  EXPECT_EQ(errorOf([&] { EvalBatches({a}, TokenDType::U16, 3, 4, 0); }),
            "--eval-data holds 2 windows of 4 tokens, not one batch of 3 (the eval plan's token input shape); give "
            "more eval text");
  EXPECT_EQ(errorOf([&] { EvalBatches({a}, TokenDType::U16, 1, 4, 3); }),
            "--eval-batches 3: --eval-data holds 2 windows of 4 tokens, 2 batches of 1 (pass --eval-batches 2 or "
            "less)");
  const std::string bad = writeTokenFile(dir_, "bad.bin", {0, 1, 9, 3});
  EXPECT_NE(errorOf([&] { EvalBatches({bad}, TokenDType::U16, 1, 4, 0); }).find("outside the vocabulary of 5"),
            std::string::npos);
}

TEST_F(EvaluationTest, PlansMustMatchByName) {
  const plan::Plan training = tokenPlan(plan::F32);
  EXPECT_EQ(errorOf([&] { checkEvaluationPlan(tokenEvalPlan(plan::F32, 3), "e.plan", training, "t.plan"); }),
            "(no error)");
  EXPECT_EQ(errorOf([&] { checkEvaluationPlan(training, "t.plan", training, "t.plan"); }),
            "--eval-plan t.plan is a training plan, not an evaluation plan (compile it with megatrain-compile "
            "--forward-only)");
  EXPECT_EQ(errorOf([&] { checkEvaluationPlan(tokenEvalPlan(plan::F64, 2), "e.plan", training, "t.plan"); }),
            "--eval-plan e.plan: parameter 'E' is [5, 3] f64 there but [5, 3] f32 in t.plan (compile both plans "
            "from the same model)");
  plan::Plan renamed = tokenEvalPlan(plan::F32, 2);
  renamed.mutable_tensors(0)->set_name("F");
  EXPECT_EQ(errorOf([&] { checkEvaluationPlan(renamed, "e.plan", training, "t.plan"); }),
            "--eval-plan e.plan: parameter 'F' is not a parameter of t.plan (compile both plans from the same model)");

  // The executor checks the same when it copies.
  Executor trainer(training, std::make_unique<CpuBackend>());
  trainer.loadWeights(OnnxWeights(dir_ + "/tokens.onnx"));
  Executor wide(tokenEvalPlan(plan::F64, 2), std::make_unique<CpuBackend>());
  EXPECT_EQ(errorOf([&] { wide.loadParametersFrom(trainer); }),
            "parameter 'E' is [5, 3] f64 here but [5, 3] f32 in the plan the weights come from");
}

// The validator holds an evaluation plan to what it says: no gradients,
// optimizer state or updates.
TEST_F(EvaluationTest, AnEvaluationPlanWithUpdatesIsRejected) {
  CpuBackend backend;
  plan::Plan plan = tokenPlan(plan::F32);
  plan.mutable_header()->set_evaluation(true);
  plan.mutable_header()->set_format_minor(6);
  EXPECT_EQ(errorOf([&] { validatePlan(plan, backend, "e.plan"); }),
            "e.plan: header: an evaluation plan has no gradients or optimizer state, but tensor 1 'grad:E' is "
            "GRADIENT");
  plan.mutable_header()->set_format_minor(4);
  EXPECT_EQ(errorOf([&] { validatePlan(plan, backend, "e.plan"); }),
            "e.plan: header: evaluation is set in a format 1.4 plan (it needs 1.6)");
  EXPECT_EQ(errorOf([&] { validatePlan(tokenEvalPlan(plan::F32, 2), backend, "e.plan"); }), "(no error)");
  // The schedule verifier, which the compiler runs too, on its own.
  const std::vector<std::string> failures = verifySchedule(plan);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].rfind("trainable parameter 'E' is updated by 1 ADAMW tasks (steps ", 0), 0u) << failures[0];
  EXPECT_NE(failures[0].find("), expected none in an evaluation plan"), std::string::npos) << failures[0];
  EXPECT_TRUE(verifySchedule(tokenEvalPlan(plan::F32, 2)).empty());
}

}  // namespace
}  // namespace megatrain::runtime::testing
