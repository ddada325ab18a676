// DiskTier.cpp - a plan's DISK pool as a file under --disk-dir, read and written with O_DIRECT over a few threads.
#include "megatrain/runtime/DiskTier.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "megatrain/plan/Error.h"
#include "megatrain/plan/Format.h"

namespace megatrain::runtime {
namespace {

bool blockAligned(uint64_t value) { return value % kDiskBlockBytes == 0; }
uint64_t roundDown(uint64_t value) { return value / kDiskBlockBytes * kDiskBlockBytes; }
uint64_t roundUp(uint64_t value) { return (value + kDiskBlockBytes - 1) / kDiskBlockBytes * kDiskBlockBytes; }

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<char, FreeDeleter>;

AlignedBuffer alignedBuffer(uint64_t bytes) {
  AlignedBuffer buffer(static_cast<char*>(std::aligned_alloc(kDiskBlockBytes, std::max<uint64_t>(bytes, kDiskBlockBytes))));
  if (!buffer) throw Error("disk tier: cannot allocate a bounce buffer of " + std::to_string(bytes) + " bytes");
  return buffer;
}

std::string bytesText(uint64_t bytes) { return formatBytes(bytes) + " (" + std::to_string(bytes) + " bytes)"; }

// The bytes an unprivileged writer may still put under `dir`, or -1 when unknown.
int64_t freeUnder(const std::string& dir) {
  struct statvfs info {};
  if (::statvfs(dir.c_str(), &info) != 0) return -1;
  return static_cast<int64_t>(info.f_bavail) * static_cast<int64_t>(info.f_frsize);
}

}  // namespace

unsigned diskThreadCount() {
  static const unsigned count = [] {
    const char* text = std::getenv("MEGATRAIN_DISK_THREADS");
    if (!text || !*text) return 4u;
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (*end != '\0' || value < 1 || value > 64)
      throw Error(std::string("MEGATRAIN_DISK_THREADS='") + text + "': expected a whole number from 1 to 64");
    return static_cast<unsigned>(value);
  }();
  return count;
}

DiskTier::DiskTier(const std::string& dir, const std::string& name, uint64_t bytes)
    : path_(dir + "/" + name + ".state"), bytes_(bytes), blocks_(roundUp(bytes)) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
  if (fd_ < 0) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR)
      throw Error("disk tier: --disk-dir '" + dir + "' is not a directory (" + std::strerror(error) +
                  "); create it, or pass --disk-dir an existing directory");
    throw Error("disk tier: cannot open '" + path_ + "' for direct I/O: " + std::strerror(error) +
                (error == EINVAL ? " (the file system under --disk-dir does not take O_DIRECT; pass --disk-dir a "
                                   "directory on a local disk)"
                                 : " (pass --disk-dir a directory this process can write)"));
  }
  auto failRoom = [&](const std::string& what, int error) {
    ::close(fd_);
    fd_ = -1;
    std::string text = "disk tier: " + what + " '" + path_ + "' to " + bytesText(blocks_) + ": " + std::strerror(error);
    if (error == ENOSPC || error == EFBIG || error == EDQUOT) {
      const int64_t free = freeUnder(dir);
      text += free >= 0 ? "; the disk under --disk-dir '" + dir + "' has " + bytesText(static_cast<uint64_t>(free)) +
                              " free"
                        : "";
      text += "; pass a --disk-dir with more room, or recompile with a smaller --disk-memory";
    }
    throw Error(text);
  };
  if (::ftruncate(fd_, static_cast<off_t>(blocks_)) != 0) failRoom("cannot size", errno);
  // Reserve the blocks now (a sparse file would run out of room in the middle
  // of a step); file systems without fallocate keep the sparse file.
  if (blocks_ > 0 && ::fallocate(fd_, 0, 0, static_cast<off_t>(blocks_)) != 0 && errno != EOPNOTSUPP &&
      errno != ENOSYS)
    failRoom("cannot reserve", errno);
}

DiskTier::~DiskTier() {
  if (fd_ >= 0) ::close(fd_);
}

void DiskTier::sync() {
  if (::fdatasync(fd_) != 0) throw Error("disk tier: fdatasync of '" + path_ + "': " + std::strerror(errno));
}

