// ToolMainTest.cpp - the tools' top-level handler: every exception is one line and exit 1.
#include "megatrain/plan/Error.h"
#include "megatrain/plan/ToolMain.h"

#include <gtest/gtest.h>

#include <new>
#include <stdexcept>

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

}  // namespace
