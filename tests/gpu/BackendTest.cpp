// BackendTest.cpp - the CUDA backend's memory, copies, poisoning, AdamW, events and error reports.
#include <cmath>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include "CudaHarness.h"
#include "DeviceSupport.h"
#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/CpuBackend.h"

namespace megatrain::runtime::testing {
namespace {

std::vector<std::byte> readAll(const Backend& backend, const plan::Tensor& tensor) {
  std::vector<std::byte> bytes(tensor.buffer().size_bytes());
  backend.read(tensor, bytes.data(), bytes.size());
  return bytes;
}

void writeAll(Backend& backend, const plan::Tensor& tensor, const HostTensor& values) {
  const std::vector<std::byte> bytes = encode(values);
  backend.write(tensor, bytes.data(), bytes.size());
}

// host -> device, a kernel, device -> host: the path every parameter and gradient takes.
// The device's own machine code is loaded, not PTX compiled at run time: this
// build's architecture list (cmake/CudaArchitectures.cmake) holds the GPU's.
TEST(CudaBackend, RunsMachineCodeBuiltForThisGpu) {
  ASSERT_NO_THROW(cuda::checkDeviceSupported(0));
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  const int capability = prop.major * 10 + prop.minor;
  const std::string archs = "," + cuda::compiledArchitectures() + ",";
  const bool built = archs.find("," + std::to_string(capability) + ",") != std::string::npos ||
                     archs.find("," + std::to_string(capability) + "a,") != std::string::npos;
  ASSERT_TRUE(built) << prop.name << " (" << capability << ") is not in " << cuda::compiledArchitectures();
  EXPECT_EQ(cuda::loadedBinaryVersion(), capability);
}

TEST(CudaBackend, CopiesBetweenPinnedHostAndDevice) {
  std::mt19937 rng(testSeed());
  for (plan::DType dt : {plan::F32, plan::F64}) {
    PlanBuilder b;
    const uint32_t host = b.tensor("W", {33, 7}, dt, plan::PARAMETER);
    const uint32_t back = b.tensor("grad:W", {33, 7}, dt, plan::GRADIENT);
    const uint32_t dev = b.tensor("dev:W", {33, 7}, dt, plan::PARAMETER_COPY);
    const uint32_t scaled = b.tensor("scaled", {33, 7}, dt, plan::ACTIVATION);
    b.copy(host, dev, "h2d");
    b.kernel("scale", {dev}, {scaled}, {floatAttr("alpha", 3.0)});
    b.copy(scaled, back, "d2h");
    const plan::Plan plan = b.build();
    Backend& cuda = cudaBackend();
    cuda.prepare(plan);
    const HostTensor w = randomTensor({33, 7}, dt, rng);
    writeAll(cuda, plan.tensors(host), w);
    cuda.copy(plan.tensors(host), plan.tensors(dev));
    cuda.launchKernel(1);
    cuda.copy(plan.tensors(scaled), plan.tensors(back));
    cuda.synchronize();
    const HostTensor result = decode(readAll(cuda, plan.tensors(back)), {33, 7}, dt);
    for (size_t i = 0; i < w.values.size(); ++i) {
      const double want = dt == plan::F32 ? static_cast<float>(w.values[i] * 3.0) : w.values[i] * 3.0;
      EXPECT_EQ(result.values[i], want) << i;
    }
  }
}

// The planner may hand a copy overlapping bytes of one pool: it must move like memmove.
TEST(CudaBackend, OverlappingCopiesMoveLikeMemmove) {
  std::mt19937 rng(testSeed());
  for (int64_t shift : {-12, -1, 1, 5, 40}) {
    PlanBuilder b;
    const uint32_t src = b.tensor("src", {64}, plan::F64, plan::ACTIVATION);
    const uint32_t dst = b.tensor("dst", {64}, plan::F64, plan::ACTIVATION);
    b.copy(src, dst, "compute");
    plan::Plan plan = b.build();
    const uint64_t base = 8 * 64;  // leave room below src for negative shifts
    plan.mutable_tensors(static_cast<int>(src))->mutable_buffer()->set_offset(base);
    plan.mutable_tensors(static_cast<int>(dst))->mutable_buffer()->set_offset(base + 8 * shift);
    plan.mutable_pools(0)->set_size_bytes(base * 3);
    const HostTensor values = randomTensor({64}, plan::F64, rng);
    CpuBackend cpu;
    std::vector<std::byte> expected, actual;
    for (Backend* backend : {static_cast<Backend*>(&cpu), &cudaBackend()}) {
      backend->prepare(plan);
      writeAll(*backend, plan.tensors(static_cast<int>(src)), values);
      backend->copy(plan.tensors(static_cast<int>(src)), plan.tensors(static_cast<int>(dst)));
      backend->synchronize();
      (backend == &cpu ? expected : actual) = readAll(*backend, plan.tensors(static_cast<int>(dst)));
    }
    EXPECT_EQ(actual, expected) << "shift " << shift << " elements";
  }
}

TEST(CudaBackend, PoisonWritesAllOnesBytesOnDeviceAndHost) {
  PlanBuilder b;
  const uint32_t dev = b.tensor("x", {100}, plan::F32, plan::ACTIVATION);
  const uint32_t idx = b.tensor("i", {9}, plan::I64, plan::ACTIVATION);
  const uint32_t host = b.tensor("W", {10}, plan::F64, plan::PARAMETER);
  const plan::Plan plan = b.build();
  Backend& cuda = cudaBackend();
  cuda.prepare(plan);
  std::mt19937 rng(testSeed());
  writeAll(cuda, plan.tensors(dev), randomTensor({100}, plan::F32, rng));
  writeAll(cuda, plan.tensors(host), randomTensor({10}, plan::F64, rng));
  for (uint32_t id : {dev, idx, host}) {
    cuda.poison(plan.tensors(static_cast<int>(id)));
    for (std::byte byte : readAll(cuda, plan.tensors(static_cast<int>(id)))) ASSERT_EQ(byte, std::byte{0xFF});
  }
  for (double v : decode(readAll(cuda, plan.tensors(dev)), {100}, plan::F32).values) EXPECT_TRUE(std::isnan(v));
}

// AdamW runs the CPU backend's function on pinned memory: bitwise the same.
TEST(CudaBackend, AdamWMatchesTheCpuBackendBitwise) {
  std::mt19937 rng(testSeed());
  for (plan::DType dt : {plan::F32, plan::F64}) {
    PlanBuilder b;
    const uint32_t w = b.tensor("W", {257}, dt, plan::PARAMETER);
    const uint32_t g = b.tensor("grad:W", {257}, dt, plan::GRADIENT);
    const uint32_t m = b.tensor("adam_m:W", {257}, dt, plan::OPTIMIZER_STATE);
    const uint32_t v = b.tensor("adam_v:W", {257}, dt, plan::OPTIMIZER_STATE);
    b.adamw(w, g, m, v);
    const plan::Plan plan = b.build();
    const HostTensor init = randomTensor({257}, dt, rng), zeros{{257}, dt, std::vector<double>(257, 0.0)};
    std::vector<HostTensor> grads;
    for (int t = 0; t < 3; ++t) grads.push_back(randomTensor({257}, dt, rng));
    CpuBackend cpu;
    std::vector<std::byte> results[2];
    int slot = 0;
    for (Backend* backend : {static_cast<Backend*>(&cpu), &cudaBackend()}) {
      backend->prepare(plan);
      writeAll(*backend, plan.tensors(w), init);
      writeAll(*backend, plan.tensors(m), zeros);
      writeAll(*backend, plan.tensors(v), zeros);
      for (int t = 1; t <= 3; ++t) {
        writeAll(*backend, plan.tensors(g), grads[t - 1]);
        backend->runAdamW(plan.tensors(w), plan.tensors(g), plan.tensors(m), plan.tensors(v),
                          plan.header().optimizer(), t);
      }
      for (uint32_t id : {w, m, v}) {
        const std::vector<std::byte> bytes = readAll(*backend, plan.tensors(id));
        results[slot].insert(results[slot].end(), bytes.begin(), bytes.end());
      }
      ++slot;
    }
    EXPECT_EQ(results[1], results[0]) << dtypeName(dt);
  }
}

TEST(CudaBackend, EventsRecordAndWaitOnPreparedStreams) {
  PlanBuilder b;
  const uint32_t x = b.tensor("x", {4}, plan::F32, plan::ACTIVATION);
  b.record("ready", "h2d");
  b.wait("ready", "compute");
  b.kernel("fill", {}, {x}, {floatAttr("value", 1.5)});
  const plan::Plan plan = b.build();
  Backend& cuda = cudaBackend();
  cuda.prepare(plan);
  cuda.recordEvent("ready", "h2d");
  cuda.waitEvent("ready", "compute");
  cuda.launchKernel(2);
  cuda.synchronize();
  EXPECT_EQ(decode(readAll(cuda, plan.tensors(x)), {4}, plan::F32).values, std::vector<double>(4, 1.5));
  EXPECT_THROW(cuda.recordEvent("never", "compute"), Error);
}

// Shape and attribute errors are found before launching, in the CPU's words
// (prepare adds the step to those it finds while sizing scratch).
TEST(CudaBackend, LaunchErrorsReadLikeTheCpuBackends) {
  std::mt19937 rng(testSeed());
  const KernelCase cases[] = {
      {"add", {randomTensor({4, 5}, plan::F32, rng), randomTensor({5}, plan::F32, rng)}, {{{5, 4}, plan::F32}}},
      {"add", {randomTensor({4, 5}, plan::F32, rng), randomTensor({3}, plan::F32, rng)}, {{{4, 5}, plan::F32}}},
      {"matmul", {randomTensor({4, 5}, plan::F64, rng), randomTensor({4, 5}, plan::F64, rng)}, {{{4, 5}, plan::F64}}},
      {"softmax", {randomTensor({4, 5}, plan::F32, rng)}, {{{4, 5}, plan::F32}}},  // axis missing
      {"transpose", {randomTensor({4, 5}, plan::F32, rng)}, {{{5, 4}, plan::F32}}, {intsAttr("perm", {0, 0})}},
      {"softmax_ce", {randomTensor({4, 5}, plan::F32, rng), intTensor({4}, {0, 1, 2, 3})}, {{{}, plan::F32}},
       {stringAttr("reduction", "max")}},
  };
  for (const KernelCase& c : cases) {
    const std::string cpu = kernelError(c.kernel, c.inputs, c.outputs, c.attributes);
    ASSERT_FALSE(cpu.empty()) << describe(c);
    const std::string cuda = cudaError(c);
    EXPECT_TRUE(cuda.size() >= cpu.size() && cuda.compare(cuda.size() - cpu.size(), cpu.size(), cpu) == 0)
        << describe(c) << "\n  cuda: " << cuda << "\n  cpu:  " << cpu;
  }
}

// An index or label out of range cannot throw inside a kernel: it is flagged
// on the device and reported at the next synchronization, naming the step.
TEST(CudaBackend, BadIndicesAndLabelsAreReportedAtSynchronize) {
  std::mt19937 rng(testSeed());
  const KernelCase cases[] = {
      {"gather", {randomTensor({10, 4}, plan::F32, rng), intTensor({3}, {1, 10, 2})}, {{{3, 4}, plan::F32}}},
      {"gather_grad", {intTensor({3}, {1, -11, 2}), randomTensor({3, 4}, plan::F64, rng)}, {{{10, 4}, plan::F64}}},
      {"softmax_ce", {randomTensor({4, 5}, plan::F32, rng), intTensor({4}, {0, 5, 1, 2})}, {{{}, plan::F32}}},
      {"softmax_ce_grad", {randomTensor({4, 5}, plan::F32, rng), intTensor({4}, {0, -3, 1, 2}), randomTensor({}, plan::F32, rng)},
       {{{4, 5}, plan::F32}}},
      {"next_token_ce", {randomTensor({1, 3, 5}, plan::F64, rng), intTensor({1, 3}, {0, 1, 7})}, {{{}, plan::F64}}},
      {"next_token_ce_grad",
       {randomTensor({1, 3, 5}, plan::F64, rng), intTensor({1, 3}, {0, 9, 1}), randomTensor({}, plan::F64, rng)},
       {{{1, 3, 5}, plan::F64}}},
  };
  for (const KernelCase& c : cases) {
    const std::string message = cudaError(c);
    EXPECT_NE(message.find("step 0 (" + c.kernel + ": "), std::string::npos) << describe(c) << ": " << message;
    EXPECT_NE(message.find("outside"), std::string::npos) << message;
    // The flag is cleared once reported: the backend keeps working.
    EXPECT_TRUE(cudaMatchesCpu({"fill", {}, {{{3}, plan::F32}}, {floatAttr("value", 2.0)}}));
  }
}

}  // namespace
}  // namespace megatrain::runtime::testing
