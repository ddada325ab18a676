// Error.h - the exception every user-facing runtime failure is reported with.
#pragma once

#include <stdexcept>
#include <string>

namespace megatrain::runtime {

// One line that names what failed (file, step, tensor) and why. The tools print
// it as `<tool>: error: <message>`; nothing in the runtime aborts on bad input.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace megatrain::runtime
