// AtomicFileTest.cpp - atomic writes replace regular files only; device nodes, FIFOs and write errors are handled.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "megatrain/plan/AtomicFile.h"
#include "megatrain/plan/Error.h"

namespace megatrain {
namespace {

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/atomic_file_test.XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The entries of dir_, to see that no temp file is left behind.
  int entries() const {
    int n = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir_)) ++n;
    return n;
  }

  std::string dir_;
};

TEST_F(AtomicFileTest, ReplacesARegularFileWhole) {
  const std::string path = dir_ + "/out.bin";
  writeFileAtomically(path, "old");
  writeFileAtomically(path, "new bytes");
  EXPECT_EQ(readAll(path), "new bytes");
  EXPECT_EQ(entries(), 1);
}

// As root, renaming a temp file over /dev/null would make it a regular file.
TEST_F(AtomicFileTest, DevNullIsWrittenInPlaceAndStaysADevice) {
  writeFileAtomically("/dev/null", std::string(100000, 'x'));
  struct stat info;
  ASSERT_EQ(::stat("/dev/null", &info), 0);
  EXPECT_TRUE(S_ISCHR(info.st_mode));
}

// /dev/full fails every write with ENOSPC: a full disk is an error, not a success.
TEST_F(AtomicFileTest, WriteErrorsAreErrors) {
  try {
    writeFileAtomically("/dev/full", "bytes");
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "/dev/full: write failed: No space left on device");
  }
}

TEST_F(AtomicFileTest, AFifoGetsTheBytesAndStaysAFifo) {
  const std::string fifo = dir_ + "/pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] { received = readAll(fifo); });
  writeFileAtomically(fifo, "through the pipe");
  reader.join();
  EXPECT_EQ(received, "through the pipe");
  struct stat info;
  ASSERT_EQ(::stat(fifo.c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode));
  EXPECT_EQ(entries(), 1);
}

TEST_F(AtomicFileTest, ADirectoryIsRefused) {
  try {
    writeFileAtomically(dir_, "bytes");
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), dir_ + ": is a directory, not a file to write");
  }
}

// The link stays a link; the file it names gets the bytes.
TEST_F(AtomicFileTest, ASymlinkKeepsPointingAtTheReplacedFile) {
  const std::string target = dir_ + "/target.bin", link = dir_ + "/link.bin";
  writeFileAtomically(target, "old");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  writeFileAtomically(link, "new");
  struct stat info;
  ASSERT_EQ(::lstat(link.c_str(), &info), 0);
  EXPECT_TRUE(S_ISLNK(info.st_mode));
  EXPECT_EQ(readAll(target), "new");
  EXPECT_EQ(entries(), 2);
}

TEST_F(AtomicFileTest, AnUncommittedFileLeavesTheOldOne) {
  const std::string path = dir_ + "/out.bin";
  writeFileAtomically(path, "old");
  {
    AtomicFile file(path);
    file.write("half", 4);
  }
  EXPECT_EQ(readAll(path), "old");
  EXPECT_EQ(entries(), 1);
}

}  // namespace
}  // namespace megatrain
