// DiskRates.h - the disk tier's own read and write rates under a directory: what megatrain-profile puts in the profile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace megatrain::runtime {

struct DiskRates {
  double readBytesPerS = 0;
  double writeBytesPerS = 0;
};

// Writes a scratch file of `bytes` (rounded down to whole transfers, at least
// one) under `dir` through DiskTier, as the disk tier writes state (O_DIRECT,
// aligned, transfers of `transferBytes` over diskThreadCount() threads), syncs
// it, reads it back, and removes it. Each rate is bytes over the time of its
// pass, the write's including the sync. Throws an Error naming the path on
// any failure (the file is removed first).
DiskRates measureDiskRates(const std::string& dir, uint64_t bytes, size_t transferBytes = size_t(64) << 20);

}  // namespace megatrain::runtime
