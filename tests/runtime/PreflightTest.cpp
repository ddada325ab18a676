// PreflightTest.cpp - preflight says what is short and by how much, and refuses before allocating anything.
#include <gtest/gtest.h>

#include <fstream>

#include "TestUtil.h"
#include "TinyPlans.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/Preflight.h"

namespace megatrain::runtime::testing {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30, kTiB = uint64_t{1} << 40;

TEST(Preflight, ParsesMemAvailable) {
  EXPECT_EQ(parseMemAvailable("MemTotal:       32768000 kB\nMemFree:  100 kB\nMemAvailable:   1024 kB\n"),
            std::optional<uint64_t>(1024 * 1024));
  EXPECT_FALSE(parseMemAvailable("MemTotal: 5 kB\n").has_value());
}

TEST(Preflight, NamesEachShortfallAndByHowMuch) {
  PreflightNeeds needs;
  needs.hostPinnedBytes = static_cast<uint64_t>(1.2 * static_cast<double>(kTiB));
  needs.deviceBytes = 150 * kGiB;
  needs.saveDir = "runs/big";
  needs.checkpointBytes = 600 * kGiB;
  needs.diskBytes = 80 * kGiB;
  needs.diskDir = "/scratch/state";
  PreflightMachine machine;
  machine.hostAvailable = 110 * kGiB;
  machine.deviceFree = 139 * kGiB;
  machine.diskFree = 1 * kTiB;
  machine.stateDiskFree = 64 * kGiB;
  EXPECT_EQ(
      preflightShortfalls(needs, machine),
      (std::vector<std::string>{
          "the plan's pinned host pools need 1.20 TiB, this machine has 110 GiB available (short by 1.09 TiB); "
          "recompile with a smaller --host-memory to move state to the device or disk",
          "the plan's device pools (arena and device-resident state) need 150 GiB, the device has 139 GiB free "
          "(short by 11.0 GiB); recompile with a smaller --device-memory",
          "two checkpoints of 600 GiB under runs/big need 1.17 TiB, its disk has 1.00 TiB free (short by 176 GiB)",
          "the plan's disk-resident state under /scratch/state needs 80.0 GiB, its disk has 64.0 GiB free (short by "
          "16.0 GiB); pass a --disk-dir with more room, or recompile with a smaller --disk-memory"}));

  // Enough of everything; unmeasured resources are not checked.
  machine.hostAvailable = 2 * kTiB;
  machine.deviceFree = 150 * kGiB;
  machine.diskFree = std::nullopt;
  machine.stateDiskFree = std::nullopt;
  EXPECT_TRUE(preflightShortfalls(needs, machine).empty());

  // The cpu backend keeps the device arena in host memory.
  needs.deviceInHostMemory = true;
  machine.hostAvailable = needs.hostPinnedBytes + 100 * kGiB;
  EXPECT_EQ(preflightShortfalls(needs, machine),
            std::vector<std::string>{"the plan's pinned host pools and device arena (which this backend keeps in host "
                                     "memory) need 1.35 TiB, this machine has 1.30 TiB available (short by 50.0 GiB); "
                                     "recompile with a smaller --host-memory to move state to the device or disk"});
}

TEST(Preflight, RefusesAPlanWhosePoolsExceedHostMemory) {
  plan::Plan plan = linearPlan(plan::F32);
  plan.mutable_pools(1)->set_size_bytes(uint64_t{1} << 50);  // 1 PiB of pinned host memory
  CpuBackend backend;
  const PreflightNeeds needs = preflightNeeds(plan, backend, "");
  EXPECT_EQ(needs.hostPinnedBytes, uint64_t{1} << 50);
  EXPECT_TRUE(needs.deviceInHostMemory);
  try {
    runPreflight(plan, backend, "");
    FAIL() << "preflight let a 1 PiB pool through";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("preflight: the plan's pinned host pools and device arena (which this backend keeps in "
                            "host memory) need 1024 TiB, this machine has ",
                            0),
              0u)
        << message;
    EXPECT_NE(message.find(" available (short by "), std::string::npos) << message;
    EXPECT_NE(message.find("(--skip-preflight to try anyway)"), std::string::npos) << message;
  }
  // The real plan fits.
  EXPECT_NO_THROW(runPreflight(linearPlan(plan::F32), backend, makeTempDir() + "/ckpt"));
}

TEST(Preflight, MeasuresTheDiskOfTheNearestExistingParent) {
  const std::string dir = makeTempDir();
  CpuBackend backend;
  const PreflightMachine machine = probeMachine(backend, dir + "/not/yet/made");
  ASSERT_TRUE(machine.diskFree.has_value());
  EXPECT_GT(*machine.diskFree, 0u);
  EXPECT_FALSE(machine.deviceFree.has_value());
  std::ofstream(dir + "/meminfo") << "MemAvailable: 42 kB\n";
  EXPECT_EQ(probeMachine(backend, "", dir + "/meminfo").hostAvailable, std::optional<uint64_t>(42 * 1024));
}

// A resumed run finds its state files under --disk-dir: their blocks are not
// needed again, only the rest of each pool.
TEST(Preflight, CountsOnlyTheDiskStateItsFilesDoNotHoldYet) {
  const std::string dir = makeTempDir();
  plan::Plan plan = linearPlan(plan::F32);
  plan::Pool* pool = plan.add_pools();
  pool->set_id(static_cast<uint32_t>(plan.pools_size() - 1));
  pool->set_name("disk");
  pool->set_tier(plan::DISK);
  pool->set_size_bytes(3 << 20);
  CpuBackend backend;
  EXPECT_EQ(preflightNeeds(plan, backend, "", dir).diskBytes, uint64_t{3} << 20);
  {
    std::ofstream file(dir + "/disk.state", std::ios::binary);
    const std::string block(1 << 20, 'x');
    file << block;
  }
  EXPECT_EQ(preflightNeeds(plan, backend, "", dir).diskBytes, uint64_t{2} << 20);
  EXPECT_EQ(preflightNeeds(plan, backend, "", "").diskBytes, uint64_t{3} << 20);
}

}  // namespace
}  // namespace megatrain::runtime::testing
