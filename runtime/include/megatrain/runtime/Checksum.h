// Checksum.h - CRC-32 for checkpoint integrity and FNV-1a 64 for file identity.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace megatrain::runtime {

// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), computed by zlib
// (crc32_z, any size in one call), so Python's zlib.crc32 checks a checkpoint
// without megatrain. Pass the previous result as `crc` to continue over more
// bytes; start from 0. A size of 0 returns `crc` (`bytes` may then be null).
uint32_t crc32(const void* bytes, size_t size, uint32_t crc = 0);

// FNV-1a 64 over bytes; continue from a previous result, starting from
// kFnv1a64Offset.
inline constexpr uint64_t kFnv1a64Offset = 0xcbf29ce484222325ull;
uint64_t fnv1a64(const void* bytes, size_t size, uint64_t hash = kFnv1a64Offset);

// FNV-1a 64 of a whole file's bytes (a plan's identity in its checkpoints).
// Error naming the file if it cannot be read.
uint64_t hashFile(const std::string& path);

}  // namespace megatrain::runtime
