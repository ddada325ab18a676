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
//
// One implementation for every backend: the CPU backend calls read()/write()
// from its copy steps, the CUDA backend from its disk I/O thread
// (runtime/cuda/CudaBackendDisk.cpp), megatrain-profile times it for the
// profile's disk figures. A transfer of at least two chunks (8 MiB each) is
// split over several threads (diskThreadCount()), each a plain pread/pwrite of
// its chunks, which is what a disk needs to reach its rate with direct I/O.
//
// Thread safety: read() and write() of disjoint ranges may run concurrently
// (pread/pwrite on one descriptor); the rest is not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace megatrain::runtime {

inline constexpr size_t kDiskBlockBytes = 4096;
// The unit one thread reads or writes at a time.
inline constexpr size_t kDiskChunkBytes = size_t(8) << 20;

// The threads one transfer uses: MEGATRAIN_DISK_THREADS when set (1 to 64;
// Error otherwise), else 4. Read once, on the first call.
unsigned diskThreadCount();

class DiskTier {
 public:
  // Creates `<dir>/<name>.state` (or opens the one there) at `bytes` rounded
  // up to whole blocks and reserves its blocks (fallocate, where the file
  // system has it), so a disk without room fails here, not in a step. Throws
  // an Error naming the path, the numbers and the flags (--disk-dir,
  // --disk-memory) when the directory is missing, does not take O_DIRECT or
  // has no room.
  DiskTier(const std::string& dir, const std::string& name, uint64_t bytes);
  ~DiskTier();
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  // `bytes` at `offset` to or from `buffer`: direct when all three are block
  // aligned (the plan's staged copies), else through a bounce buffer.
  void read(uint64_t offset, void* buffer, size_t bytes) const;
  void write(uint64_t offset, const void* buffer, size_t bytes);

  // fdatasync: what write() returned is on the device.
  void sync();

  const std::string& path() const { return path_; }
  uint64_t size() const { return bytes_; }

 private:
  // Whole blocks between the file and an aligned buffer, over the threads.
  void transfer(bool reading, uint64_t offset, char* buffer, uint64_t bytes) const;
  void transferRange(bool reading, uint64_t offset, char* buffer, uint64_t bytes) const;

  std::string path_;
  int fd_ = -1;
  uint64_t bytes_ = 0;    // the pool's bytes
  uint64_t blocks_ = 0;   // the file's size: bytes_ rounded up to whole blocks
};

}  // namespace megatrain::runtime
