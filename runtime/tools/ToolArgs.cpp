// ToolArgs.cpp - command-line helpers shared by megatrain-run and megatrain-inspect.
#include "ToolArgs.h"

#include <exception>

#include "megatrain/plan/Error.h"

namespace megatrain::runtime::tools {

std::string ArgReader::take() {
  std::string arg = argv_[next_++];
  hasPending_ = false;
  const size_t equals = arg.find('=');
  if (arg.rfind("--", 0) == 0 && equals != std::string::npos) {
    pending_ = arg.substr(equals + 1);
    hasPending_ = true;
    arg.erase(equals);
  }
  return arg;
}

std::string ArgReader::value(const std::string& flag) {
  if (hasPending_) {
    hasPending_ = false;
    return pending_;
  }
  if (next_ >= argc_) throw Error(flag + " needs a value");
  return argv_[next_++];
}

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
