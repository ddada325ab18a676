// DiskTierTest.cpp - the disk tier's file I/O shared by every backend: aligned and unaligned transfers, the threaded path, and clear errors for a missing directory or a disk without room.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "TestUtil.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/DiskRates.h"
#include "megatrain/runtime/DiskTier.h"

namespace megatrain::runtime::testing {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Aligned = std::unique_ptr<unsigned char, FreeDeleter>;

Aligned aligned(size_t bytes) { return Aligned(static_cast<unsigned char*>(std::aligned_alloc(kDiskBlockBytes, bytes))); }

void fill(unsigned char* p, size_t bytes, unsigned seed) {
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>((i * 2654435761u + seed) >> 7);
}

// A fresh directory, removed with what the test left in it.
struct ScratchDir {
  std::string path = makeTempDir();
  ~ScratchDir() { std::filesystem::remove_all(path); }
};

std::string errorOf(const std::function<void()>& run) {
  try {
    run();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// More than two chunks: the transfer is split over the threads.
TEST(DiskTier, AlignedRoundTripOverThreads) {
  const ScratchDir scratch;
  const std::string& dir = scratch.path;
  const size_t bytes = 2 * kDiskChunkBytes + 5 * kDiskBlockBytes;
  DiskTier file(dir, "pool", bytes + kDiskBlockBytes);
  EXPECT_EQ(file.path(), dir + "/pool.state");
  Aligned out = aligned(bytes), in = aligned(bytes);
  fill(out.get(), bytes, 1);
  file.write(kDiskBlockBytes, out.get(), bytes);
  std::memset(in.get(), 0, bytes);
  file.read(kDiskBlockBytes, in.get(), bytes);
  EXPECT_EQ(std::memcmp(out.get(), in.get(), bytes), 0);
}

// Odd offsets and lengths go through a bounce buffer and keep the bytes around
// them, including in a last block the pool only partly covers.
TEST(DiskTier, UnalignedWritesKeepTheirNeighbours) {
  const ScratchDir scratch;
  const std::string& dir = scratch.path;
  const size_t bytes = 3 * kDiskBlockBytes + 1000;  // not whole blocks
  DiskTier file(dir, "odd", bytes);
  std::vector<unsigned char> all(bytes), piece(5000), back(bytes);
  fill(all.data(), bytes, 2);
  file.write(0, all.data(), bytes);
  fill(piece.data(), piece.size(), 3);
  file.write(100, piece.data(), 10);                       // inside one block
  file.write(kDiskBlockBytes - 7, piece.data(), 5000);     // across a block boundary
  file.write(bytes - 1500, piece.data(), 1500);            // to the pool's end
  std::memcpy(all.data() + 100, piece.data(), 10);
  std::memcpy(all.data() + kDiskBlockBytes - 7, piece.data(), 5000);
  std::memcpy(all.data() + bytes - 1500, piece.data(), 1500);
  file.read(0, back.data(), bytes);
  EXPECT_EQ(back, all);
  unsigned char middle[33];
  file.read(kDiskBlockBytes + 11, middle, sizeof middle);
  EXPECT_EQ(std::memcmp(middle, all.data() + kDiskBlockBytes + 11, sizeof middle), 0);
}

TEST(DiskTier, RefusesTransfersPastTheEnd) {
  const ScratchDir scratch;
  DiskTier file(scratch.path, "small", 2 * kDiskBlockBytes);
  Aligned buffer = aligned(3 * kDiskBlockBytes);
  EXPECT_NE(errorOf([&] { file.read(kDiskBlockBytes, buffer.get(), 2 * kDiskBlockBytes); }).find("is past the 8192 bytes"),
            std::string::npos);
  EXPECT_NE(errorOf([&] { file.write(~uint64_t{0} - 10, buffer.get(), 100); }).find("is past the"), std::string::npos);
}

TEST(DiskTier, AMissingDirectoryNamesTheFlag) {
  const ScratchDir scratch;
  const std::string dir = scratch.path + "/not-there";
  const std::string what = errorOf([&] { DiskTier file(dir, "pool", kDiskBlockBytes); });
  EXPECT_NE(what.find("--disk-dir '" + dir + "' is not a directory"), std::string::npos) << what;
}

// A disk without room for the pool (here: a file size limit, which the file
// system reports as it reports a full disk) fails when the file is made, with
// the numbers and both flags, not in the middle of a step.
TEST(DiskTier, ADiskWithoutRoomNamesBothFlags) {
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto previous = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 1 << 20;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const ScratchDir scratch;
  const std::string what = errorOf([&] { DiskTier file(scratch.path, "big", uint64_t{64} << 20); });
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, previous);
  EXPECT_NE(what.find("64.0 MiB (67108864 bytes)"), std::string::npos) << what;
  EXPECT_NE(what.find("pass a --disk-dir with more room, or recompile with a smaller --disk-memory"),
            std::string::npos)
      << what;
}

TEST(DiskTier, RatesAreMeasuredAndTheScratchFileRemoved) {
  const std::string dir = makeTempDir();
  const DiskRates rates = measureDiskRates(dir, 4 << 20, 1 << 20);
  EXPECT_GT(rates.readBytesPerS, 0);
  EXPECT_GT(rates.writeBytesPerS, 0);
  EXPECT_NE(::access(dir.c_str(), F_OK), -1);
  EXPECT_EQ(::rmdir(dir.c_str()), 0) << "the scratch file was left in " << dir;
}

}  // namespace
}  // namespace megatrain::runtime::testing
