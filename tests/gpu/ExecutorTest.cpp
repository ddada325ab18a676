// ExecutorTest.cpp - whole training plans on the CPU and CUDA backends side by side: losses, parameters, poisoning.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>

#include <gtest/gtest.h>

#include "CudaBackend.h"
#include "CudaHarness.h"
#include "TinyPlans.h"
#include "megatrain/plan/DType.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/OnnxWeights.h"

namespace megatrain::runtime::testing {
namespace {

// A classifier that reaches most kernels in a training loop:
//   h = x W1 + b1; n = layer_norm(h); a = tanh(n); z = a W2 + b2;
//   loss = softmax_ce(z, labels) with ignore_index -1,
// its backward written out from docs/ops.md kernels, and AdamW on all six
// parameters. x [32, 16], labels [32], 10 classes, hidden 64.
plan::Plan classifierPlan(plan::DType dt) {
  PlanBuilder b;
  b.plan().mutable_header()->set_source_model("classifier.onnx");
  struct Param {
    uint32_t host, grad, m, v, dev;
  };
  std::map<std::string, Param> p;
  const std::pair<const char*, std::vector<int64_t>> shapes[] = {
      {"W1", {16, 64}}, {"b1", {64}}, {"g", {64}}, {"beta", {64}}, {"W2", {64, 10}}, {"b2", {10}}};
  for (const auto& [name, shape] : shapes) {
    const std::string n = name;
    p[n] = {b.tensor(n, shape, dt, plan::PARAMETER), b.tensor("grad:" + n, shape, dt, plan::GRADIENT),
            b.tensor("adam_m:" + n, shape, dt, plan::OPTIMIZER_STATE), b.tensor("adam_v:" + n, shape, dt, plan::OPTIMIZER_STATE),
            b.tensor("dev:" + n, shape, dt, plan::PARAMETER_COPY)};
  }
  const uint32_t readout = b.tensor("loss_readout", {}, dt, plan::LOSS_READOUT);
  const uint32_t x = b.tensor("x", {32, 16}, dt, plan::INPUT);
  const uint32_t labels = b.tensor("labels", {32}, plan::I64, plan::INPUT);
  auto act = [&](const char* name, std::vector<int64_t> shape) { return b.tensor(name, shape, dt, plan::ACTIVATION); };
  const uint32_t h = act("h", {32, 64}), hb = act("hb", {32, 64}), n = act("n", {32, 64}), a = act("a", {32, 64});
  const uint32_t z = act("z", {32, 10}), zb = act("zb", {32, 10});
  const uint32_t loss = b.tensor("loss", {}, dt, plan::LOSS);
  const uint32_t dloss = act("dloss", {}), dzb = act("dzb", {32, 10}), db2 = act("db2", {10}), dW2 = act("dW2", {64, 10});
  const uint32_t da = act("da", {32, 64}), dn = act("dn", {32, 64}), dhb = act("dhb", {32, 64});
  const uint32_t dg = act("dg", {64}), dbeta = act("dbeta", {64}), db1 = act("db1", {64}), dW1 = act("dW1", {16, 64});

  const std::vector<plan::Attribute> ln{intAttr("axis", 1), floatAttr("epsilon", 1e-5)};
  const std::vector<plan::Attribute> ce{intAttr("ignore_index", -1), stringAttr("reduction", "mean")};
  for (const auto& [name, param] : p) b.copy(param.host, param.dev, "h2d");
  b.record("params_ready", "h2d");
  b.wait("params_ready", "compute");
  b.kernel("matmul", {x, p["W1"].dev}, {h});
  b.kernel("add", {h, p["b1"].dev}, {hb});
  b.kernel("layer_norm", {hb, p["g"].dev, p["beta"].dev}, {n}, ln);
  b.kernel("tanh", {n}, {a});
  b.kernel("matmul", {a, p["W2"].dev}, {z});
  b.kernel("add", {z, p["b2"].dev}, {zb});
  b.kernel("softmax_ce", {zb, labels}, {loss}, ce);
  b.readLossThroughD2h(loss, readout);
  b.kernel("fill", {}, {dloss}, {floatAttr("value", 1.0)});
  b.kernel("softmax_ce_grad", {zb, labels, dloss}, {dzb}, ce);
  b.kernel("sum_to", {dzb}, {db2});
  b.kernel("matmul", {a, dzb}, {dW2}, {intAttr("transpose_a", 1)});
  b.kernel("matmul", {dzb, p["W2"].dev}, {da}, {intAttr("transpose_b", 1)});
  b.kernel("tanh_grad", {a, da}, {dn});
  b.kernel("layer_norm_grad", {hb, p["g"].dev, dn}, {dhb, dg, dbeta}, ln);
  b.kernel("sum_to", {dhb}, {db1});
  b.kernel("matmul", {x, dhb}, {dW1}, {intAttr("transpose_a", 1)});
  const std::pair<const char*, uint32_t> grads[] = {{"W1", dW1}, {"b1", db1}, {"g", dg}, {"beta", dbeta}, {"W2", dW2}, {"b2", db2}};
  b.record("grads_ready", "compute");
  b.wait("grads_ready", "d2h");
  for (const auto& [name, grad] : grads) b.copy(grad, p[name].grad, "d2h");
  b.record("grads_copied", "d2h");
  b.wait("grads_copied", "host");
  for (const auto& [name, param] : p) b.adamw(param.host, param.grad, param.m, param.v);
  return b.build();
}

HostArray toArray(const HostTensor& t) {
  const ElementType type = t.dtype == plan::F32 ? ElementType::F32 : t.dtype == plan::F64 ? ElementType::F64 : ElementType::I64;
  HostArray array = HostArray::zeros(type, t.shape);
  for (size_t i = 0; i < t.values.size(); ++i) {
    if (type == ElementType::F32) array.data<float>()[i] = static_cast<float>(t.values[i]);
    else if (type == ElementType::F64) array.data<double>()[i] = t.values[i];
    else array.data<int64_t>()[i] = static_cast<int64_t>(t.values[i]);
  }
  return array;
}

struct Model {
  plan::Plan (*plan)(plan::DType);
  std::map<std::string, HostTensor> (*weights)(plan::DType, std::mt19937&);
  std::map<std::string, HostTensor> (*inputs)(plan::DType, std::mt19937&);
  std::vector<std::string> parameters;
};

const Model kLinear{
    [](plan::DType dt) { return linearPlan(dt); },  // linearPlan's keepOutput stays false
    [](plan::DType dt, std::mt19937& rng) { return std::map<std::string, HostTensor>{{"W", randomTensor({3, 2}, dt, rng)}}; },
    [](plan::DType dt, std::mt19937& rng) { return std::map<std::string, HostTensor>{{"x", randomTensor({4, 3}, dt, rng)}}; },
    {"W"}};

const Model kTokens{
    tokenPlan, [](plan::DType dt, std::mt19937& rng) { return std::map<std::string, HostTensor>{{"E", randomTensor({5, 3}, dt, rng)}}; },
    [](plan::DType, std::mt19937& rng) {
      std::uniform_int_distribution<int64_t> token(0, 4);
      HostTensor tokens{{2, 4}, plan::I64, {}};
      for (int i = 0; i < 8; ++i) tokens.values.push_back(static_cast<double>(token(rng)));
      return std::map<std::string, HostTensor>{{"tokens", tokens}};
    },
    {"E"}};

const Model kClassifier{
    classifierPlan,
    [](plan::DType dt, std::mt19937& rng) {
      return std::map<std::string, HostTensor>{{"W1", randomTensor({16, 64}, dt, rng, -0.3, 0.3)},
                                               {"b1", randomTensor({64}, dt, rng, -0.1, 0.1)},
                                               {"g", randomTensor({64}, dt, rng, 0.8, 1.2)},
                                               {"beta", randomTensor({64}, dt, rng, -0.1, 0.1)},
                                               {"W2", randomTensor({64, 10}, dt, rng, -0.3, 0.3)},
                                               {"b2", randomTensor({10}, dt, rng, -0.1, 0.1)}};
    },
    [](plan::DType dt, std::mt19937& rng) {
      std::uniform_int_distribution<int64_t> label(-1, 9);  // -1: ignored
      HostTensor labels{{32}, plan::I64, {}};
      for (int i = 0; i < 32; ++i) labels.values.push_back(static_cast<double>(label(rng)));
      return std::map<std::string, HostTensor>{{"x", randomTensor({32, 16}, dt, rng)}, {"labels", labels}};
    },
    {"W1", "b1", "g", "beta", "W2", "b2"}};

CudaOptions poisoning() {
  CudaOptions options;
  options.poison = true;
  return options;
}

class CudaExecutor : public ::testing::Test {
 protected:
  CudaExecutor() : seed_(testSeed()), dir_(makeTempDir()) {}

