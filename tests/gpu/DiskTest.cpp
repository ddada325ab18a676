// DiskTest.cpp - the CUDA backend's DISK pools: disk copies through pinned staging on the disk stream, ordered by the plan's events, and host reads and writes of disk state, against the CPU backend.
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "CudaHarness.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/DiskTier.h"

namespace megatrain::runtime::testing {
namespace {

// One disk parameter's update as the compiler emits it (docs/tiering.md "State
// homes"): m and v read from the DISK pool into staging on stream `disk`, the
// host AdamW on the staging once `staged` is recorded, the staging written back
// once `updated` is. W has 5 Mi elements, so its moments take more than two
// disk chunks (the threaded path); b is small.
struct DiskPlan {
  plan::Plan plan;
  std::vector<uint32_t> params, grads, moments;  // moments: m, v of each parameter, on disk
};

DiskPlan diskPlan() {
  PlanBuilder b;
  DiskPlan d;
  const std::vector<std::vector<int64_t>> shapes = {{5, 1 << 20}, {3, 7}};
  std::vector<uint32_t> stage;
  for (size_t p = 0; p < shapes.size(); ++p) {
    const std::string name = p == 0 ? "W" : "b";
    d.params.push_back(b.tensor(name, shapes[p], plan::F32, plan::PARAMETER));
    d.grads.push_back(b.tensor("grad:" + name, shapes[p], plan::F32, plan::GRADIENT));
    for (const char* moment : {"m:", "v:"}) {
      d.moments.push_back(b.tensor(moment + name, shapes[p], plan::F32, plan::OPTIMIZER_STATE));
      stage.push_back(b.tensor(std::string("stage_") + moment + name, shapes[p], plan::F32, plan::STATE_STAGE));
    }
  }
  for (size_t p = 0; p < shapes.size(); ++p) {
    const std::string tag = std::to_string(p);
    b.wait("grads_ready", "disk");  // nothing records it before: a wait on an unrecorded event passes
    b.copy(d.moments[2 * p], stage[2 * p], "disk");
    b.copy(d.moments[2 * p + 1], stage[2 * p + 1], "disk");
    b.record("staged" + tag, "disk");
    b.wait("staged" + tag, "host");
    b.adamw(d.params[p], d.grads[p], stage[2 * p], stage[2 * p + 1]);
    b.record("updated" + tag, "host");
    b.wait("updated" + tag, "disk");
    b.copy(stage[2 * p], d.moments[2 * p], "disk");
    b.copy(stage[2 * p + 1], d.moments[2 * p + 1], "disk");
  }
  b.record("grads_ready", "compute");
  d.plan = b.build();
  // The moments in a DISK pool, the staging in its own pinned pool, each 4 KiB aligned.
  plan::Plan& plan = d.plan;
  plan.add_streams("disk");
  const uint32_t diskPool = static_cast<uint32_t>(plan.pools_size()), stagePool = diskPool + 1;
  uint64_t used[2] = {0, 0};
  for (plan::Tensor& tensor : *plan.mutable_tensors()) {
    const bool onDisk = tensor.role() == plan::OPTIMIZER_STATE, staged = tensor.role() == plan::STATE_STAGE;
    if (!onDisk && !staged) continue;
    uint64_t& next = used[onDisk ? 0 : 1];
    tensor.mutable_buffer()->set_pool(onDisk ? diskPool : stagePool);
    tensor.mutable_buffer()->set_offset(next);
    next += (tensor.buffer().size_bytes() + kDiskBlockBytes - 1) / kDiskBlockBytes * kDiskBlockBytes;
  }
  for (int i = 0; i < 2; ++i) {
    plan::Pool* pool = plan.add_pools();
    pool->set_id(diskPool + static_cast<uint32_t>(i));
    pool->set_name(i == 0 ? "disk" : "disk_stage");
    pool->set_tier(i == 0 ? plan::DISK : plan::HOST_PINNED);
    pool->set_size_bytes(used[i]);
  }
  return d;
}

// The executor's way through the steps (ADAMW at optimizer step t).
void runSteps(Backend& backend, const plan::Plan& plan, int64_t t) {
  for (const plan::Step& step : plan.steps()) {
    backend.setCurrentStep(step.index());
    auto tensor = [&](uint32_t id) -> const plan::Tensor& { return plan.tensors(static_cast<int>(id)); };
    if (step.has_copy()) backend.copy(tensor(step.copy().src()), tensor(step.copy().dst()));
    else if (step.has_record()) backend.recordEvent(step.record().event(), step.stream());
    else if (step.has_wait()) backend.waitEvent(step.wait().event(), step.stream());
    else if (step.has_host_task()) {
      const auto& ids = step.host_task().tensors();
      backend.runAdamW(tensor(ids[0]), tensor(ids[1]), tensor(ids[2]), tensor(ids[3]), plan.header().optimizer(), t);
    }
  }
  backend.synchronize();
}

std::vector<std::byte> readAll(const Backend& backend, const plan::Tensor& tensor) {
  std::vector<std::byte> bytes(tensor.buffer().size_bytes());
  backend.read(tensor, bytes.data(), bytes.size());
  return bytes;
}

// Three optimizer steps with fresh gradients each: the parameters and the
// moments on disk (read back through read()) equal the CPU backend's bitwise
// (the same host AdamW; the disk only moves bytes).
TEST(CudaDisk, StagedUpdatesMatchTheCpuBackendBitwise) {
  const DiskPlan d = diskPlan();
  CpuBackend cpu;
  Backend& cuda = cudaBackend();
  cpu.setDiskDirectory(makeTempDir());
  cuda.setDiskDirectory(makeTempDir());
  cpu.prepare(d.plan);
  cuda.prepare(d.plan);
  std::mt19937 rng(testSeed());
  auto writeBoth = [&](uint32_t id, double scale) {
    const plan::Tensor& tensor = d.plan.tensors(static_cast<int>(id));
    HostTensor values = randomTensor(std::vector<int64_t>(tensor.shape().begin(), tensor.shape().end()), plan::F32, rng);
    for (double& x : values.values) x = scale == 0 ? 0 : x * scale;
    const std::vector<std::byte> bytes = encode(values);
    cpu.write(tensor, bytes.data(), bytes.size());
    cuda.write(tensor, bytes.data(), bytes.size());
  };
  for (uint32_t id : d.params) writeBoth(id, 1);
  for (uint32_t id : d.moments) writeBoth(id, 0);
  for (int64_t t = 1; t <= 3; ++t) {
    for (uint32_t id : d.grads) writeBoth(id, 0.1);
    runSteps(cpu, d.plan, t);
    runSteps(cuda, d.plan, t);
  }
  for (const std::vector<uint32_t>* ids : {&d.params, &d.moments})
    for (uint32_t id : *ids) {
      const plan::Tensor& tensor = d.plan.tensors(static_cast<int>(id));
      EXPECT_TRUE(readAll(cpu, tensor) == readAll(cuda, tensor)) << tensor.name() << " differs from the cpu backend";
    }
  // A disk tensor has no host address.
  EXPECT_THROW(cuda.hostData(d.plan.tensors(static_cast<int>(d.moments[0]))), Error);
}

TEST(CudaDisk, APlanWithADiskPoolNeedsADirectory) {
  const DiskPlan d = diskPlan();
  Backend& cuda = cudaBackend();
  cuda.setDiskDirectory("");
  try {
    cuda.prepare(d.plan);
    FAIL() << "prepared a DISK pool without a directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--disk-dir"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace megatrain::runtime::testing
