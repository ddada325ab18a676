// ExecutorTest.cpp - the executor on hand-built plans: loss, gradients, AdamW updates, poisoning, determinism.
#include <cmath>
#include <cstring>
#include <memory>

#include <gtest/gtest.h>

#include "TestUtil.h"
#include "TinyPlans.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/OnnxWeights.h"

namespace megatrain::runtime::testing {
namespace {

class LinearPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = makeTempDir();
    std::mt19937 rng(71);
    w_ = randomTensor({3, 2}, plan::F64, rng);
    x_ = randomTensor({4, 3}, plan::F64, rng);
    writeModel(dir_ + "/linear.onnx", {{"W", w_}});
  }

  std::unique_ptr<Executor> makeExecutor(plan::DType dtype) {
    auto executor = std::make_unique<Executor>(linearPlan(dtype), std::make_unique<CpuBackend>());
    executor->loadWeights(OnnxWeights(dir_ + "/linear.onnx"));
    HostArray x = HostArray::zeros(dtype == plan::F32 ? ElementType::F32 : ElementType::F64, {4, 3});
    for (int i = 0; i < 12; ++i) {
      if (dtype == plan::F32) x.data<float>()[i] = static_cast<float>(x_.values[i]);
      else x.data<double>()[i] = x_.values[i];
    }
    executor->setInput("x", x);
    return executor;
  }

  std::string dir_;
  HostTensor w_, x_;
};

// One step by hand: y = x W, loss = mean(y^2), dW = x^T (2 y / 8), then AdamW.
TEST_F(LinearPlanTest, LossGradientAndUpdateMatchHandComputation) {
  auto executor = makeExecutor(plan::F64);
  const double loss = executor->runStep();

  std::vector<double> y(8, 0.0), dW(6, 0.0);
  double expectedLoss = 0;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) {
      for (int k = 0; k < 3; ++k) y[i * 2 + j] += x_.values[i * 3 + k] * w_.values[k * 2 + j];
      expectedLoss += y[i * 2 + j] * y[i * 2 + j] / 8;
    }
  for (int k = 0; k < 3; ++k)
    for (int j = 0; j < 2; ++j)
      for (int i = 0; i < 4; ++i) dW[k * 2 + j] += x_.values[i * 3 + k] * 2 * y[i * 2 + j] / 8;
  EXPECT_NEAR(loss, expectedLoss, 1e-12);
  expectAllNear(executor->readTensor("grad:W"), dW, 1e-12);

  // AdamW step 1 (lr 0.01, betas 0.9/0.999, eps 1e-8, weight decay 0.1).
  std::vector<double> expectedW(6);
  for (int i = 0; i < 6; ++i) {
    const double g = dW[i], m = 0.1 * g, v = 0.001 * g * g;
    const double mHat = m / (1 - 0.9), vHat = v / (1 - 0.999);
    const double decayed = w_.values[i] - 0.01 * 0.1 * w_.values[i];
    expectedW[i] = decayed - 0.01 * mHat / (std::sqrt(vHat) + 1e-8);
  }
  expectAllNear(executor->readTensor("W"), expectedW, 1e-12);
  expectAllNear(executor->readTensor("adam_m:W"), [&] {
    std::vector<double> m(6);
    for (int i = 0; i < 6; ++i) m[i] = 0.1 * dW[i];
    return m;
  }(), 1e-12);
  EXPECT_EQ(executor->optimizerStep(), 1);
}

// Three steps against the same computation in a plain loop.
TEST_F(LinearPlanTest, ThreeStepsFollowTheReferenceTrajectory) {
  auto executor = makeExecutor(plan::F64);
  std::vector<double> w = w_.values, m(6, 0.0), v(6, 0.0);
  for (int t = 1; t <= 3; ++t) {
    std::vector<double> y(8, 0.0), g(6, 0.0);
    double loss = 0;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 2; ++j) {
        for (int k = 0; k < 3; ++k) y[i * 2 + j] += x_.values[i * 3 + k] * w[k * 2 + j];
        loss += y[i * 2 + j] * y[i * 2 + j] / 8;
      }
    for (int k = 0; k < 3; ++k)
      for (int j = 0; j < 2; ++j)
        for (int i = 0; i < 4; ++i) g[k * 2 + j] += x_.values[i * 3 + k] * y[i * 2 + j] / 4;
    for (int i = 0; i < 6; ++i) {
      w[i] -= 0.01 * 0.1 * w[i];
      m[i] = 0.9 * m[i] + 0.1 * g[i];
      v[i] = 0.999 * v[i] + 0.001 * g[i] * g[i];
      w[i] -= 0.01 * (m[i] / (1 - std::pow(0.9, t))) / (std::sqrt(v[i] / (1 - std::pow(0.999, t))) + 1e-8);
    }
    EXPECT_NEAR(executor->runStep(), loss, 1e-12) << "step " << t;
  }
  expectAllNear(executor->readTensor("W"), w, 1e-12);
  expectAllNear(executor->readTensor("adam_v:W"), v, 1e-12);
}

// Every DEVICE tensor whose last_use_step has passed reads as NaN.
TEST_F(LinearPlanTest, DeadTensorsArePoisoned) {
  auto executor = makeExecutor(plan::F32);
  executor->runStep();
  for (const char* dead : {"sq", "dev:W", "y", "dy", "dW", "loss"}) {
    for (double value : executor->readTensor(dead)) EXPECT_TRUE(std::isnan(value)) << dead;
  }
  // Host tensors persist.
  for (double value : executor->readTensor("W")) EXPECT_FALSE(std::isnan(value));
  for (double value : executor->readTensor("grad:W")) EXPECT_FALSE(std::isnan(value));
}

