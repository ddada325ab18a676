// ToolsTest.cpp - megatrain-run and megatrain-inspect as a user runs them: output lines, metrics, errors.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sys/wait.h>
#include <vector>

#include <gtest/gtest.h>

#include "TestUtil.h"
#include "TinyPlans.h"
#include "megatrain/plan/FormatVersion.h"
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

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The names in `dir`, sorted.
std::vector<std::string> filesIn(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
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

// No --backend: auto picks cuda only where the binary has it and a GPU is
// present, says which, and runs there (CI has no GPU: cpu).
TEST_F(ToolsTest, RunPicksItsBackendAndSaysWhich) {
  const Result r = runCommand(run(dir_ + "/linear.plan --weights " + dir_ + "/linear.onnx --input x=" + dir_ +
                                  "/x.npy --steps 1"));
  ASSERT_EQ(r.status, 0) << r.output;
  const bool cuda = r.output.find(", cuda backend (--backend auto: a GPU is present)\n") != std::string::npos;
  const bool cpu =
      r.output.find(", cpu backend (--backend auto: no usable GPU, or no CUDA backend in this binary)\n") !=
      std::string::npos;
  ASSERT_TRUE(cuda != cpu) << r.output;
  const Result wrong = runCommand(run(dir_ + "/linear.plan --weights " + dir_ + "/linear.onnx --backend gpu 2>&1"));
  EXPECT_EQ(wrong.status, 1);
  EXPECT_NE(wrong.output.find("megatrain-run: error: unknown backend 'gpu' (expected auto, cpu or cuda)"),
            std::string::npos)
      << wrong.output;
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
  // --trace's window: checked before the backend is asked whether it can time steps.
  r = runCommand(run(base + " --steps 2 --trace-steps 2"));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "megatrain-run: error: --trace-steps needs --trace FILE.json\n");
  // Where the run's steps are known (after a --resume's checkpoint is read): the window, then the backend.
  auto endsWith = [](const std::string& text, const std::string& end) {
    return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
  };
  r = runCommand(run(base + " --steps 2 --trace " + dir_ + "/t.json --trace-steps 3"));
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(endsWith(r.output, "\nmegatrain-run: error: --trace-steps 3 ending at step 2 would start before step "
                                 "1, the first this run trains\n")) << r.output;
  r = runCommand(run(base + " --steps 3 --trace " + dir_ + "/t.json --trace-steps 2 --backend cpu"));
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(endsWith(r.output, "\nmegatrain-run: error: --trace needs --backend cuda (the cpu backend cannot time "
                                 "a step)\n")) << r.output;
  r = runCommand(run(base + " --trace " + dir_ + "/t.json --trace-steps 65"));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "megatrain-run: error: --trace-steps: at most 64, got 65\n");
  r = runCommand(run(base + " --steps zero"));
  EXPECT_EQ(r.output, "megatrain-run: error: --steps needs a positive integer, got 'zero'\n");
  r = runCommand(run(dir_ + "/x.npy --weights " + dir_ + "/linear.onnx"));
  EXPECT_EQ(r.output, "megatrain-run: error: " + dir_ + "/x.npy: not a megatrain plan (protobuf parse failed)\n");
  r = runCommand(run(base + " --keep-checkpoints 0 --save " + dir_ + "/ck"));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "megatrain-run: error: --keep-checkpoints needs a positive integer, got '0'\n");
  r = runCommand(run(base + " --keep-checkpoints=two --save " + dir_ + "/ck"));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "megatrain-run: error: --keep-checkpoints needs a positive integer, got 'two'\n");
  r = runCommand(run(base + " --keep-checkpoints 2"));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "megatrain-run: error: --keep-checkpoints needs --save DIR\n");
  r = runCommand(run("--help"));
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.output.rfind("usage: megatrain-run MODEL.plan --weights PATH", 0), 0u);
  EXPECT_NE(r.output.find("  --keep-checkpoints N "), std::string::npos);
}

