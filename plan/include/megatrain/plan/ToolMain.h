// ToolMain.h - the top-level handler every megatrain tool's main() runs its body in.
#pragma once

#include <exception>
#include <functional>
#include <string>

namespace megatrain {

// Runs body and returns its exit status. Any exception it lets out (megatrain::Error,
// any std::exception, std::bad_alloc, anything else) becomes one line on stderr,
// `<tool>: error: <message>`, and exit status 1: a tool never dies of an uncaught
// exception, whatever the input. When body returns, standard output (stdio's stdout
// and std::cout) is flushed; if any of it failed to be written (a full disk, /dev/full,
// a closed descriptor), that is one line too, `<tool>: error: writing standard output:
// No space left on device`, and the status is 1 (or body's, if that was not 0).
// Output written around stdio (llvm::outs()) is the tool's to check. Both the compiler
// and the runtime tools call it.
int runTool(const char* tool, const std::function<int()>& body);

// The line runTool prints for `error` (without the newline): `<tool>: error: <message>`,
// newlines in the message turned into spaces, and for std::bad_alloc
// `<tool>: error: out of memory while <activity>` when a ToolActivity is open.
std::string toolErrorLine(const char* tool, std::exception_ptr error);

// Names what the tool is doing for as long as it lives ("importing 'm.onnx'"), so
// that running out of memory says where. Scopes nest; the innermost is named.
class ToolActivity {
 public:
  explicit ToolActivity(std::string what);
  ~ToolActivity();
  ToolActivity(const ToolActivity&) = delete;
  ToolActivity& operator=(const ToolActivity&) = delete;

 private:
  std::string what_;
  const ToolActivity* outer_;
  friend const std::string* currentToolActivity();
};

// The innermost open ToolActivity's text, or null.
const std::string* currentToolActivity();

}  // namespace megatrain
