// ChecksumBench.cpp - throughput of the checkpoint CRC-32 (not a test; run by hand).
//
//   runtime_checksum_bench [MIB (default 1024)] [ROUNDS (default 5)]
//       crc32 (runtime/lib/Checksum.cpp) over one buffer of MIB MiB, alternating
//       ROUNDS times with a table-driven slicing-by-8 loop (the runtime's own
//       implementation before it called zlib), so both sides see the same load;
//       prints each round and the median rate of each in GB/s, and fails if the
//       two disagree.
//
// The buffer is filled with pseudo-random bytes and read once before timing.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "megatrain/runtime/Checksum.h"

namespace {

using CrcTables = std::array<std::array<uint32_t, 256>, 8>;

CrcTables makeTables() {
  CrcTables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? 0xEDB88320u : 0u);
    t[0][b] = crc;
  }
  for (int k = 1; k < 8; ++k)
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFFu];
  return t;
}

const CrcTables& tables() {
  static const CrcTables t = makeTables();
  return t;
}

// Kept out of line, as it was in the runtime library.
__attribute__((noinline)) uint32_t slicingBy8(const void* bytes, size_t size) {
  const CrcTables& t = tables();
  const auto* p = static_cast<const unsigned char*>(bytes);
  uint32_t crc = ~0u;
  while (size >= 8) {
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

template <typename F>
double seconds(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  if (mib == 0 || rounds <= 0) {
    std::fprintf(stderr, "usage: runtime_checksum_bench [MIB] [ROUNDS]\n");
    return 2;
  }
  const size_t bytes = mib << 20;
  std::vector<unsigned char> buffer(bytes);
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < bytes; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    buffer[i] = static_cast<unsigned char>(state >> 56);
  }
  const double gb = static_cast<double>(bytes) / 1e9;
  std::vector<double> zlibRates, tableRates;
  uint32_t zlibCrc = megatrain::runtime::crc32(buffer.data(), bytes);  // warm-up
  std::printf("buffer %zu MiB, %d rounds\n", mib, rounds);
  for (int r = 0; r < rounds; ++r) {
    uint32_t a = 0, b = 0;
    const double za = seconds([&] { a = megatrain::runtime::crc32(buffer.data(), bytes); });
    const double tb = seconds([&] { b = slicingBy8(buffer.data(), bytes); });
    if (a != zlibCrc || b != zlibCrc) {
      std::fprintf(stderr, "runtime_checksum_bench: CRCs disagree: crc32 0x%08x, slicing-by-8 0x%08x\n", a, b);
      return 1;
    }
    zlibRates.push_back(gb / za);
    tableRates.push_back(gb / tb);
    std::printf("round %d  crc32 %.2f GB/s  slicing-by-8 %.2f GB/s\n", r + 1, gb / za, gb / tb);
  }
  const double z = median(zlibRates), t = median(tableRates);
  std::printf("crc 0x%08x\nmedian  crc32 %.2f GB/s  slicing-by-8 %.2f GB/s  ratio %.2fx\n", zlibCrc, z, t, z / t);
  return 0;
}
