// ToolArgs.cpp - the flag value parsers the runtime tools share.
#include "ToolArgs.h"

#include <exception>

#include "megatrain/plan/Error.h"

namespace megatrain::runtime::tools {

int64_t parsePositive(const std::string& text, const std::string& flag) {
  size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || value <= 0)
    throw Error(flag + " needs a positive integer, got '" + text + "'");
  return value;
}

}  // namespace megatrain::runtime::tools
