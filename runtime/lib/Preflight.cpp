// Preflight.cpp - before allocating anything: does this machine have the memory and disk the plan needs?
#include "megatrain/runtime/Preflight.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "megatrain/plan/Error.h"
#include "megatrain/plan/Format.h"
#include "megatrain/runtime/Backend.h"
#include "megatrain/runtime/Checkpoint.h"

namespace megatrain::runtime {
namespace {

// "<need> 1.20 TiB, <have> 110 GiB <unit> (short by 1.09 TiB)"
std::string shortfall(const std::string& need, uint64_t needBytes, const std::string& have, uint64_t haveBytes,
                      const char* unit) {
  return need + " " + formatBytes(needBytes) + ", " + have + " " + formatBytes(haveBytes) + " " + unit + " (short by " +
         formatBytes(needBytes - haveBytes) + ")";
}

// a + b, or the largest uint64 where it would wrap: a need that large is
// short on every machine, and must not wrap around to look small.
uint64_t saturatingAdd(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

// The bytes a file already holds on its disk (0 if it does not exist).
uint64_t allocatedBytes(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) return 0;
  return static_cast<uint64_t>(info.st_blocks) * 512;
}

}  // namespace

PreflightNeeds preflightNeeds(const plan::Plan& plan, const Backend& backend, const std::string& saveDir,
                              const std::string& diskDir) {
  PreflightNeeds needs;
  needs.diskDir = diskDir;
  for (const plan::Pool& pool : plan.pools()) {
    if (pool.tier() == plan::DISK) {
      // A state file an earlier run left (a resume) is reused in place
      // (DiskTier.h): only the blocks it does not hold yet are new.
      const uint64_t held = diskDir.empty() ? 0 : allocatedBytes(diskDir + "/" + pool.name() + ".state");
      needs.diskBytes = saturatingAdd(needs.diskBytes, pool.size_bytes() - std::min(held, pool.size_bytes()));
    }
    if (pool.tier() == plan::HOST_PINNED) needs.hostPinnedBytes = saturatingAdd(needs.hostPinnedBytes, pool.size_bytes());
    if (pool.tier() == plan::DEVICE) needs.deviceBytes = saturatingAdd(needs.deviceBytes, pool.size_bytes());
  }
  needs.deviceInHostMemory = !backend.deviceMemory().has_value();
  needs.saveDir = saveDir;
  if (!saveDir.empty()) needs.checkpointBytes = checkpointBytes(plan);
  return needs;
}

std::optional<uint64_t> parseMemAvailable(const std::string& meminfo) {
  std::istringstream lines(meminfo);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    uint64_t value = 0;
    std::string unit;
    if (!(fields >> value)) return std::nullopt;
    fields >> unit;
    if (unit == "kB") return value > UINT64_MAX / 1024 ? UINT64_MAX : value * 1024;
    return value;
  }
  return std::nullopt;
}

namespace {

// Free bytes for unprivileged users on the filesystem `path` is (or will be) on.
std::optional<uint64_t> freeBytesUnder(const std::string& path) {
  // The run creates the directory if it is missing: ask the filesystem it will be on.
  std::filesystem::path dir = std::filesystem::absolute(path);
  std::error_code error;
  while (!std::filesystem::exists(dir, error) && dir.has_parent_path() && dir != dir.parent_path())
    dir = dir.parent_path();
  struct statvfs info;
  if (::statvfs(dir.c_str(), &info) != 0) return std::nullopt;
  return static_cast<uint64_t>(info.f_bavail) * static_cast<uint64_t>(info.f_frsize);
}

}  // namespace

PreflightMachine probeMachine(const Backend& backend, const std::string& saveDir, const std::string& meminfo,
                              const std::string& diskDir) {
  PreflightMachine machine;
  std::ifstream file(meminfo);
  if (file)
    machine.hostAvailable =
        parseMemAvailable(std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()));
  if (std::optional<DeviceMemory> device = backend.deviceMemory()) machine.deviceFree = device->free;
  if (!saveDir.empty()) machine.diskFree = freeBytesUnder(saveDir);
  if (!diskDir.empty()) machine.stateDiskFree = freeBytesUnder(diskDir);
  return machine;
}

std::vector<std::string> preflightShortfalls(const PreflightNeeds& needs, const PreflightMachine& machine) {
  std::vector<std::string> problems;
  if (machine.hostAvailable) {
    // The cpu backend's "device" arena is host memory too.
    const uint64_t host = saturatingAdd(needs.hostPinnedBytes, needs.deviceInHostMemory ? needs.deviceBytes : 0);
    if (host > *machine.hostAvailable) {
      const std::string what =
          needs.deviceInHostMemory && needs.deviceBytes
              ? "the plan's pinned host pools and device arena (which this backend keeps in host memory) need"
              : "the plan's pinned host pools need";
      problems.push_back(shortfall(what, host, "this machine has", *machine.hostAvailable, "available") +
                         "; recompile with a smaller --host-memory to move state to the device or disk");
    }
  }
  if (machine.deviceFree && !needs.deviceInHostMemory && needs.deviceBytes > *machine.deviceFree)
    problems.push_back(
        shortfall("the plan's device pools (arena and device-resident state) need", needs.deviceBytes, "the device has",
                  *machine.deviceFree, "free") +
        "; recompile with a smaller --device-memory");
  const uint64_t twoCheckpoints = saturatingAdd(needs.checkpointBytes, needs.checkpointBytes);
  if (machine.diskFree && !needs.saveDir.empty() && twoCheckpoints > *machine.diskFree)
    problems.push_back(
        shortfall("two checkpoints of " + formatBytes(needs.checkpointBytes) + " under " + needs.saveDir + " need",
                  twoCheckpoints, "its disk has", *machine.diskFree, "free"));
  if (machine.stateDiskFree && needs.diskBytes > *machine.stateDiskFree)
    problems.push_back(shortfall("the plan's disk-resident state under " + needs.diskDir + " needs", needs.diskBytes,
                                 "its disk has", *machine.stateDiskFree, "free") +
                       "; pass a --disk-dir with more room, or recompile with a smaller --disk-memory");
  return problems;
}

void runPreflight(const plan::Plan& plan, const Backend& backend, const std::string& saveDir,
                  const std::string& diskDir) {
  const std::vector<std::string> problems = preflightShortfalls(preflightNeeds(plan, backend, saveDir, diskDir),
                                                                probeMachine(backend, saveDir, "/proc/meminfo", diskDir));
  if (problems.empty()) return;
  std::string message = "preflight: ";
  for (size_t i = 0; i < problems.size(); ++i) message += (i ? "; " : "") + problems[i];
  throw Error(message + " (--skip-preflight to try anyway)");
}

}  // namespace megatrain::runtime
