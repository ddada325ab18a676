// ToolMain.cpp - the top-level handler every megatrain tool's main() runs its body in.
#include "megatrain/plan/ToolMain.h"

#include <cstdio>
#include <new>

namespace megatrain {

namespace {
thread_local const ToolActivity* innermost = nullptr;
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
    return body();
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
