// DiskTier.cpp - a plan's DISK pool as a file under --disk-dir, read and written with O_DIRECT.
#include "megatrain/runtime/DiskTier.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "megatrain/plan/Error.h"

namespace megatrain::runtime {
namespace {

bool blockAligned(uint64_t value) { return value % kDiskBlockBytes == 0; }

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

}  // namespace

DiskTier::DiskTier(const std::string& dir, const std::string& name, uint64_t bytes)
    : path_(dir + "/" + name + ".state"), bytes_(bytes) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
  if (fd_ < 0)
    throw Error("disk tier: cannot open '" + path_ + "' for direct I/O: " + std::strerror(errno) +
                " (--disk-dir names a directory on a filesystem that supports O_DIRECT)");
  const off_t size = static_cast<off_t>((bytes + kDiskBlockBytes - 1) / kDiskBlockBytes * kDiskBlockBytes);
  if (::ftruncate(fd_, size) != 0) {
    const int error = errno;
    ::close(fd_);
    throw Error("disk tier: cannot size '" + path_ + "' to " + std::to_string(size) + " bytes: " + std::strerror(error));
  }
}

DiskTier::~DiskTier() {
  if (fd_ >= 0) ::close(fd_);
}

void DiskTier::read(uint64_t offset, void* buffer, size_t bytes) const {
  if (offset + bytes > bytes_)
    throw Error("disk tier: read of " + std::to_string(bytes) + " bytes at " + std::to_string(offset) + " is past the " +
                std::to_string(bytes_) + " bytes of '" + path_ + "'");
  const uint64_t begin = offset / kDiskBlockBytes * kDiskBlockBytes;
  const uint64_t end = (offset + bytes + kDiskBlockBytes - 1) / kDiskBlockBytes * kDiskBlockBytes;
  const bool direct = offset == begin && blockAligned(reinterpret_cast<uintptr_t>(buffer)) && blockAligned(bytes);
  std::unique_ptr<void, FreeDeleter> bounce(direct ? nullptr : std::aligned_alloc(kDiskBlockBytes, end - begin));
  char* target = direct ? static_cast<char*>(buffer) : static_cast<char*>(bounce.get());
  if (!target) throw Error("disk tier: cannot allocate a bounce buffer of " + std::to_string(end - begin) + " bytes");
  for (uint64_t done = 0; done < end - begin;) {
    const ssize_t got = ::pread(fd_, target + done, end - begin - done, static_cast<off_t>(begin + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      throw Error("disk tier: reading '" + path_ + "' at " + std::to_string(begin + done) + ": " +
                  (got < 0 ? std::strerror(errno) : "end of file"));
    done += static_cast<uint64_t>(got);
  }
  if (!direct) std::memcpy(buffer, target + (offset - begin), bytes);
}

void DiskTier::write(uint64_t offset, const void* buffer, size_t bytes) {
  if (offset + bytes > bytes_)
    throw Error("disk tier: write of " + std::to_string(bytes) + " bytes at " + std::to_string(offset) +
                " is past the " + std::to_string(bytes_) + " bytes of '" + path_ + "'");
  const uint64_t begin = offset / kDiskBlockBytes * kDiskBlockBytes;
  const uint64_t end = (offset + bytes + kDiskBlockBytes - 1) / kDiskBlockBytes * kDiskBlockBytes;
  const bool direct = offset == begin && blockAligned(reinterpret_cast<uintptr_t>(buffer)) && blockAligned(bytes);
  std::unique_ptr<void, FreeDeleter> bounce(direct ? nullptr : std::aligned_alloc(kDiskBlockBytes, end - begin));
  const char* source = static_cast<const char*>(buffer);
  if (!direct) {
    if (!bounce) throw Error("disk tier: cannot allocate a bounce buffer of " + std::to_string(end - begin) + " bytes");
    // Keep the bytes of the first and last blocks that the write does not cover.
    read(begin, bounce.get(), end - begin);
    std::memcpy(static_cast<char*>(bounce.get()) + (offset - begin), buffer, bytes);
    source = static_cast<const char*>(bounce.get());
  }
  for (uint64_t done = 0; done < end - begin;) {
    const ssize_t put = ::pwrite(fd_, source + done, end - begin - done, static_cast<off_t>(begin + done));
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0)
      throw Error("disk tier: writing '" + path_ + "' at " + std::to_string(begin + done) + ": " +
                  (put < 0 ? std::strerror(errno) : "no progress") + " (is the disk under --disk-dir full?)");
    done += static_cast<uint64_t>(put);
  }
}

}  // namespace megatrain::runtime
