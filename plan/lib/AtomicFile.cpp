// AtomicFile.cpp - writes a file that readers see either whole or not at all (temp, fsync, rename).
#include "megatrain/plan/AtomicFile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "megatrain/plan/Error.h"

namespace megatrain {
namespace {

std::string systemError() { return std::strerror(errno); }

std::string directoryOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  struct stat info;
  if (::stat(path_.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode)) throw Error(path_ + ": is a directory, not a file to write");
    if (!S_ISREG(info.st_mode)) {
      // A device node, FIFO or socket: renaming a temp file over it would
      // replace it with a regular file (as root, -o /dev/null would), so the
      // bytes go to it directly and nothing is atomic.
      fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd_ < 0) throw Error(path_ + ": cannot open for writing (" + systemError() + ")");
      direct_ = true;
      return;
    }
    // A symlink to a regular file: replace the file it names, not the link.
    char resolved[PATH_MAX];
    if (::realpath(path_.c_str(), resolved) != nullptr) target_ = resolved;
  }
  if (target_.empty()) target_ = path_;
  temp_ = target_ + ".tmp." + std::to_string(::getpid());
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(path_ + ": cannot write (" + temp_ + ": " + systemError() + ")");
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    if (!direct_) ::unlink(temp_.c_str());
  }
}

void AtomicFile::write(const void* bytes, size_t size) {
  const char* next = static_cast<const char*>(bytes);
  while (size > 0) {
    // write() may take less than asked (and Linux caps one call near 2 GiB).
    const ssize_t done = ::write(fd_, next, size);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) throw Error(path_ + ": write failed: " + systemError());
    next += done;
    size -= static_cast<size_t>(done);
    size_ += static_cast<uint64_t>(done);
  }
}

void AtomicFile::padTo(uint64_t alignment) {
  static const char zeros[64] = {};
  while (size_ % alignment != 0) {
    const uint64_t missing = alignment - size_ % alignment;
    write(zeros, static_cast<size_t>(missing < sizeof zeros ? missing : sizeof zeros));
  }
}

void AtomicFile::commit() {
  if (direct_) {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw Error(path_ + ": close failed: " + systemError());
    return;
  }
  if (::fsync(fd_) != 0) throw Error(path_ + ": fsync failed: " + systemError());
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    ::unlink(temp_.c_str());
    throw Error(path_ + ": close failed: " + systemError());
  }
  if (::rename(temp_.c_str(), target_.c_str()) != 0) {
    const std::string why = systemError();
    ::unlink(temp_.c_str());
    throw Error(path_ + ": cannot rename " + temp_ + " over it: " + why);
  }
  // The rename itself is durable only once the directory is synced.
  const int dir = ::open(directoryOf(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

void writeFileAtomically(const std::string& path, const std::string& bytes) {
  AtomicFile file(path);
  file.write(bytes.data(), bytes.size());
  file.commit();
}

}  // namespace megatrain