TEST_F(LinearPlanTest, F32RunsAreBitwiseReproducible) {
  auto first = makeExecutor(plan::F32);
  auto second = makeExecutor(plan::F32);
  for (int step = 0; step < 3; ++step) {
    const double a = first->runStep(), b = second->runStep();
    EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0);
  }
  EXPECT_EQ(first->readBytes("W"), second->readBytes("W"));
  EXPECT_EQ(first->readBytes("adam_v:W"), second->readBytes("adam_v:W"));
}

TEST_F(LinearPlanTest, MisuseIsReportedClearly) {
  Executor executor(linearPlan(plan::F32), std::make_unique<CpuBackend>());
  EXPECT_THROW(executor.runStep(), Error);
  executor.loadWeights(OnnxWeights(dir_ + "/linear.onnx"));
  try {
    executor.runStep();
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "input 'x' was not set");
  }
  try {
    executor.setInput("x", HostArray::zeros(ElementType::F32, {3, 4}));
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "input 'x': array shape [3, 4] differs from the plan's [4, 3]");
  }
  try {
    executor.setInput("x", HostArray::zeros(ElementType::I64, {4, 3}));
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "input 'x' is f32, it cannot take a int64 array");
  }
  EXPECT_THROW(executor.setInput("nope", HostArray::zeros(ElementType::F32, {4, 3})), Error);

  // A parameter whose initializer has another shape.
  writeModel(dir_ + "/wrong.onnx", {{"W", HostTensor{{2, 3}, plan::F32, std::vector<double>(6, 1.0)}}});
  try {
    executor.loadWeights(OnnxWeights(dir_ + "/wrong.onnx"));
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              dir_ + "/wrong.onnx: initializer 'W' has shape [2, 3], the plan expects [3, 2]");
  }
}

// A NaN or infinite weight is refused when it loads, naming the tensor and
// the flat index of the first bad element (training on it would hide or spread it).
TEST_F(LinearPlanTest, NonFiniteWeightsAreRefusedByNameAndIndex) {
  for (plan::DType dtype : {plan::F32, plan::F64}) {
    Executor executor(linearPlan(dtype), std::make_unique<CpuBackend>());
    HostTensor w = w_;
    w.dtype = dtype;
    w.values[4] = std::nan("");
    w.values[5] = INFINITY;
    writeModel(dir_ + "/nan.onnx", {{"W", w}});
    try {
      executor.loadWeights(OnnxWeights(dir_ + "/nan.onnx"));
      ADD_FAILURE() << "expected an Error";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), dir_ + "/nan.onnx: weight 'W' is nan at flat index 4 (of 6 elements)");
    }
    w.values[4] = 0.5;
    w.values[2] = -INFINITY;
    writeModel(dir_ + "/inf.onnx", {{"W", w}});
    try {
      executor.loadWeights(OnnxWeights(dir_ + "/inf.onnx"));
      ADD_FAILURE() << "expected an Error";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), dir_ + "/inf.onnx: weight 'W' is -inf at flat index 2 (of 6 elements)");
    }
  }
}

TEST_F(LinearPlanTest, KernelShapeErrorsNameTheStepAtLoad) {
  // sq keeps its byte size but gets the wrong shape: only mul's shape rule can
  // tell, and the validator runs it before anything is allocated.
  plan::Plan plan = linearPlan(plan::F64);
  for (plan::Tensor& t : *plan.mutable_tensors())
    if (t.name() == "sq") {
      t.set_shape(0, 2);
      t.set_shape(1, 4);
    }
  try {
    Executor executor(std::move(plan), std::make_unique<CpuBackend>());
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "plan: step 4 (kernel mul): mul: output 'sq' has shape [2, 4], expected [4, 2]");
  }
}

// The whole tied-embedding plan's gradient against finite differences of its
// loss, with lr = 0 so that steps leave E unchanged.
TEST(TokenPlan, GradientOfTheWholePlanMatchesFiniteDifferences) {
  const std::string dir = makeTempDir();
  std::mt19937 rng(72);
  const HostTensor e = randomTensor({5, 3}, plan::F64, rng);
  writeModel(dir + "/tokens.onnx", {{"E", e}});
  plan::Plan plan = tokenPlan(plan::F64);
  plan.mutable_header()->mutable_optimizer()->set_lr(0);
  Executor executor(std::move(plan), std::make_unique<CpuBackend>());
  executor.loadWeights(OnnxWeights(dir + "/tokens.onnx"));
  HostArray tokens = HostArray::zeros(ElementType::I32, {2, 4});  // i32 feeds an i64 input
  const int32_t values[8] = {1, 4, 0, 2, 3, 3, 1, 4};
  for (int i = 0; i < 8; ++i) tokens.data<int32_t>()[i] = values[i];
  executor.setInput("tokens", tokens);

  executor.runStep();
  const std::vector<double> grad = executor.readTensor("grad:E");
  const double h = 1e-6;
  for (size_t i = 0; i < e.values.size(); ++i) {
    std::vector<double> probe = e.values;
    probe[i] += h;
    executor.writeTensor("E", probe);
    const double up = executor.runStep();
    probe[i] -= 2 * h;
    executor.writeTensor("E", probe);
    const double down = executor.runStep();
    EXPECT_NEAR(grad[i], (up - down) / (2 * h), 1e-7) << "element " << i;
  }
}

}  // namespace
}  // namespace megatrain::runtime::testing
