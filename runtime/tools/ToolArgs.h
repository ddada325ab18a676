// ToolArgs.h - the flag value parsers the runtime tools share (the command line itself is ToolCli.h's CLI11).
#pragma once

#include <cstdint>
#include <string>

namespace megatrain::runtime::tools {

// A positive integer for `flag`; Error otherwise.
int64_t parsePositive(const std::string& text, const std::string& flag);

}  // namespace megatrain::runtime::tools
