// ToolMainTest.cpp - the tools' top-level handler: every exception is one line and exit 1.
#include "megatrain/plan/Error.h"
#include "megatrain/plan/ToolMain.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <iostream>
#include <new>
#include <stdexcept>
#include <string>

namespace {

template <typename Thrower>
std::string lineFor(Thrower thrower) {
  try {
    thrower();
  } catch (...) {
    return megatrain::toolErrorLine("megatrain-x", std::current_exception());
  }
  return "(nothing thrown)";
}

TEST(ToolMain, ErrorIsItsMessage) {
  EXPECT_EQ(lineFor([] { throw megatrain::Error("plan: bad step"); }),
            "megatrain-x: error: plan: bad step");
}

// An exception megatrain does not throw itself (std::stoull's, say) still gives
// one line, newlines and all.
TEST(ToolMain, AnyStdExceptionIsOneLine) {
  EXPECT_EQ(lineFor([] { throw std::out_of_range("first\nsecond"); }),
            "megatrain-x: error: first second");
}

TEST(ToolMain, OutOfMemoryNamesTheActivity) {
  EXPECT_EQ(lineFor([] { throw std::bad_alloc(); }), "megatrain-x: error: out of memory");
  megatrain::ToolActivity outer("importing 'm.onnx'");
  {
    megatrain::ToolActivity inner("inlining functions");
    EXPECT_EQ(lineFor([] { throw std::bad_alloc(); }),
              "megatrain-x: error: out of memory while inlining functions");
  }
  EXPECT_EQ(lineFor([] { throw std::bad_alloc(); }),
            "megatrain-x: error: out of memory while importing 'm.onnx'");
}

TEST(ToolMain, UnknownExceptionType) {
  EXPECT_EQ(lineFor([] { throw 42; }),
            "megatrain-x: error: unexpected failure (an exception of unknown type)");
}

TEST(ToolMain, RunToolReturnsOneOnAnyException) {
  testing::internal::CaptureStderr();
  int status = megatrain::runTool("megatrain-x", []() -> int { throw std::bad_alloc(); });
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(status, 1);
  EXPECT_EQ(err, "megatrain-x: error: out of memory\n");
  EXPECT_EQ(megatrain::runTool("megatrain-x", [] { return 3; }), 3);
}

struct ToolRun {
  int status;
  std::string err;
};

// runTool(body) with file descriptor 1 on `path` (/dev/full: every write fails
// with ENOSPC) and stderr captured; stdout is put back before anything is checked.
ToolRun runWithStdoutOn(const char* path, const std::function<int()>& body) {
  std::fflush(stdout);
  std::cout.flush();
  const int saved = ::dup(STDOUT_FILENO);
  const int target = ::open(path, O_WRONLY);
  if (saved < 0 || target < 0) return {-1, std::string("cannot open ") + path};
  ::dup2(target, STDOUT_FILENO);
  ::close(target);
  testing::internal::CaptureStderr();
  const int status = megatrain::runTool("megatrain-x", body);
  std::string err = testing::internal::GetCapturedStderr();
  std::fflush(stdout);
  ::dup2(saved, STDOUT_FILENO);
  ::close(saved);
  std::clearerr(stdout);
  std::cout.clear();
  return {status, err};
}

const char kFullLine[] = "megatrain-x: error: writing standard output: No space left on device\n";

// The last flush fails: its errno is the reason.
TEST(ToolMain, AFailedWriteToStandardOutputIsAnError) {
  const ToolRun run = runWithStdoutOn("/dev/full", [] {
    std::printf("plan      m.plan\n");
    return 0;
  });
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.err, kFullLine);
}

// More than the stdio buffer: the write fails inside fputs, the final flush
// has nothing left to write, and the reason still comes out.
TEST(ToolMain, AnEarlierFailedWriteIsAnErrorToo) {
  const ToolRun run = runWithStdoutOn("/dev/full", [] {
    std::fputs(std::string(100000, 'x').c_str(), stdout);
    return 0;
  });
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.err, kFullLine);
}

TEST(ToolMain, StdCoutIsCheckedToo) {
  const ToolRun run = runWithStdoutOn("/dev/full", [] {
    std::cout << "usage: megatrain-x\n";
    return 0;
  });
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.err, kFullLine);
}

// A tool's own non-zero status (130 after Ctrl-C) is kept; the line is still printed.
TEST(ToolMain, AFailedWriteKeepsANonZeroStatus) {
  const ToolRun run = runWithStdoutOn("/dev/full", [] {
    std::printf("interrupted by SIGINT after step 3\n");
    return 130;
  });
  EXPECT_EQ(run.status, 130);
  EXPECT_EQ(run.err, kFullLine);
}

// Nothing written, or everything written: no error.
TEST(ToolMain, OutputThatArrivesIsNoError) {
  ToolRun run = runWithStdoutOn("/dev/null", [] {
    std::fputs(std::string(100000, 'x').c_str(), stdout);
    std::cout << "done\n";
    return 0;
  });
  EXPECT_EQ(run.status, 0);
  EXPECT_EQ(run.err, "");
  run = runWithStdoutOn("/dev/full", [] { return 0; });
  EXPECT_EQ(run.status, 0);
  EXPECT_EQ(run.err, "");
}

// An exception is reported as before (one line), whatever became of stdout.
TEST(ToolMain, AnExceptionIsStillOneLine) {
  const ToolRun run = runWithStdoutOn("/dev/full", []() -> int {
    std::printf("step 1/3\n");
    throw megatrain::Error("m.plan: bad step");
  });
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.err, "megatrain-x: error: m.plan: bad step\n");
}

}  // namespace