// --keep-checkpoints 2 with a save after every step: only the two newest stay, each
// removal is printed, `latest` names the newest, and a resumed run prunes the checkpoints
// the first run left. Files that are not this plan's checkpoints are never removed.
TEST_F(ToolsTest, KeepCheckpointsLeavesOnlyTheNewest) {
  const std::string ck = dir_ + "/ck";
  std::filesystem::create_directories(ck);
  std::ofstream(ck + "/notes.txt") << "mine\n";
  std::ofstream(ck + "/step-100.ckpt") << "not a checkpoint\n";
  const std::string base = dir_ + "/linear.plan --input x=" + dir_ + "/x.npy --save-every 1 --keep-checkpoints 2 --save " + ck;
  Result r = runCommand(run(base + " --weights " + dir_ + "/linear.onnx --steps 5"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(filesIn(ck), (std::vector<std::string>{"latest", "notes.txt", "step-100.ckpt", "step-4.ckpt", "step-5.ckpt"}));
  EXPECT_EQ(readFile(ck + "/latest"), "step-5.ckpt\n");
  for (int step = 1; step <= 3; ++step)
    EXPECT_NE(r.output.find("removed   " + ck + "/step-" + std::to_string(step) + ".ckpt (--keep-checkpoints 2)\n"),
              std::string::npos)
        << r.output;
  EXPECT_EQ(r.output.find("removed   " + ck + "/step-4.ckpt"), std::string::npos) << r.output;

  // Resuming (past step-100.ckpt, which is no checkpoint) from step 5, on to step 7.
  r = runCommand(run(base + " --resume " + ck + " --steps 7"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resumed   " + ck + "/step-5.ckpt"), std::string::npos) << r.output;
  EXPECT_EQ(filesIn(ck), (std::vector<std::string>{"latest", "notes.txt", "step-100.ckpt", "step-6.ckpt", "step-7.ckpt"}));
  EXPECT_EQ(readFile(ck + "/latest"), "step-7.ckpt\n");
}

TEST_F(ToolsTest, RunStopsOnANonFiniteLoss) {
  HostArray x = HostArray::zeros(ElementType::F32, {4, 3});
  x.data<float>()[0] = 1e30f;  // y^2 overflows f32
  writeNpy(dir_ + "/big.npy", x);
  const Result r = runCommand(run(dir_ + "/linear.plan --weights " + dir_ + "/linear.onnx --input x=" + dir_ +
                                  "/big.npy --quiet"));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "megatrain-run: error: loss is inf at step 1, stopping; no checkpoint was written\n");
}

// The poisoned state is never saved, even with a save due at that very step:
// the last good checkpoint stays the newest, and `latest` names it.
TEST_F(ToolsTest, NonFiniteLossKeepsTheLastGoodCheckpoint) {
  HostArray x = HostArray::zeros(ElementType::F32, {4, 3});
  x.data<float>()[0] = 1e30f;  // y^2 overflows f32
  writeNpy(dir_ + "/big.npy", x);
  const std::string ck = dir_ + "/ck", plan = dir_ + "/linear.plan --quiet --save-every 1 --save " + ck;
  Result r = runCommand(run(plan + " --weights " + dir_ + "/linear.onnx --input x=" + dir_ + "/x.npy --steps 2"));
  ASSERT_EQ(r.status, 0) << r.output;
  r = runCommand(run(plan + " --resume " + ck + " --input x=" + dir_ + "/big.npy --steps 4"));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "megatrain-run: error: loss is inf at step 3, stopping; the last good checkpoint, " + ck +
                          "/step-2.ckpt, is kept\n");
  std::ifstream latest(ck + "/latest");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(latest), std::istreambuf_iterator<char>()), "step-2.ckpt\n");
  EXPECT_FALSE(std::ifstream(ck + "/step-3.ckpt").good());
}

// The same for the gradient norm (computed under --clip-grad-norm) with the loss finite.
// W's first row is 0 and stays 0 while x's first column is 0 (its gradient is 0), so x[0][0]
// = 3e38 leaves y, and the loss, finite; but dW[0][j] = x[0][0] * dy[0][j] (dy = y / 4,
// y[0] about 10) overflows f32, so the gradient norm is inf.
TEST_F(ToolsTest, NonFiniteGradientNormKeepsTheLastGoodCheckpoint) {
  writeModel(dir_ + "/zero_row.onnx", {{"W", HostTensor{{3, 2}, plan::F32, {0, 0, 1, 1, 1, 1}}}});
  HostArray x = HostArray::zeros(ElementType::F32, {4, 3});
  const float rows[4][3] = {{0, 5, 5}, {0, -1, 0.5f}, {0, 2, -1}, {0, 0.5f, 1}};
  for (int i = 0; i < 4; ++i)
    for (int k = 0; k < 3; ++k) x.data<float>()[i * 3 + k] = rows[i][k];
  writeNpy(dir_ + "/good.npy", x);
  x.data<float>()[0] = 3e38f;
  writeNpy(dir_ + "/huge.npy", x);
  const std::string ck = dir_ + "/ck", metrics = dir_ + "/m.jsonl";
  const std::string plan = dir_ + "/linear.plan --quiet --clip-grad-norm 1 --save-every 1 --save " + ck + " --metrics " + metrics;
  Result r = runCommand(run(plan + " --weights " + dir_ + "/zero_row.onnx --input x=" + dir_ + "/good.npy --steps 2"));
  ASSERT_EQ(r.status, 0) << r.output;
  r = runCommand(run(plan + " --resume " + ck + " --input x=" + dir_ + "/huge.npy --steps 4"));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "megatrain-run: error: gradient norm is inf at step 3, stopping; the last good checkpoint, " + ck +
                          "/step-2.ckpt, is kept\n");
  EXPECT_EQ(readFile(ck + "/latest"), "step-2.ckpt\n");
  EXPECT_EQ(filesIn(ck), (std::vector<std::string>{"latest", "step-1.ckpt", "step-2.ckpt"}));

  // Step 3's row: a finite loss (the loss check did not stop the run), no gradient norm.
  std::ifstream rows3(metrics);
  std::string line, last;
  while (std::getline(rows3, line)) last = line;
  ASSERT_EQ(last.rfind("{\"step\": 3, \"loss\": ", 0), 0u) << last;
  const double loss = std::stod(last.substr(std::string("{\"step\": 3, \"loss\": ").size()));
  EXPECT_TRUE(std::isfinite(loss) && loss > 0) << last;
  EXPECT_NE(last.find("\"grad_norm\": null"), std::string::npos) << last;

  // The checkpoint kept is good: the run continues from it with the good input.
  r = runCommand(run(plan + " --resume " + ck + " --input x=" + dir_ + "/good.npy --steps 3"));
  EXPECT_EQ(r.status, 0) << r.output;
}

