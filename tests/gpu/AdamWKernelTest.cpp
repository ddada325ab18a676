// AdamWKernelTest.cpp - the device AdamW and accumulation (runtime/cuda/adamw.cu) against their CPU
// twins (runtime/host/AdamW.cpp, Accumulate.cpp) on fresh random data: bitwise, f32 with and
// without the bf16 compute copy and f64, over several steps, with sizes that leave a partial block.
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "CudaHarness.h"
#include "DeviceAdamW.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/Accumulate.h"
#include "megatrain/runtime/AdamW.h"

namespace megatrain::runtime::testing {
namespace {

// Device memory for one array, freed at scope end.
struct DeviceArray {
  void* data = nullptr;
  size_t bytes = 0;
  explicit DeviceArray(size_t size) : bytes(size) { EXPECT_EQ(cudaMalloc(&data, size ? size : 1), cudaSuccess); }
  ~DeviceArray() { cudaFree(data); }
  void put(const void* host) { ASSERT_EQ(cudaMemcpy(data, host, bytes, cudaMemcpyHostToDevice), cudaSuccess); }
  void get(void* host) const { ASSERT_EQ(cudaMemcpy(host, data, bytes, cudaMemcpyDeviceToHost), cudaSuccess); }
};

template <typename T>
std::vector<T> randomValues(size_t count, std::mt19937& rng, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> values(count);
  for (T& value : values) value = static_cast<T>(dist(rng));
  return values;
}

template <typename T>
void expectBitwise(const std::vector<T>& want, const std::vector<T>& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  size_t differ = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (std::memcmp(&want[i], &got[i], sizeof(T)) != 0 && differ++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: cpu " << want[i] << ", cuda " << got[i];
  EXPECT_EQ(differ, 0u) << what;
}

template <typename T>
void runAdamWCase(plan::DType dtype, size_t count, bool copy, uint32_t seed) {
  SCOPED_TRACE(std::string(dtype == plan::F32 ? "f32" : "f64") + " count " + std::to_string(count) +
               (copy ? " with copy" : "") + ", MEGATRAIN_TEST_SEED=" + std::to_string(seed));
  std::mt19937 rng(seed);
  std::vector<T> param = randomValues<T>(count, rng, -1, 1), m(count, 0), v(count, 0);
  std::vector<uint16_t> bf16(copy ? count : 0);
  plan::AdamW hyper;
  hyper.set_lr(3e-3);
  hyper.set_beta1(0.9);
  hyper.set_beta2(0.999);
  hyper.set_eps(1e-8);
  hyper.set_weight_decay(0.01);
  const size_t bytes = count * sizeof(T);
  DeviceArray dParam(bytes), dGrad(bytes), dM(bytes), dV(bytes), dCopy(count * 2);
  dParam.put(param.data());
  dM.put(m.data());
  dV.put(v.data());
  for (int64_t t = 1; t <= 4; ++t) {
    // Gradients of mixed magnitudes, some exactly zero.
    std::vector<T> grad = randomValues<T>(count, rng, -t * 0.5, t * 0.5);
    for (size_t i = 0; i < count; i += 7) grad[i] = 0;
    dGrad.put(grad.data());
    adamwUpdate(dtype, param.data(), grad.data(), m.data(), v.data(), count, hyper, t,
                copy ? bf16.data() : nullptr);
    cuda::launchAdamW(dtype, dParam.data, dGrad.data, dM.data, dV.data, count, hyper, t,
                      copy ? static_cast<uint16_t*>(dCopy.data) : nullptr, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<T> gotParam(count), gotM(count), gotV(count);
    dParam.get(gotParam.data());
    dM.get(gotM.data());
    dV.get(gotV.data());
    expectBitwise(param, gotParam, "param, step " + std::to_string(t));
    expectBitwise(m, gotM, "m, step " + std::to_string(t));
    expectBitwise(v, gotV, "v, step " + std::to_string(t));
    if (copy) {
      std::vector<uint16_t> gotCopy(count);
      dCopy.get(gotCopy.data());
      expectBitwise(bf16, gotCopy, "bf16 copy, step " + std::to_string(t));
    }
  }
}

TEST(CudaDeviceAdamW, MatchesTheHostAdamWBitwise) {
  const uint32_t seed = testSeed();
  for (size_t count : {size_t(1), size_t(1000), size_t(1) << 20 | 37}) {
    runAdamWCase<float>(plan::F32, count, false, seed);
    runAdamWCase<float>(plan::F32, count, true, seed + 1);
    runAdamWCase<double>(plan::F64, count, false, seed + 2);
  }
}

TEST(CudaDeviceAdamW, AccumulateMatchesTheHostBitwise) {
  const uint32_t seed = testSeed();
  std::mt19937 rng(seed);
  const size_t count = 4099;
  std::vector<float> acc = randomValues<float>(count, rng, -1, 1);
  DeviceArray dAcc(count * 4), dPart(count * 4);
  dAcc.put(acc.data());
  for (int k = 0; k < 3; ++k) {
    std::vector<float> part = randomValues<float>(count, rng, -1e-3, 1e-3);
    dPart.put(part.data());
    accumulate(plan::F32, acc.data(), part.data(), count);
    cuda::launchAccumulate(plan::F32, dAcc.data, dPart.data, count, nullptr);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> got(count);
  dAcc.get(got.data());
  expectBitwise(acc, got, "acc (MEGATRAIN_TEST_SEED=" + std::to_string(seed) + ")");
}

TEST(CudaDeviceAdamW, RefusesBadInput) {
  plan::AdamW hyper;
  hyper.set_lr(1e-3);
  EXPECT_THROW(cuda::launchAdamW(plan::F32, nullptr, nullptr, nullptr, nullptr, 4, hyper, 0, nullptr, nullptr),
               Error);
  EXPECT_THROW(cuda::launchAdamW(plan::BF16, nullptr, nullptr, nullptr, nullptr, 4, hyper, 1, nullptr, nullptr),
               Error);
}

}  // namespace
}  // namespace megatrain::runtime::testing
