// AccumulateTest.cpp - micro-batch gradient parts on the CUDA backend: the d2h copies into
// grad:W and the staging grad_part:W, the host ACCUMULATE and ADAMW give the CPU backend's
// bits on fresh random data.
#include <cmath>
#include <memory>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "CudaBackend.h"
#include "CudaHarness.h"
#include "MicrobatchPlans.h"
#include "TinyPlans.h"
#include "megatrain/plan/DType.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/OnnxWeights.h"

namespace megatrain::runtime::testing {
namespace {

HostArray arrayOf(const HostTensor& t) {
  HostArray a = HostArray::zeros(t.dtype == plan::F32 ? ElementType::F32 : ElementType::F64, t.shape);
  for (size_t i = 0; i < t.values.size(); ++i) {
    if (t.dtype == plan::F32) a.data<float>()[i] = static_cast<float>(t.values[i]);
    else a.data<double>()[i] = t.values[i];
  }
  return a;
}

TEST(CudaAccumulate, PartsAccumulateToTheCpuBits) {
  const uint32_t seed = testSeed();
  const std::string dir = makeTempDir();
  for (plan::DType dt : {plan::F32, plan::F64}) {
    SCOPED_TRACE(std::string(dtypeName(dt)) + ", MEGATRAIN_TEST_SEED=" + std::to_string(seed));
    std::mt19937 rng(seed);
    writeModel(dir + "/linear.onnx", {{"W", randomTensor({3, 2}, dt, rng)}});
    Executor cpu(accumulatePlan(dt), std::make_unique<CpuBackend>());
    Executor cuda(accumulatePlan(dt), makeCudaBackend());
    for (Executor* e : {&cpu, &cuda}) e->loadWeights(OnnxWeights(dir + "/linear.onnx"));
    for (int step = 1; step <= 3; ++step) {
      // New parts every step, of mixed magnitudes so the order of the sums shows.
      for (const char* name : {"x", "g0", "g1", "g2"}) {
        const bool isX = std::string(name) == "x";
        const double scale = std::string(name) == "g1" ? 1e-3 : 1.0;
        const HostTensor t = randomTensor(isX ? std::vector<int64_t>{4, 3} : std::vector<int64_t>{3, 2}, dt,
                                          rng, -scale, scale);
        cpu.setInput(name, arrayOf(t));
        cuda.setInput(name, arrayOf(t));
      }
      const double expected = cpu.runStep(), actual = cuda.runStep();
      EXPECT_NEAR(actual, expected, 1e-5 * (1 + std::abs(expected))) << "step " << step;
      // The parts reach the host unchanged and every sum and update runs there: bitwise.
      for (const char* name : {"grad:W", "W", "adam_m:W", "adam_v:W"}) {
        const std::vector<double> want = cpu.readTensor(name), got = cuda.readTensor(name);
        ASSERT_EQ(got.size(), want.size()) << name;
        for (size_t i = 0; i < want.size(); ++i)
          EXPECT_EQ(got[i], want[i]) << name << "[" << i << "], step " << step;
      }
    }
  }
}

}  // namespace
}  // namespace megatrain::runtime::testing
