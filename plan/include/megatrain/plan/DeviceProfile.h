//===- DeviceProfile.h - the machine figures the cost model runs on -------===//
//
// What the planner knows about the machine: achievable matmul rates per
// precision, memory and link bandwidths, host optimizer throughput. The
// defaults are the H200 figures of docs/hardware.md; `megatrain-compile
// --device-profile FILE` reads a JSON object with any subset of the fields
// below (the rest keep their defaults). docs/tiering.md lists the fields.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_COST_DEVICEPROFILE_H
#define MEGATRAIN_COST_DEVICEPROFILE_H

#include <cstdint>
#include <map>
#include <string>

namespace megatrain {

enum class Precision { FP32, TF32, BF16 };

struct DeviceProfile {
  std::string name = "h200-default";
  // Dense matmul throughput, FLOP/s, per compute precision.
  double matmulFp32 = 51e12;
  double matmulTf32 = 395e12;
  double matmulBf16 = 777e12;
  // Device memory bandwidth, bytes/s counted as bytes read + bytes written.
  double hbmBytesPerS = 4.2e12;
  // Pinned host <-> device links, bytes/s, one direction at a time, and the
  // total when both directions run at once.
  double h2dBytesPerS = 54.2e9;
  double d2hBytesPerS = 55.0e9;
  double duplexBytesPerS = 83.4e9;
  // Host AdamW update rate (parameters per second, all host threads).
  double hostAdamWParamsPerS = 3.5e9;
  // Host memory bandwidth (bytes/s), for host-side accumulation.
  double hostBytesPerS = 90.8e9;
  // Disk, direct I/O: the disk tier's copies (the plan simulator prices them).
  double diskReadBytesPerS = 1.4e9;
  double diskWriteBytesPerS = 1.6e9;
  // Fixed cost of one kernel launch / one copy, seconds.
  double launchS = 4e-6;
  // Device memory on the card, bytes (the default budget is this minus the
  // fixed workspace).
  uint64_t deviceMemoryBytes = 141ull * 1000 * 1000 * 1000;
  // Host memory of the machine, bytes (the H200 machine of docs/hardware.md:
  // 125 GiB); the default host capacity for training state is this minus
  // kHostMemoryMargin.
  uint64_t hostMemoryBytes = 125ull << 30;
  // Per kernel family (the plan's kernel name: "matmul", "pointwise", ...),
  // the fraction of its roofline price (or, for the fused attention, of its
  // fitted price) that the runtime's kernel reaches, fitted from a traced
  // step by bench/fit_profile.py; a family not named here gets 1.
  std::map<std::string, double> kernelEfficiency;

  double efficiencyOf(const std::string &kernel) const {
    auto it = kernelEfficiency.find(kernel);
    return it == kernelEfficiency.end() ? 1.0 : it->second;
  }

  double matmulRate(Precision precision) const {
    switch (precision) {
    case Precision::TF32:
      return matmulTf32;
    case Precision::BF16:
      return matmulBf16;
    default:
      return matmulFp32;
    }
  }
};

/// What megatrain-compile keeps free of the profile's memories by default
/// (docs/tiering.md, "State homes"): on the device the CUDA context and the
/// backend's fixed 1 GiB workspace; on the host the OS, the process and its
/// data.
inline constexpr uint64_t kDeviceMemoryMargin = 4ull << 30;
inline constexpr uint64_t kHostMemoryMargin = 16ull << 30;

/// The default device capacity (arena plus device state) and host capacity.
inline uint64_t defaultDeviceCapacity(const DeviceProfile &profile) {
  return profile.deviceMemoryBytes > kDeviceMemoryMargin
             ? profile.deviceMemoryBytes - kDeviceMemoryMargin
             : 0;
}
inline uint64_t defaultHostCapacity(const DeviceProfile &profile) {
  return profile.hostMemoryBytes > kHostMemoryMargin
             ? profile.hostMemoryBytes - kHostMemoryMargin
             : 0;
}

/// Reads a profile from JSON text; fields absent keep their defaults. On
/// failure returns false and sets `error` (names the field).
bool parseDeviceProfile(const std::string &json, DeviceProfile &profile,
                        std::string &error);

/// Reads FILE; errors name the file.
bool loadDeviceProfile(const std::string &path, DeviceProfile &profile,
                       std::string &error);

/// The profile as JSON (every field), e.g. to record it in a plan header.
std::string deviceProfileToJson(const DeviceProfile &profile);

} // namespace megatrain

#endif // MEGATRAIN_COST_DEVICEPROFILE_H
