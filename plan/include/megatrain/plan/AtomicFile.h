// AtomicFile.h - writes a file that readers see either whole or not at all (temp, fsync, rename).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace megatrain {

// Bytes go to `<path>.tmp.<pid>` in the same directory; commit() flushes them
// to disk, renames the temporary over `path` and syncs the directory, so a
// crash or an error part-way leaves the previous file (or none), never half of
// one. Destroying an uncommitted AtomicFile removes the temporary. Errors
// throw Error naming the file; a failed write (ENOSPC, ...), fsync or close
// is one. Not thread-safe.
//
// Only a regular file (or a new path) is replaced: a symlink's target is
// replaced, not the link; an existing device node, FIFO or socket (/dev/null,
// /dev/stdout) is opened and written in place, without a temporary, so it
// survives; a directory is refused.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* bytes, size_t size);
  // Appends zero bytes until the file size is a multiple of `alignment`.
  void padTo(uint64_t alignment);
  uint64_t size() const { return size_; }

  void commit();

 private:
  std::string path_;
  std::string target_;  // the file renamed over: path_, or what its symlink names
  std::string temp_;
  bool direct_ = false;  // writing path_ itself (not a regular file)
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The whole of `bytes` written to `path` through an AtomicFile.
void writeFileAtomically(const std::string& path, const std::string& bytes);

}  // namespace megatrain