  std::unique_ptr<Executor> executor(const Model& model, plan::DType dt, std::unique_ptr<Backend> backend) {
    std::mt19937 rng(seed_);  // the same weights and inputs for every executor of a test
    const auto weights = model.weights(dt, rng);
    writeModel(dir_ + "/model.onnx", weights);
    auto result = std::make_unique<Executor>(model.plan(dt), std::move(backend));
    result->loadWeights(OnnxWeights(dir_ + "/model.onnx"));
    for (const auto& [name, value] : model.inputs(dt, rng)) result->setInput(name, toArray(value));
    return result;
  }

  // A host AdamW of `params` f32 parameters beside `matmuls` [2048, 2048] products on the
  // compute stream, the update first on the host queue (nothing before it) or, `afterLoss`,
  // after the loss's READ_LOSS (carried into the next step, which never touches W); its
  // weights, input and gradient loaded and one warm-up step run (cuBLAS, the host threads).
  std::unique_ptr<Executor> adamwBesideMatmuls(int64_t params, int matmuls, bool afterLoss,
                                               std::unique_ptr<Backend> backend) {
    constexpr int64_t n = 2048;
    PlanBuilder b;
    const uint32_t w = b.tensor("W", {params}, plan::F32, plan::PARAMETER);
    const uint32_t g = b.tensor("grad:W", {params}, plan::F32, plan::GRADIENT);
    const uint32_t m = b.tensor("adam_m:W", {params}, plan::F32, plan::OPTIMIZER_STATE);
    const uint32_t v = b.tensor("adam_v:W", {params}, plan::F32, plan::OPTIMIZER_STATE);
    const uint32_t x = b.tensor("x", {n, n}, plan::F32, plan::INPUT);
    const uint32_t readout = b.tensor("loss_readout", {}, plan::F32, plan::LOSS_READOUT);
    if (!afterLoss) b.adamw(w, g, m, v);
    uint32_t y = x;
    for (int i = 0; i < matmuls; ++i) {
      const uint32_t next = b.tensor("y" + std::to_string(i), {n, n}, plan::F32, plan::ACTIVATION);
      b.kernel("matmul", {y, x}, {next});
      y = next;
    }
    const uint32_t loss = b.tensor("loss", {}, plan::F32, plan::LOSS);
    b.kernel("reduce_mean", {y}, {loss}, {intsAttr("axes", {0, 1}), intAttr("keepdims", 0)});
    b.readLossThroughD2h(loss, readout);
    if (afterLoss) b.adamw(w, g, m, v);
    auto cuda = std::make_unique<Executor>(b.build(), std::move(backend));
    std::mt19937 rng(seed_);
    writeModel(dir_ + "/big.onnx", {{"W", randomTensor({params}, plan::F32, rng)}});
    cuda->loadWeights(OnnxWeights(dir_ + "/big.onnx"));
    cuda->setInput("x", toArray(randomTensor({n, n}, plan::F32, rng, -0.02, 0.02)));
    std::vector<float> grad(static_cast<size_t>(params));
    for (float& value : grad) value = std::uniform_real_distribution<float>(-1, 1)(rng);
    cuda->writeBytes("grad:W", grad.data(), grad.size() * sizeof(float));
    cuda->runStep();
    return cuda;
  }

