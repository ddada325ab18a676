// DiskTier.h - a plan's DISK pool as a file under --disk-dir, read and written with O_DIRECT.
//
// Disk-resident optimizer state (docs/tiering.md "State homes") lives in one
// file per DISK pool, `<dir>/<pool name>.state`, created at the pool's size.
// Every transfer is a whole number of 4 KiB blocks at a 4 KiB-aligned offset
// into a 4 KiB-aligned host buffer, as O_DIRECT requires: the plan places
// disk tensors and their staging so (HostTaskEmitter.cpp), and reads and
// writes of other shapes (checkpoints, weight loading) go through an aligned
// bounce buffer here. The page cache is bypassed, so the disk's own rate is
// what a step sees, as the cost model assumes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace megatrain::runtime {

inline constexpr size_t kDiskBlockBytes = 4096;

class DiskTier {
 public:
  // Creates (or truncates to `bytes`) `<dir>/<name>.state`. Throws naming the
  // path and the flag (--disk-dir) when the directory cannot hold it.
  DiskTier(const std::string& dir, const std::string& name, uint64_t bytes);
  ~DiskTier();
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  // `bytes` at `offset` to or from `buffer`: direct when all three are block
  // aligned (the plan's staged copies), else through a bounce buffer.
  void read(uint64_t offset, void* buffer, size_t bytes) const;
  void write(uint64_t offset, const void* buffer, size_t bytes);

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t bytes_ = 0;
};

}  // namespace megatrain::runtime
