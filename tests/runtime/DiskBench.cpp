// DiskBench.cpp - the disk tier's read and write rates under a directory (a benchmark, not a test).
//
//   runtime_disk_bench DIR [GIB] [TRANSFER_MIB]     MEGATRAIN_DISK_THREADS sets the threads
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "megatrain/runtime/DiskRates.h"
#include "megatrain/runtime/DiskTier.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: runtime_disk_bench DIR [GIB (default 2)] [TRANSFER_MIB (default 64)]\n");
    return 2;
  }
  const double gib = argc > 2 ? std::atof(argv[2]) : 2.0;
  const size_t transfer = (argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 64) << 20;
  try {
    using namespace megatrain::runtime;
    const DiskRates rates = measureDiskRates(argv[1], static_cast<uint64_t>(gib * (1 << 30)), transfer);
    std::printf("disk %s: %.2f GiB in %zu MiB transfers, %u threads: write %.2f GB/s, read %.2f GB/s\n", argv[1], gib,
                transfer >> 20, diskThreadCount(), rates.writeBytesPerS / 1e9, rates.readBytesPerS / 1e9);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "runtime_disk_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
