// Format.h - human-readable numbers for the compiler's and the runtime's messages.
#pragma once

#include <cstdint>
#include <string>

namespace megatrain {

// "512 B", "1.5 KiB", "12.0 MiB", "3.25 GiB".
std::string formatBytes(uint64_t bytes);

// "1,234,567".
std::string formatCount(uint64_t count);

}  // namespace megatrain
