// Error.h - the exception every user-facing failure of the runtime and the plan library is reported with.
#pragma once

#include <stdexcept>
#include <string>

namespace megatrain {

// One line that names what failed (file, step, tensor) and why. The tools print
// it as `<tool>: error: <message>`; nothing in the runtime aborts on bad input.
// One type for both sides, so a tool's one catch sees an AtomicFile failure as
// it sees the runtime's own.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace megatrain