// Standard output that cannot be written (here /dev/full: ENOSPC) is an error, one line
// on stderr and exit status 1, not a silent exit 0; the shell's ( ) keeps stderr apart.
TEST_F(ToolsTest, AFailedWriteToStandardOutputIsAnError) {
  auto toFull = [](const std::string& command) { return runCommand("(" + command + " >/dev/full)"); };
  const std::string run1 = run(dir_ + "/linear.plan --weights " + dir_ + "/linear.onnx --input x=" + dir_ + "/x.npy --steps 2");
  const std::string inspect = std::string(MEGATRAIN_INSPECT) + " " + dir_ + "/linear.plan";
  for (const std::string& command : {run("--help"), run1, run1 + " --quiet"}) {
    const Result r = toFull(command);
    EXPECT_EQ(r.status, 1) << command;
    EXPECT_EQ(r.output, "megatrain-run: error: writing standard output: No space left on device\n") << command;
  }
  for (const std::string& command : {std::string(MEGATRAIN_INSPECT) + " --help", inspect, inspect + " --max-steps 2"}) {
    const Result r = toFull(command);
    EXPECT_EQ(r.status, 1) << command;
    EXPECT_EQ(r.output, "megatrain-inspect: error: writing standard output: No space left on device\n") << command;
  }
  // The same runs with stdout that takes everything: exit 0, nothing on stderr.
  const Result ok = runCommand("(" + inspect + " >/dev/null)");
  EXPECT_EQ(ok.status, 0);
  EXPECT_EQ(ok.output, "");
  const Result trained = runCommand("(" + run1 + " >/dev/null)");
  EXPECT_EQ(trained.status, 0);
  EXPECT_EQ(trained.output, "");
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
  // What the device holds at its peak, by pool and role, activations by the kernel that wrote them.
  EXPECT_NE(r.output.find("device peak    144 B at step 14"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("at the peak         48 B      1 tensor   device: INPUT"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("32 B      1 tensor   device: matmul output"), std::string::npos) << r.output;

  const Result full = runCommand(std::string(MEGATRAIN_INSPECT) + " " + dir_ + "/linear.plan");
  EXPECT_NE(full.output.find("adamw W"), std::string::npos);
  EXPECT_NE(full.output.find("read loss"), std::string::npos);
  EXPECT_NE(full.output.find("matmul ta=1"), std::string::npos);
  EXPECT_EQ(runCommand(std::string(MEGATRAIN_INSPECT)).output,
            "megatrain-inspect: error: missing MODEL.plan (see --help)\n");
}

// A plan with events, a budget and predictions filled in by hand (the simulator lives in the
// compiler): the summary shows them, --memory-plot draws the budget, --trace has one thread
// per stream. A plan without predictions cannot be drawn.
TEST_F(ToolsTest, InspectDrawsPredictedMemoryAndTrace) {
  plan::Plan p = linearPlan(plan::F32);
  p.mutable_header()->set_format_minor(kPlanMinorTiering);  // predictions
  double t = 0;
  for (plan::Step& step : *p.mutable_steps()) {
    const double seconds = step.has_copy() ? 5e-6 : step.has_kernel() ? 2e-6 : step.has_host_task() ? 3e-6 : 0;
    step.set_predicted_start_s(t);
    step.set_predicted_end_s(t + seconds);
    t += seconds;
  }
  plan::Header& h = *p.mutable_header();
  h.set_predicted_step_s(t);
  h.mutable_predicted_breakdown()->set_compute_s(18e-6);
  h.mutable_predicted_breakdown()->set_idle_s(t - 18e-6);
  h.set_h2d_bytes(24);
  h.set_d2h_bytes(28);
  h.set_device_budget_bytes(800);
  h.set_device_profile(R"({"name":"bench-card","launch_s":4e-06})");
  p.mutable_steps(16)->set_recompute(true);  // shown as such, though nothing is rebuilt here
  writePlan(dir_ + "/predicted.plan", p);

  const std::string svg = dir_ + "/memory.svg", trace = dir_ + "/trace.json";
  const Result r = runCommand(std::string(MEGATRAIN_INSPECT) + " " + dir_ + "/predicted.plan --memory-plot " + svg +
                              " --trace=" + trace);
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* expected :
       {"device         bench-card", "budget         800 B of device memory",
        "predicted step 39.0 us: compute 18.0 us, exposed transfer 0.0 us", "links          h2d 24 B (busy 5.0 us), d2h 28 B (busy 10.0 us)",
        "predicted start", "scale alpha=2 (recompute)", "live device bytes over predicted time ('-': the budget)", "trace of 24 steps on 4 streams"})
    EXPECT_NE(r.output.find(expected), std::string::npos) << expected << "\n" << r.output;

  std::ifstream svgFile(svg);
  const std::string svgText((std::istreambuf_iterator<char>(svgFile)), std::istreambuf_iterator<char>());
  EXPECT_EQ(svgText.rfind("<?xml", 0), 0u);
  EXPECT_NE(svgText.find(">budget 800 B</text>"), std::string::npos) << svgText;
  EXPECT_NE(svgText.find("predicted time (us)"), std::string::npos);
  EXPECT_NE(svgText.find("live device memory (B)"), std::string::npos);

  std::ifstream traceFile(trace);
  const std::string traceText((std::istreambuf_iterator<char>(traceFile)), std::istreambuf_iterator<char>());
  int tid = 1;
  for (const char* stream : {"compute", "h2d", "d2h", "host"})
    EXPECT_NE(traceText.find(R"({"name":"thread_name","ph":"M","pid":1,"tid":)" + std::to_string(tid++) +
                             R"(,"args":{"name":")" + stream + "\"}}"),
              std::string::npos)
        << stream << "\n" << traceText;
  EXPECT_NE(traceText.find(R"({"name":"copy W -> dev:W","cat":"copy","ph":"X","pid":1,"tid":2,"ts":0.000,"dur":5.000,"args":{"step":0,"bytes":24)"),
            std::string::npos)
      << traceText;
  EXPECT_NE(traceText.find(R"({"name":"matmul -> y","cat":"kernel","ph":"X","pid":1,"tid":1,"ts":5.000,"dur":2.000,"args":{"step":3,"bytes":)"),
            std::string::npos)
      << traceText;

  EXPECT_NE(traceText.find(R"("args":{"step":16,"bytes":64,"recompute":true})"), std::string::npos) << traceText;

  const Result old = runCommand(std::string(MEGATRAIN_INSPECT) + " " + dir_ + "/linear.plan --trace " + trace);
  EXPECT_EQ(old.status, 1);
  EXPECT_EQ(old.output, "megatrain-inspect: error: " + dir_ +
                            "/linear.plan: the plan has no predicted step times (format 1.0); recompile it with a "
                            "megatrain-compile that writes them (format 1.2)\n");

  // The parameter's fetch on a stream of its own, `fetch`: it still loads the h2d link.
  p.add_streams("fetch");
  for (plan::Step& step : *p.mutable_steps())
    if (step.stream() == "h2d") step.set_stream("fetch");  // the copy and its record
  writePlan(dir_ + "/fetch.plan", p);
  const Result fetched = runCommand(std::string(MEGATRAIN_INSPECT) + " " + dir_ + "/fetch.plan --max-steps 1");
  ASSERT_EQ(fetched.status, 0) << fetched.output;
  EXPECT_NE(fetched.output.find("links          h2d 24 B (busy 5.0 us), d2h 28 B (busy 10.0 us)"), std::string::npos)
      << fetched.output;
  EXPECT_NE(fetched.output.find("h2d 0.0 us"), std::string::npos) << fetched.output;
  EXPECT_NE(fetched.output.find("fetch 5.0 us"), std::string::npos) << fetched.output;
}

}  // namespace
}  // namespace megatrain::runtime::testing
