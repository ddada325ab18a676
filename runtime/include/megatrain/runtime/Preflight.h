// Preflight.h - before allocating anything: does this machine have the memory and disk the plan needs?
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "megatrain/plan/plan.pb.h"

namespace megatrain::runtime {

class Backend;

// What the run will ask for.
struct PreflightNeeds {
  uint64_t hostPinnedBytes = 0;     // the HOST_PINNED pools
  uint64_t deviceBytes = 0;         // the DEVICE pools
  bool deviceInHostMemory = false;  // the backend keeps DEVICE pools in host memory (cpu)
  std::string saveDir;              // --save, empty if none
  uint64_t checkpointBytes = 0;     // one checkpoint
  uint64_t diskBytes = 0;           // the DISK pools (state files under --disk-dir), less what their files there hold
  std::string diskDir;              // --disk-dir, empty if none
};

// What the machine has; nullopt where it could not be measured (then that
// check is skipped).
struct PreflightMachine {
  std::optional<uint64_t> hostAvailable;  // MemAvailable
  std::optional<uint64_t> deviceFree;     // the backend's free device memory
  std::optional<uint64_t> diskFree;       // free bytes for unprivileged users under saveDir
  std::optional<uint64_t> stateDiskFree;  // the same under --disk-dir
};

PreflightNeeds preflightNeeds(const plan::Plan& plan, const Backend& backend, const std::string& saveDir,
                              const std::string& diskDir = "");

// Measures the machine: MemAvailable from `meminfo` (/proc/meminfo), the
// backend's free device memory, and statvfs of saveDir (or of its nearest
// existing parent, when the run would create it).
PreflightMachine probeMachine(const Backend& backend, const std::string& saveDir,
                              const std::string& meminfo = "/proc/meminfo", const std::string& diskDir = "");

// MemAvailable of a /proc/meminfo text, in bytes; nullopt if absent.
std::optional<uint64_t> parseMemAvailable(const std::string& meminfo);

// One phrase per shortfall, saying what is short and by how much, e.g.
// "the plan's pinned host pools need 1.20 TiB, this machine has 110 GiB
// available (short by 1.09 TiB)". Empty when everything fits.
// Checkpoints need room for two: the one being written beside the last good one.
std::vector<std::string> preflightShortfalls(const PreflightNeeds& needs, const PreflightMachine& machine);

// preflightShortfalls on this machine; if there are any, Error
// "preflight: <shortfalls joined by '; '> (--skip-preflight to try anyway)".
void runPreflight(const plan::Plan& plan, const Backend& backend, const std::string& saveDir,
                  const std::string& diskDir = "");

}  // namespace megatrain::runtime