  // Ten steps on each backend: every loss within tol relative, then every parameter.
  void compare(const Model& model, plan::DType dt, double tol) {
    SCOPED_TRACE(std::string(dtypeName(dt)) + ", MEGATRAIN_TEST_SEED=" + std::to_string(seed_));
    auto cpu = executor(model, dt, std::make_unique<CpuBackend>());
    auto cuda = executor(model, dt, makeCudaBackend(0, poisoning()));
    for (int step = 1; step <= 10; ++step) {
      const double expected = cpu->runStep(), actual = cuda->runStep();
      ASSERT_TRUE(std::isfinite(actual)) << "step " << step;
      EXPECT_NEAR(actual, expected, tol * std::abs(expected)) << "step " << step;
    }
    for (const std::string& name : model.parameters) {
      const std::vector<double> expected = cpu->readTensor(name), actual = cuda->readTensor(name);
      for (size_t i = 0; i < expected.size(); ++i)
        ASSERT_NEAR(actual[i], expected[i], 10 * tol * (1 + std::abs(expected[i]))) << name << "[" << i << "]";
    }
  }

  uint32_t seed_;
  std::string dir_;
};

TEST_F(CudaExecutor, LinearPlanMatchesTheCpuForTenSteps) {
  compare(kLinear, plan::F32, 1e-5);
  compare(kLinear, plan::F64, 1e-11);
}

TEST_F(CudaExecutor, TokenPlanMatchesTheCpuForTenSteps) {
  compare(kTokens, plan::F32, 1e-5);
  compare(kTokens, plan::F64, 1e-11);
}

TEST_F(CudaExecutor, ClassifierPlanMatchesTheCpuForTenSteps) {
  compare(kClassifier, plan::F32, 1e-5);
  compare(kClassifier, plan::F64, 1e-11);
}

// Same inputs, same device: the same bits, step after step.
TEST_F(CudaExecutor, RunsAreBitwiseReproducible) {
  auto first = executor(kClassifier, plan::F32, makeCudaBackend());
  auto second = executor(kClassifier, plan::F32, makeCudaBackend());
  for (int step = 0; step < 5; ++step) {
    const double a = first->runStep(), b = second->runStep();
    EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0) << "step " << step;
  }
  EXPECT_EQ(first->readBytes("W1"), second->readBytes("W1"));
}

// Step graphs (docs/runtime.md): the second step is recorded and every later one replays
// it; a replay runs the recorded launches, with each step's lr and AdamW step count in the
// host tasks' slots, so losses, weights and moments are bitwise those of the steps issued
// call by call, under an lr that changes every step.
TEST_F(CudaExecutor, StepGraphReplaysTheIssuedBits) {
  for (const Model* model : {&kLinear, &kTokens, &kClassifier}) {
    for (plan::DType dt : {plan::F32, plan::F64}) {
      SCOPED_TRACE(std::string(dtypeName(dt)) + ", MEGATRAIN_TEST_SEED=" + std::to_string(seed_));
      CudaOptions issuedOptions, replayedOptions;
      issuedOptions.stepGraphs = CudaOptions::StepGraphs::Off;
      replayedOptions.stepGraphs = CudaOptions::StepGraphs::On;
      auto replayed = executor(*model, dt, makeCudaBackend(0, replayedOptions));
      auto issued = executor(*model, dt, makeCudaBackend(0, issuedOptions));
      EXPECT_FALSE(issued->backend().canRecordSteps());
      for (int step = 1; step <= 8; ++step) {
        StepOptions options;
        options.lr = 1e-3 * (1 + step % 3) / step;
        const double a = replayed->runStep(options).loss, b = issued->runStep(options).loss;
        ASSERT_TRUE(std::isfinite(a)) << "step " << step;
        ASSERT_EQ(std::memcmp(&a, &b, sizeof a), 0) << "step " << step << ": " << a << " vs " << b;
        EXPECT_EQ(replayed->backend().hasRecordedStep(), step >= 2) << "step " << step;
        EXPECT_EQ(replayed->backend().stepRecordingFailure(), "");
      }
      for (const std::string& name : model->parameters)
        for (const std::string& tensor : {name, "adam_m:" + name, "adam_v:" + name})
          EXPECT_EQ(replayed->readBytes(tensor), issued->readBytes(tensor)) << tensor;
    }
  }
}

// Host tasks across steps (docs/runtime.md): a step issued call by call ends once the loss
// is read, its host AdamW updates after the loss running beside the next step, which waits
// for them where it touches their bytes; losses, weights and moments are bitwise those of
// steps that wait for every update, under an lr that changes every step.
TEST_F(CudaExecutor, HostTasksAcrossStepsKeepTheBits) {
  for (const Model* model : {&kLinear, &kTokens, &kClassifier}) {
    for (plan::DType dt : {plan::F32, plan::F64}) {
      SCOPED_TRACE(std::string(dtypeName(dt)) + ", MEGATRAIN_TEST_SEED=" + std::to_string(seed_));
      CudaOptions overlapping, waiting;
      overlapping.stepGraphs = waiting.stepGraphs = CudaOptions::StepGraphs::Off;
      waiting.overlapHostTasks = false;
      auto overlapped = executor(*model, dt, makeCudaBackend(0, overlapping));
      auto waited = executor(*model, dt, makeCudaBackend(0, waiting));
      EXPECT_TRUE(overlapped->backend().overlapsHostTasks());
      EXPECT_FALSE(waited->backend().overlapsHostTasks());
      for (int step = 1; step <= 8; ++step) {
        StepOptions options;
        options.lr = 1e-3 * (1 + step % 3) / step;
        const double a = overlapped->runStep(options).loss, b = waited->runStep(options).loss;
        ASSERT_TRUE(std::isfinite(a)) << "step " << step;
        ASSERT_EQ(std::memcmp(&a, &b, sizeof a), 0) << "step " << step << ": " << a << " vs " << b;
      }
      for (const std::string& name : model->parameters)
        for (const std::string& tensor : {name, "adam_m:" + name, "adam_v:" + name})
          EXPECT_EQ(overlapped->readBytes(tensor), waited->readBytes(tensor)) << tensor;
    }
  }
}

// CudaOptions::StepGraphs::Auto records a plan only while its predicted device time per
// plan step is under kIssueBoundStepSeconds (or it has no prediction): the 1.36B's steps
// (2,426 plan steps in 0.33 s) are issued, the demo's (a few us each) recorded.
TEST(CudaStepGraphs, AutoRecordsPlansWhoseStepsAreShort) {
  auto planOf = [](int steps, double predicted) {
    plan::Plan plan;
    for (int i = 0; i < steps; ++i) plan.add_steps()->set_index(static_cast<uint32_t>(i));
    plan.mutable_header()->set_predicted_step_s(predicted);
    return plan;
  };
  EXPECT_FALSE(stepIssueKeepsUp(planOf(1000, 0)));  // no prediction: recorded
  EXPECT_FALSE(stepIssueKeepsUp(planOf(0, 1.0)));
  EXPECT_FALSE(stepIssueKeepsUp(planOf(1000, 1000 * kIssueBoundStepSeconds * 0.99)));
  EXPECT_TRUE(stepIssueKeepsUp(planOf(1000, 1000 * kIssueBoundStepSeconds)));
  EXPECT_TRUE(stepIssueKeepsUp(planOf(2426, 0.330)));
  EXPECT_FALSE(stepIssueKeepsUp(planOf(300, 0.0005)));
}

// A traced step between replays is issued (the trace times each call) and the recording
// stays: the next step replays it again.
TEST_F(CudaExecutor, TracedStepsAreIssuedBetweenReplays) {
  auto cuda = executor(kClassifier, plan::F32, makeCudaBackend(0, CudaOptions{}));
  cuda->runStep();
  cuda->runStep();
  ASSERT_TRUE(cuda->backend().hasRecordedStep());
  StepOptions traced;
  traced.trace = true;
  const StepResult result = cuda->runStep(traced);
  ASSERT_EQ(result.trace.size(), static_cast<size_t>(cuda->plan().steps_size()));
  EXPECT_TRUE(cuda->backend().hasRecordedStep());
  EXPECT_TRUE(std::isfinite(cuda->runStep()));
}

// A traced window of two steps (StepOptions::traceSteps): the host AdamW after the loss
// runs on beside the next step, whose matmuls do not wait for it, and the window's one clock
// shows it: the first step's update ends after the second step's first kernel starts. Each
// step's spans sit in its own part of the window's, the second step's update timed too.
// The next step first writes its 16 MiB input with one thread beside the update's threads
// (writeBesideHostTasks), a sixteenth of the host's bandwidth against the update's 28 bytes
// a parameter: 64M parameters keep the update several times longer than that write.
TEST_F(CudaExecutor, ATracedWindowShowsTheHostUpdateRunningIntoTheNextStep) {
  CudaOptions options;
  options.stepGraphs = CudaOptions::StepGraphs::Off;
  const auto owned = adamwBesideMatmuls(int64_t{1} << 26, 8, true, makeCudaBackend(0, options));
  Executor& cuda = *owned;
  ASSERT_TRUE(cuda.backend().overlapsHostTasks());
  StepOptions first;
  first.trace = true;
  first.traceSteps = 2;
  EXPECT_TRUE(cuda.runStep(first).trace.empty());
  StepOptions second = first;
  second.traceIndex = 1;
  const StepResult result = cuda.runStep(second);
  const plan::Plan& plan = cuda.plan();
  const size_t steps = static_cast<size_t>(plan.steps_size());
  ASSERT_EQ(result.trace.size(), 2 * steps);
  StepSpan adamw[2] = {{NAN, NAN}, {NAN, NAN}};
  double firstKernel[2] = {1e30, 1e30};
  for (size_t k = 0; k < 2; ++k)
    for (size_t s = 0; s < steps; ++s) {
      const plan::Step& step = plan.steps(static_cast<int>(s));
      const StepSpan& span = result.trace[k * steps + s];
      if (step.has_host_task() && step.host_task().kind() == plan::HostTask::ADAMW) adamw[k] = span;
      if (step.has_kernel()) firstKernel[k] = std::min(firstKernel[k], span.start);
    }
  for (size_t k = 0; k < 2; ++k) {
    ASSERT_TRUE(std::isfinite(adamw[k].start) && adamw[k].end > adamw[k].start) << "step " << k;
    ASSERT_LT(firstKernel[k], 1e30) << "step " << k;
  }
  EXPECT_GT(firstKernel[1], firstKernel[0]);
  EXPECT_GT(adamw[0].end, firstKernel[1]) << "the first step's update [" << adamw[0].start << ", " << adamw[0].end
                                          << "] s, the second step's first kernel at " << firstKernel[1] << " s";
  EXPECT_GT(adamw[1].start, adamw[0].end - 1e-4);  // one host stream: in order
}

// Every DEVICE tensor whose last_use_step has passed reads as NaN, host tensors persist.
TEST_F(CudaExecutor, DeadTensorsArePoisoned) {
  auto cuda = executor(kClassifier, plan::F32, makeCudaBackend(0, poisoning()));
  cuda->runStep();
  for (const char* dead : {"h", "a", "zb", "dzb", "dW1", "loss", "dev:W1"})
    for (double value : cuda->readTensor(dead)) ASSERT_TRUE(std::isnan(value)) << dead;
  for (const char* live : {"W1", "grad:W1", "adam_v:W2"})
    for (double value : cuda->readTensor(live)) ASSERT_FALSE(std::isnan(value)) << live;
}


// ---- Streams, the host queue, opt-in poisoning, step traces, the memory report ----

// A cuda backend on real streams, or with MEGATRAIN_CUDA_SYNC=1 (every plan stream on
// one CUDA stream, synchronized after every step): the plan's order, serialized.
std::unique_ptr<Backend> cudaBackend(bool serialized, bool poison) {
  if (serialized) ::setenv("MEGATRAIN_CUDA_SYNC", "1", 1);
  CudaOptions options;
  options.poison = poison;
  std::unique_ptr<Backend> backend = makeCudaBackend(0, options);
  ::unsetenv("MEGATRAIN_CUDA_SYNC");
  return backend;
}

// The plan's events order every conflicting access (the verifier proves it on load), so
// running the streams concurrently changes no bit: losses and parameters equal the
// serialized run's, with poisoning on (a missing order would read NaN).
TEST_F(CudaExecutor, StreamsGiveTheSerializedBits) {
  for (const Model* model : {&kLinear, &kTokens, &kClassifier}) {
    for (plan::DType dt : {plan::F32, plan::F64}) {
      SCOPED_TRACE(std::string(dtypeName(dt)) + ", MEGATRAIN_TEST_SEED=" + std::to_string(seed_));
      auto streams = executor(*model, dt, cudaBackend(false, true));
      auto serial = executor(*model, dt, cudaBackend(true, false));
      for (int step = 1; step <= 10; ++step) {
        const double a = streams->runStep(), b = serial->runStep();
        ASSERT_TRUE(std::isfinite(a)) << "step " << step;
        ASSERT_EQ(std::memcmp(&a, &b, sizeof a), 0) << "step " << step << ": " << a << " vs " << b;
      }
      for (const std::string& name : model->parameters)
        for (const std::string& tensor : {name, "adam_m:" + name, "adam_v:" + name})
          EXPECT_EQ(streams->readBytes(tensor), serial->readBytes(tensor)) << tensor;
    }
  }
}

TEST_F(CudaExecutor, PoisoningIsOptIn) {
  auto cuda = executor(kClassifier, plan::F32, cudaBackend(false, false));
  EXPECT_FALSE(cuda->backend().poisonsDeadTensors());
  cuda->runStep();
  // Dead, but not overwritten: the values of the step's forward.
  for (const char* dead : {"h", "a", "zb"})
    for (double value : cuda->readTensor(dead)) ASSERT_TRUE(std::isfinite(value)) << dead;
}

// A traced step: a span for every kernel, copy and host task, none for records and
// waits; the spans of one stream follow each other in plan order.
TEST_F(CudaExecutor, TraceTimesEveryKernelCopyAndHostTask) {
  auto cuda = executor(kClassifier, plan::F32, cudaBackend(false, true));
  cuda->runStep();
  StepOptions options;
  options.trace = true;
  const StepResult result = cuda->runStep(options);
  ASSERT_TRUE(std::isfinite(result.loss));
  const plan::Plan& plan = cuda->plan();
  ASSERT_EQ(result.trace.size(), static_cast<size_t>(plan.steps_size()));
  std::map<std::string, double> streamEnd;
  for (int s = 0; s < plan.steps_size(); ++s) {
    const plan::Step& step = plan.steps(s);
    const StepSpan& span = result.trace[static_cast<size_t>(s)];
    if (step.has_record() || step.has_wait()) {
      EXPECT_TRUE(std::isnan(span.start) && std::isnan(span.end)) << "step " << s;
      continue;
    }
    ASSERT_TRUE(std::isfinite(span.start) && std::isfinite(span.end)) << "step " << s;
    EXPECT_GE(span.start, -1e-4) << "step " << s;  // the host clock is aligned to a few microseconds
    EXPECT_GE(span.end, span.start) << "step " << s;
    EXPECT_LT(span.end, 10.0) << "step " << s;
    EXPECT_GE(span.start + 1e-4, streamEnd[step.stream()]) << "step " << s << " on " << step.stream();
    streamEnd[step.stream()] = span.end;
  }
  // Without --trace: no spans.
  EXPECT_TRUE(cuda->runStep(StepOptions{}).trace.empty());
}

// The host queue runs AdamW while the compute stream multiplies: nothing orders them,
// so their measured spans overlap.
TEST_F(CudaExecutor, HostTasksOverlapCompute) {
  const auto owned = adamwBesideMatmuls(int64_t{1} << 23, 24, false, cudaBackend(false, false));
  Executor& cuda = *owned;
  StepOptions options;
  options.trace = true;
  const StepResult result = cuda.runStep(options);
  const plan::Plan& plan = cuda.plan();
  StepSpan adamw{}, compute{1e30, -1e30};
  for (int s = 0; s < plan.steps_size(); ++s) {
    const StepSpan& span = result.trace[static_cast<size_t>(s)];
    if (plan.steps(s).has_host_task() && plan.steps(s).host_task().kind() == plan::HostTask::ADAMW) adamw = span;
    if (plan.steps(s).has_kernel()) {
      compute.start = std::min(compute.start, span.start);
      compute.end = std::max(compute.end, span.end);
    }
  }
  ASSERT_GT(adamw.end, adamw.start);
  ASSERT_GT(compute.end, compute.start);
  const double overlap = std::min(adamw.end, compute.end) - std::max(adamw.start, compute.start);
  EXPECT_GT(overlap, 0) << "AdamW [" << adamw.start << ", " << adamw.end << "] s, kernels [" << compute.start
                        << ", " << compute.end << "] s";
}

// prepare() measures what it takes: the arena, scratch and workspace within the
// plan's budget plus the fixed workspace, and an arena over the budget is refused.
TEST_F(CudaExecutor, MemoryReportIsWithinBudgetAndWorkspace) {
  plan::Plan plan = classifierPlan(plan::F32);
  uint64_t arena = 0;
  for (const plan::Pool& pool : plan.pools())
    if (pool.tier() == plan::DEVICE) arena += pool.size_bytes();
  ASSERT_GT(arena, 0u);
  plan.mutable_header()->set_device_budget_bytes(arena);
  Executor cuda(plan, cudaBackend(false, false));
  const std::optional<DeviceMemoryReport> report = cuda.backend().memoryReport();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->arenaBytes, arena);
  EXPECT_EQ(report->budgetBytes, arena);
  EXPECT_EQ(report->fixedWorkspaceBytes, kCudaFixedWorkspaceBytes);
  EXPECT_GT(report->workspaceBytes, 0u);
  EXPECT_GT(report->totalBytes, report->afterPrepare);
  EXPECT_GT(report->contextBytes, 0u);
  EXPECT_LE(report->arenaBytes + report->scratchBytes + report->workspaceBytes,
            report->budgetBytes + report->fixedWorkspaceBytes);
  // What prepare() took from the device: the arena and scratch, rounded up by the allocator.
  EXPECT_GE(report->afterPrepare, report->beforePrepare + report->arenaBytes);
  EXPECT_LE(report->afterPrepare - report->contextBytes,
            report->budgetBytes + report->fixedWorkspaceBytes + (uint64_t{16} << 20));

  // Refused on load (the verifier) or by prepare(), naming the budget.
  plan.mutable_header()->set_device_budget_bytes(arena - 1);
  try {
    Executor over(plan, cudaBackend(false, false));
    FAIL() << "an arena over the budget was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("budget"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace megatrain::runtime::testing
