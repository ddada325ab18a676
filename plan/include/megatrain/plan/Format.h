// Format.h - human-readable numbers for the compiler's and the runtime's messages.
#pragma once

#include <cstdint>
#include <string>

namespace megatrain {

// "512 B", "1.5 KiB", "12.0 MiB", "3.25 GiB".
std::string formatBytes(uint64_t bytes);

// "1,234,567".
std::string formatCount(uint64_t count);

// A byte size as every tool's flags take it: "24GiB", "16000MB", "8GB", "512MiB",
// "123456" (bytes); units case-insensitive (B, KB, MB, GB, TB powers of 1000;
// KiB, MiB, GiB, TiB powers of 1024), an optional fraction ("1.5GiB"). False
// on bad text or a size below one byte.
bool parseByteSize(const std::string &text, uint64_t &bytes);

}  // namespace megatrain
