// DiskRates.cpp - times a scratch file written and read back through DiskTier.
#include "megatrain/runtime/DiskRates.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>

#include "megatrain/plan/Error.h"
#include "megatrain/runtime/DiskTier.h"

namespace megatrain::runtime {

DiskRates measureDiskRates(const std::string& dir, uint64_t bytes, size_t transferBytes) {
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point begin) { return std::chrono::duration<double>(Clock::now() - begin).count(); };
  transferBytes = std::max(kDiskBlockBytes, transferBytes / kDiskBlockBytes * kDiskBlockBytes);
  const uint64_t transfers = std::max<uint64_t>(1, bytes / transferBytes);
  std::unique_ptr<unsigned char, decltype(&std::free)> buffer(
      static_cast<unsigned char*>(std::aligned_alloc(kDiskBlockBytes, transferBytes)), &std::free);
  if (!buffer) throw Error("disk rates: cannot allocate " + std::to_string(transferBytes) + " bytes");
  for (size_t i = 0; i < transferBytes; ++i) buffer.get()[i] = static_cast<unsigned char>(i * 131 + 7);

  const std::string name = "megatrain-disk-rates." + std::to_string(::getpid());
  DiskRates rates;
  std::string path;
  try {
    DiskTier file(dir, name, transfers * transferBytes);
    path = file.path();
    Clock::time_point begin = Clock::now();
    for (uint64_t i = 0; i < transfers; ++i) file.write(i * transferBytes, buffer.get(), transferBytes);
    file.sync();
    rates.writeBytesPerS = static_cast<double>(transfers * transferBytes) / since(begin);
    begin = Clock::now();
    for (uint64_t i = 0; i < transfers; ++i) file.read(i * transferBytes, buffer.get(), transferBytes);
    rates.readBytesPerS = static_cast<double>(transfers * transferBytes) / since(begin);
  } catch (...) {
    ::unlink((dir + "/" + name + ".state").c_str());
    throw;
  }
  ::unlink(path.c_str());
  return rates;
}

}  // namespace megatrain::runtime
