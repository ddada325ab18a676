// ToolsTest.cpp - megatrain-run and megatrain-inspect as a user runs them: output lines, metrics, errors.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include "TestUtil.h"
#include "TinyPlans.h"
#include "megatrain/runtime/HostArray.h"
#include "megatrain/runtime/Npy.h"

namespace megatrain::runtime::testing {
namespace {

struct Result {
  int status;
  std::string output;  // stdout and stderr together
};

Result runCommand(const std::string& command) {
  Result result{-1, ""};
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

class ToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = makeTempDir();
    std::mt19937 rng(81);
    writePlan(dir_ + "/linear.plan", linearPlan(plan::F32));
    writeModel(dir_ + "/linear.onnx", {{"W", randomTensor({3, 2}, plan::F32, rng)}});
    HostArray x = HostArray::zeros(ElementType::F32, {4, 3});
    for (int i = 0; i < 12; ++i) x.data<float>()[i] = static_cast<float>(i % 5) - 2.0f;
    writeNpy(dir_ + "/x.npy", x);
  }

  std::string run(const std::string& args) const { return std::string(MEGATRAIN_RUN) + " " + args; }
  std::string dir_;
};

TEST_F(ToolsTest, RunTrainsAndReportsEachStep) {
  const Result r = runCommand(run(dir_ + "/linear.plan --weights " + dir_ + "/linear.onnx --input x=" + dir_ +
                                  "/x.npy --steps 3 --metrics " + dir_ + "/m.jsonl"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("params    1 tensors, 6 elements; trainable 1 tensors, 6 elements"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("pools     device 704 B (DEVICE), host 320 B (HOST_PINNED)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("step 1/3  loss "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("step 3/3  loss "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("done      3 steps, loss "), std::string::npos) << r.output;

  std::ifstream metrics(dir_ + "/m.jsonl");
  std::string line;
  int lines = 0;
  while (std::getline(metrics, line)) {
    ++lines;
    EXPECT_EQ(line.rfind("{\"step\": " + std::to_string(lines) + ", \"loss\": ", 0), 0u) << line;
    EXPECT_NE(line.find("\"tokens_per_s\": "), std::string::npos);
    EXPECT_NE(line.find("\"step_time_s\": "), std::string::npos);
  }
  EXPECT_EQ(lines, 3);
}

TEST_F(ToolsTest, RunStreamsTokenData) {
  std::mt19937 rng(82);
  writePlan(dir_ + "/tokens.plan", tokenPlan(plan::F32));
  writeModel(dir_ + "/tokens.onnx", {{"E", randomTensor({5, 3}, plan::F32, rng)}});
  std::ofstream tokens(dir_ + "/tokens.bin", std::ios::binary);
  for (uint16_t t : {1, 4, 0, 2, 3, 3, 1, 4, 2, 0, 1}) tokens.write(reinterpret_cast<const char*>(&t), 2);
  tokens.close();
  const Result r = runCommand(run(dir_ + "/tokens.plan --weights " + dir_ + "/tokens.onnx --data " + dir_ +
                                  "/tokens.bin --steps 4"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("tokens    8 per step"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("step 4/4  loss "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tokens/s "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" tokens/s, mean step "), std::string::npos) << r.output;
}

TEST_F(ToolsTest, RunErrorsAreOneLine) {
  const std::string base = dir_ + "/linear.plan --weights " + dir_ + "/linear.onnx --input x=" + dir_ + "/x.npy";
  Result r = runCommand(run(base + " --backend cuda --quiet"));
#ifdef MEGATRAIN_WITH_CUDA
  // Built with CUDA: it trains where a GPU is, and says why not where none is.
  if (r.status != 0) {
    EXPECT_EQ(r.output.rfind("megatrain-run: error: ", 0), 0u) << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << r.output;
  }
#else
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "megatrain-run: error: the CUDA backend is not built into this binary\n");
#endif
  r = runCommand(run(dir_ + "/linear.plan --weights " + dir_ + "/linear.onnx"));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "megatrain-run: error: graph input 'x' is not fed (give --input x=FILE.npy)\n");
  r = runCommand(run(base + " --steps zero"));
  EXPECT_EQ(r.output, "megatrain-run: error: --steps needs a positive integer, got 'zero'\n");
  r = runCommand(run(dir_ + "/x.npy --weights " + dir_ + "/linear.onnx"));
  EXPECT_EQ(r.output, "megatrain-run: error: " + dir_ + "/x.npy: not a megatrain plan (protobuf parse failed)\n");
  r = runCommand(run("--help"));
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.output.rfind("usage: megatrain-run MODEL.plan --weights MODEL.onnx", 0), 0u);
}

TEST_F(ToolsTest, RunStopsOnANonFiniteLoss) {
  HostArray x = HostArray::zeros(ElementType::F32, {4, 3});
  x.data<float>()[0] = 1e30f;  // y^2 overflows f32
  writeNpy(dir_ + "/big.npy", x);
  const Result r = runCommand(run(dir_ + "/linear.plan --weights " + dir_ + "/linear.onnx --input x=" + dir_ +
                                  "/big.npy --quiet"));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "megatrain-run: error: loss is inf at step 1, stopping\n");
}

TEST_F(ToolsTest, InspectShowsHeaderSummaryAndSchedule) {
  const Result r = runCommand(std::string(MEGATRAIN_INSPECT) + " " + dir_ + "/linear.plan --max-steps 5");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* expected :
       {"generator      megatrain tests", "optimizer      AdamW lr 0.01, betas (0.9, 0.999), eps 1e-08, weight_decay 0.1",
        "parameters     1 tensors, 6 elements", "steps          24 (9 kernels, 3 copies, 10 events, 2 host tasks)",
        "copy W -> dev:W", "wait w_ready     record at step 1 (h2d)", "x, dev:W -> y",
        "... 19 more steps"})
    EXPECT_NE(r.output.find(expected), std::string::npos) << expected << "\n" << r.output;
  // Device memory after step 3 (matmul): x, dev:W and y are live (48 + 24 + 32 bytes).
  EXPECT_NE(r.output.find("matmul"), std::string::npos);
  const size_t row = r.output.find("\n     3  compute");
  ASSERT_NE(row, std::string::npos) << r.output;
  const std::string line = r.output.substr(row + 1, r.output.find('\n', row + 1) - row - 1);
  EXPECT_EQ(line.substr(line.size() - 5), "104 B") << line;

  const Result full = runCommand(std::string(MEGATRAIN_INSPECT) + " " + dir_ + "/linear.plan");
  EXPECT_NE(full.output.find("adamw W"), std::string::npos);
  EXPECT_NE(full.output.find("read loss"), std::string::npos);
  EXPECT_NE(full.output.find("matmul ta=1"), std::string::npos);
  EXPECT_EQ(runCommand(std::string(MEGATRAIN_INSPECT)).output,
            "megatrain-inspect: error: missing MODEL.plan (see --help)\n");
}

}  // namespace
}  // namespace megatrain::runtime::testing
