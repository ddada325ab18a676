// ToolMain.cpp - the top-level handler every megatrain tool's main() runs its body in.
#include "megatrain/plan/ToolMain.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <new>

namespace megatrain {

namespace {
thread_local const ToolActivity* innermost = nullptr;

// Why what the tool wrote to standard output did not all reach it: "" when it
// did. std::cout shares stdio's stdout (sync_with_stdio), so one flush serves
// both. A failing final flush names the reason; a failure earlier in the run
// (a write larger than the buffer goes to the file at once) leaves only the
// stream's error flag, and then a write of no bytes asks the file why
// (/dev/full, a closed descriptor) without writing anything.
std::string standardOutputFailure() {
  errno = 0;
  const bool flushFailed = std::fflush(stdout) != 0;
  const int flushError = errno;
  std::cout.flush();
  if (flushFailed && flushError != 0) return std::strerror(flushError);
  if (!flushFailed && !std::ferror(stdout) && !std::cout.bad()) return "";
  if (::write(STDOUT_FILENO, "", 0) < 0) return std::strerror(errno);
  return "a write failed";
}
}  // namespace

ToolActivity::ToolActivity(std::string what) : what_(std::move(what)), outer_(innermost) {
  innermost = this;
}

ToolActivity::~ToolActivity() { innermost = outer_; }

const std::string* currentToolActivity() { return innermost ? &innermost->what_ : nullptr; }

std::string toolErrorLine(const char* tool, std::exception_ptr error) {
  std::string message;
  try {
    std::rethrow_exception(error);
  } catch (const std::bad_alloc&) {
    message = "out of memory";
    if (const std::string* activity = currentToolActivity())
      message += " while " + *activity;
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
    message = "unexpected failure (an exception of unknown type)";
  }
  for (char& c : message)
    if (c == '\n' || c == '\r')
      c = ' ';
  return std::string(tool) + ": error: " + message;
}

int runTool(const char* tool, const std::function<int()>& body) {
  try {
    const int status = body();
    // Output that never arrived is a failure: `megatrain-inspect m.plan > /dev/full`
    // must not exit 0. A non-zero status (130 after Ctrl-C) is kept.
    const std::string failure = standardOutputFailure();
    if (failure.empty()) return status;
    std::fprintf(stderr, "%s: error: writing standard output: %s\n", tool, failure.c_str());
    return status != 0 ? status : 1;
  } catch (...) {
    std::exception_ptr error = std::current_exception();
    try {
      std::fprintf(stderr, "%s\n", toolErrorLine(tool, error).c_str());
    } catch (const std::bad_alloc&) {
      // No memory even for the line: say it without allocating.
      std::fprintf(stderr, "%s: error: out of memory\n", tool);
    }
  }
  return 1;
}

}  // namespace megatrain
