// ByteSize.h - the one size syntax of every megatrain tool's size flags (24GiB, 16000MB, 8GB, 1.5TiB, bytes).
#pragma once

#include <cstdint>
#include <string>

namespace megatrain {

// Parses a byte size: "24GiB", "16000MB", "8GB", "1.5TiB", "512 MiB", "123456" (bytes).
// Units are case-insensitive: B, KB, MB, GB, TB (powers of 1000; K, M, G, T alike) and
// KiB, MiB, GiB, TiB (powers of 1024); a fraction is allowed ("1.5GiB"). The result is
// at least one byte. False on anything else, and `bytes` is then untouched.
bool parseByteSize(const std::string& text, uint64_t& bytes);

// parseByteSize for the value of `flag`; an Error naming the flag and the syntax otherwise.
uint64_t parseSizeFlag(const std::string& text, const std::string& flag);

}  // namespace megatrain