void DiskTier::transferRange(bool reading, uint64_t offset, char* buffer, uint64_t bytes) const {
  for (uint64_t done = 0; done < bytes;) {
    const ssize_t moved = reading ? ::pread(fd_, buffer + done, bytes - done, static_cast<off_t>(offset + done))
                                  : ::pwrite(fd_, buffer + done, bytes - done, static_cast<off_t>(offset + done));
    if (moved < 0 && errno == EINTR) continue;
    if (moved <= 0) {
      const int error = moved < 0 ? errno : 0;
      std::string text = std::string("disk tier: ") + (reading ? "reading" : "writing") + " '" + path_ + "' at " +
                         std::to_string(offset + done) + ": " +
                         (moved < 0 ? std::strerror(error) : reading ? "end of file" : "no progress");
      if (!reading) text += " (is the disk under --disk-dir full?)";
      throw Error(text);
    }
    done += static_cast<uint64_t>(moved);
  }
}

void DiskTier::transfer(bool reading, uint64_t offset, char* buffer, uint64_t bytes) const {
  const uint64_t chunks = (bytes + kDiskChunkBytes - 1) / kDiskChunkBytes;
  const unsigned threads = static_cast<unsigned>(std::min<uint64_t>(diskThreadCount(), chunks));
  if (threads <= 1) return transferRange(reading, offset, buffer, bytes);
  // Chunk i goes to thread i % threads: each thread walks the file forward.
  std::mutex errorMutex;
  std::string firstError;
  auto work = [&](unsigned thread) {
    try {
      for (uint64_t chunk = thread; chunk < chunks; chunk += threads) {
        const uint64_t begin = chunk * kDiskChunkBytes;
        transferRange(reading, offset + begin, buffer + begin, std::min<uint64_t>(kDiskChunkBytes, bytes - begin));
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(errorMutex);
      if (firstError.empty()) firstError = e.what();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (std::thread& thread : pool) thread.join();
  if (!firstError.empty()) throw Error(firstError);
}

void DiskTier::read(uint64_t offset, void* buffer, size_t bytes) const {
  if (offset > bytes_ || bytes > bytes_ - offset)
    throw Error("disk tier: read of " + std::to_string(bytes) + " bytes at " + std::to_string(offset) + " is past the " +
                std::to_string(bytes_) + " bytes of '" + path_ + "'");
  if (bytes == 0) return;
  if (blockAligned(offset) && blockAligned(reinterpret_cast<uintptr_t>(buffer)) && blockAligned(bytes))
    return transfer(true, offset, static_cast<char*>(buffer), bytes);
  const uint64_t begin = roundDown(offset), end = roundUp(offset + bytes);
  AlignedBuffer bounce = alignedBuffer(end - begin);
  transfer(true, begin, bounce.get(), end - begin);
  std::memcpy(buffer, bounce.get() + (offset - begin), bytes);
}

void DiskTier::write(uint64_t offset, const void* buffer, size_t bytes) {
  if (offset > bytes_ || bytes > bytes_ - offset)
    throw Error("disk tier: write of " + std::to_string(bytes) + " bytes at " + std::to_string(offset) +
                " is past the " + std::to_string(bytes_) + " bytes of '" + path_ + "'");
  if (bytes == 0) return;
  if (blockAligned(offset) && blockAligned(reinterpret_cast<uintptr_t>(buffer)) && blockAligned(bytes))
    return transfer(false, offset, static_cast<char*>(const_cast<void*>(buffer)), bytes);
  const uint64_t begin = roundDown(offset), end = roundUp(offset + bytes);
  AlignedBuffer bounce = alignedBuffer(end - begin);
  // Keep the bytes of the first and last blocks that the write does not cover
  // (the file is whole blocks long, so both are inside it).
  if (begin != offset) transferRange(true, begin, bounce.get(), kDiskBlockBytes);
  if (end != offset + bytes && (end - kDiskBlockBytes != begin || begin == offset))
    transferRange(true, end - kDiskBlockBytes, bounce.get() + (end - kDiskBlockBytes - begin), kDiskBlockBytes);
  std::memcpy(bounce.get() + (offset - begin), buffer, bytes);
  transfer(false, begin, bounce.get(), end - begin);
}

}  // namespace megatrain::runtime
