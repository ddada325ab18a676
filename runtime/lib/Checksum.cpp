// Checksum.cpp - CRC-32 (zlib's) for checkpoint integrity and FNV-1a 64 for file identity.
#include "megatrain/runtime/Checksum.h"

#include <zlib.h>

#include <fstream>
#include <vector>

#include "megatrain/plan/Error.h"

// crc32_z (zlib 1.2.9) takes the length as z_size_t, which is size_t wherever
// zlib is built with a standard library: a checkpoint of any size goes in one
// call, without cutting it into the pieces of under 4 GiB that crc32's uInt
// length would need.
#if !defined(ZLIB_VERNUM) || ZLIB_VERNUM < 0x1290
#error "megatrain needs zlib 1.2.9 or newer (crc32_z)"
#endif
static_assert(sizeof(z_size_t) >= sizeof(size_t), "zlib's crc32_z must take any size_t length");

namespace megatrain::runtime {

uint32_t crc32(const void* bytes, size_t size, uint32_t crc) {
  // zlib answers a null buffer with its initial value (0), not with `crc`.
  if (size == 0) return crc;
  return static_cast<uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(bytes), size));
}

uint64_t fnv1a64(const void* bytes, size_t size, uint64_t hash) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  for (size_t i = 0; i < size; ++i) {
    hash ^= p[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

uint64_t hashFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error(path + ": cannot open");
  std::vector<char> buffer(1 << 16);
  uint64_t hash = kFnv1a64Offset;
  while (file) {
    file.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    hash = fnv1a64(buffer.data(), static_cast<size_t>(file.gcount()), hash);
  }
  if (file.bad()) throw Error(path + ": read failed");
  return hash;
}

}  // namespace megatrain::runtime
