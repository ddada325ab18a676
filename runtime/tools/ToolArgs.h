// ToolArgs.h - command-line helpers shared by megatrain-run and megatrain-inspect.
#pragma once

#include <cstdint>
#include <string>

namespace megatrain::runtime::tools {

// Walks argv: flags as `--name value` or `--name=value`, anything else positional.
class ArgReader {
 public:
  ArgReader(int argc, char** argv) : argc_(argc), argv_(argv) {}

  bool done() const { return next_ >= argc_; }
  // The next argument; for `--name=value` just `--name` (the value is kept for value()).
  std::string take();
  // The value of the flag just taken; Error if there is none.
  std::string value(const std::string& flag);

 private:
  int argc_;
  char** argv_;
  int next_ = 1;
  std::string pending_;  // the part after '=' of the last flag
  bool hasPending_ = false;
};

// A positive integer for `flag`; Error otherwise.
int64_t parsePositive(const std::string& text, const std::string& flag);

}  // namespace megatrain::runtime::tools
