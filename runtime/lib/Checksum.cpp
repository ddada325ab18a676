// Checksum.cpp - CRC-32 (slicing by 8) for checkpoint integrity and FNV-1a 64 for file identity.
#include "megatrain/runtime/Checksum.h"

#include <array>
#include <cstring>
#include <fstream>
#include <vector>

#include "megatrain/plan/Error.h"

namespace megatrain::runtime {
namespace {

// tables[0] is the classic byte-at-a-time table; tables[k][b] is the CRC of
// byte b followed by k zero bytes, which lets the loop fold 8 input bytes per
// iteration (checkpoints are gigabytes: one byte per step would be the bottleneck).
using CrcTables = std::array<std::array<uint32_t, 256>, 8>;

CrcTables makeCrcTables() {
  CrcTables tables{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? 0xEDB88320u : 0u);
    tables[0][b] = crc;
  }
  for (int k = 1; k < 8; ++k)
    for (uint32_t b = 0; b < 256; ++b) tables[k][b] = (tables[k - 1][b] >> 8) ^ tables[0][tables[k - 1][b] & 0xFFu];
  return tables;
}

const CrcTables& crcTables() {
  static const CrcTables tables = makeCrcTables();
  return tables;
}

}  // namespace

uint32_t crc32(const void* bytes, size_t size, uint32_t crc) {
  const CrcTables& t = crcTables();
  const auto* p = static_cast<const unsigned char*>(bytes);
  crc = ~crc;
  while (size >= 8) {
    // Assemble little-endian words byte by byte: no alignment or host-order assumption.
    const uint32_t lo = crc ^ (uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24);
    const uint32_t hi = uint32_t(p[4]) | uint32_t(p[5]) << 8 | uint32_t(p[6]) << 16 | uint32_t(p[7]) << 24;
    crc = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^ t[3][hi & 0xFF] ^
          t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
    p += 8;
    size -= 8;
  }
  while (size--) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xFF];
  return ~crc;
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
