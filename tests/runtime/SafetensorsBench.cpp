// SafetensorsBench.cpp - throughput of SafetensorsWeights::read per dtype (not a test; run by hand).
//
//   runtime_safetensors_bench DIR [MIB (default 512)] [ROUNDS (default 3)]
//       writes DIR/bench.safetensors with one F32, one BF16 and one F16 tensor
//       of MIB MiB of stored data each, opens it, and reads each tensor into
//       an f32 master ROUNDS times; prints the median rate of each in GB/s of
//       stored bytes and of master bytes written, then deletes the file.
//
// The file was just written, so it is in the page cache: this measures the
// conversion, the part the reader owns (a cold read is the disk's speed).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "megatrain/runtime/SafetensorsReader.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [MIB] [ROUNDS]\n", argv[0]);
    return 2;
  }
  const std::string path = std::string(argv[1]) + "/bench.safetensors";
  const uint64_t mib = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 512;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  const uint64_t bytes = mib << 20;
  const char* dtypes[] = {"F32", "BF16", "F16"};

  std::string header = "{";
  uint64_t offset = 0;
  for (const char* dtype : dtypes) {
    const uint64_t elements = bytes / (dtype[0] == 'F' && dtype[1] == '3' ? 4 : 2);
    header += std::string(offset ? "," : "") + "\"" + dtype + "\":{\"dtype\":\"" + dtype + "\",\"shape\":[" +
              std::to_string(elements) + "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  header += "}";
  {
    std::ofstream out(path, std::ios::binary);
    const uint64_t length = header.size();
    out.write(reinterpret_cast<const char*>(&length), 8);
    out << header;
    // Values in [0.5, 1): finite in every dtype, no subnormals.
    std::vector<uint16_t> chunk(1 << 20, 0x3F40);
    for (uint64_t written = 0; written < 3 * bytes; written += chunk.size() * 2)
      out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(chunk.size() * 2));
  }

  megatrain::runtime::SafetensorsWeights weights(path);
  for (const char* dtype : dtypes) {
    const auto& tensor = weights.tensors().at(dtype);
    std::vector<float> master(static_cast<size_t>(tensor.shape[0]));
    std::vector<double> seconds;
    for (int r = 0; r < rounds; ++r) {
      const auto start = std::chrono::steady_clock::now();
      weights.read(dtype, megatrain::plan::F32, tensor.shape, master.data(), master.size() * 4);
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[seconds.size() / 2];
    std::printf("%-5s %6.2f GB/s stored, %6.2f GB/s of f32 masters (median of %d, %llu MiB)\n", dtype,
                bytes / median / 1e9, master.size() * 4.0 / median / 1e9, rounds,
                static_cast<unsigned long long>(mib));
  }
  std::filesystem::remove(path);
  return 0;
}
