// megatrain-profile.cpp - measures this machine's device profile and writes the JSON megatrain-compile --device-profile reads.
//
// Runs on the GPU machine (no compiler there): the GPU figures come from
// runtime/cuda/DeviceMeasure.cu, the host ones from here: the runtime's own
// AdamW (adamwUpdate as the executor calls it: its best vector path on the
// host thread pool, MEGATRAIN_HOST_THREADS threads or every core), host memory
// bandwidth with every core, and, when asked, direct-I/O disk bandwidth
// through the disk tier's own I/O (DiskRates.h).
// The JSON goes to -o FILE or stdout; a table of each figure beside
// its H200 ceiling (docs/hardware.md) goes to stderr.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "DeviceMeasure.h"
#include "megatrain/plan/ToolCli.h"
#include "host/AdamWPaths.h"
#include "megatrain/plan/AtomicFile.h"
#include "megatrain/plan/ProfileJson.h"
#include "megatrain/plan/ToolMain.h"
#include "megatrain/runtime/AdamW.h"
#include "megatrain/runtime/DiskRates.h"
#include "megatrain/runtime/DiskTier.h"
#include "megatrain/runtime/HostThreads.h"

namespace megatrain::runtime::tools {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point begin) {
  return std::chrono::duration<double>(Clock::now() - begin).count();
}

const char kUsage[] = "usage: megatrain-profile [-o FILE] [--quick] [--matmul-size N] [--disk DIR] [--name NAME]\n";

const char kDescription[] = R"(Measures this machine's device profile and writes it as the JSON that
megatrain-compile --device-profile reads (docs/tiering.md, "Device profile"):
  matmul_fp32/tf32/bf16_flops  cuBLAS n x n x n products (SGEMM without TF32;
                               GemmEx fast-TF32; GemmEx bf16 with fp32 accumulate)
  hbm_bytes_per_s              device-to-device copy, read + write counted
  h2d/d2h_bytes_per_s          pinned host buffers, one direction
  duplex_bytes_per_s           both directions at once on two streams, total
  host_adamw_params_per_s      the runtime's host AdamW as it runs (its vector path
                               on every host thread; MEGATRAIN_HOST_THREADS sets them)
  host_bytes_per_s             host a + b -> c on every core, 3 x 4 bytes per element
  disk_read/write_bytes_per_s  only with --disk: the disk tier's O_DIRECT I/O
                               (64 MiB transfers, MEGATRAIN_DISK_THREADS)
  launch_s                     empty kernel launches on one stream, per launch
  device_memory_bytes, name    the card
Each figure is the best of several timed runs after a warm-up. A table of
the figures beside the H200 ceilings of docs/hardware.md goes to stderr.)";

const char kExamples[] = R"(Examples:
  megatrain-profile -o profile.json
  megatrain-profile --quick --disk /tmp -o quick.json
)";

struct Options {
  std::string output;
  std::string disk;
  std::string name;
  cuda::DeviceMeasureOptions device;
  size_t adamwParams = size_t(256) << 20;
  size_t hostBytes = size_t(1) << 30;  // per array
  size_t diskBytes = size_t(4) << 30;
  int runs = 5;
};

// ---- host AdamW: the runtime's function over one large f32 parameter ----

// The arrays of one f32 parameter's update, initialised once; rate() times
// adamwUpdate over them (best of `runs` after a warm-up), in parameters per second.
class HostAdamW {
 public:
  explicit HostAdamW(size_t count) : param_(count), grad_(count), m_(count, 0.0f), v_(count, 0.0f) {
    uint32_t state = 12345;
    for (size_t i = 0; i < count; ++i) {
      state = state * 1664525u + 1013904223u;
      param_[i] = static_cast<float>(state >> 8) * (1.0f / 16777216.0f) - 0.5f;
      grad_[i] = static_cast<float>((state >> 4) & 0xFFFF) * (1.0f / 65536.0f) - 0.5f;
    }
    hyper_.set_lr(1e-4);
    hyper_.set_beta1(0.9);
    hyper_.set_beta2(0.999);
    hyper_.set_eps(1e-8);
    hyper_.set_weight_decay(0.01);
  }

  double rate(int runs) {
    update();  // warm-up
    double best = 1e30;
    for (int run = 0; run < runs; ++run) {
      const Clock::time_point begin = Clock::now();
      update();
      best = std::min(best, secondsSince(begin));
    }
    return static_cast<double>(param_.size()) / best;
  }

 private:
  void update() {
    adamwUpdate(plan::F32, param_.data(), grad_.data(), m_.data(), v_.data(), param_.size(), hyper_, ++step_);
  }

  std::vector<float> param_, grad_, m_, v_;
  plan::AdamW hyper_;
  int64_t step_ = 0;
};

// ---- host memory: c = a + b on every core, each thread on the slice it first touched ----

double measureHostBandwidth(size_t bytesPerArray, unsigned threads, int runs) {
  const size_t count = bytesPerArray / sizeof(float);
  std::unique_ptr<float[]> a(new float[count]), b(new float[count]), c(new float[count]);
  auto parallel = [&](auto&& body) {
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < threads; ++t)
      workers.emplace_back([&, t] { body(count * t / threads, count * (t + 1) / threads); });
    for (std::thread& worker : workers) worker.join();
  };
  parallel([&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      a[i] = static_cast<float>(i & 1023);
      b[i] = static_cast<float>(i & 511);
      c[i] = 0.0f;
    }
  });
  float* pa = a.get();
  float* pb = b.get();
  float* pc = c.get();
  auto add = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) pc[i] = pa[i] + pb[i];
  };
  parallel(add);  // warm-up
  double best = 1e30;
  for (int run = 0; run < runs; ++run) {
    const Clock::time_point begin = Clock::now();
    parallel(add);
    best = std::min(best, secondsSince(begin));
  }
  if (c[count - 1] != a[count - 1] + b[count - 1]) throw std::runtime_error("host bandwidth: wrong sum");
  return 3.0 * sizeof(float) * static_cast<double>(count) / best;
}

// ---- the table on stderr ----

void printTable(const MeasuredProfile& profile, const std::vector<std::string>& notes) {
  std::fprintf(stderr, "device profile of %s (%.1f GB)\n", profile.name.c_str(),
               static_cast<double>(profile.deviceMemoryBytes) / 1e9);
  std::fprintf(stderr, "%-24s %-36s %10s %-10s %10s %6s\n", "field", "what", "measured", "unit", "H200", "ratio");
  for (const ProfileField& field : profileFields()) {
    const std::optional<double> value = profile.get(field.key);
    char measured[32] = "-", ratio[16] = "-";
    if (value) {
      std::snprintf(measured, sizeof measured, "%.2f", *value / field.displayScale);
      std::snprintf(ratio, sizeof ratio, "%.0f%%", 100.0 * *value / field.ceiling);
    }
    std::fprintf(stderr, "%-24s %-36s %10s %-10s %10.2f %6s\n", field.key, field.what, measured, field.unit,
                 field.ceiling / field.displayScale, ratio);
  }
  for (const std::string& note : notes) std::fprintf(stderr, "note: %s\n", note.c_str());
}

// "54.3 GB/s": a figure already scaled to its unit, with one decimal (two below 10).
std::string figureText(double value, const char* unit) {
  char text[48];
  std::snprintf(text, sizeof text, value < 10 ? "%.2f %s" : "%.1f %s", value, unit);
  return text;
}

std::string sizeText(size_t bytes) {
  char text[32];
  if (bytes >= (size_t(1) << 30) && bytes % (size_t(1) << 30) == 0)
    std::snprintf(text, sizeof text, "%zu GiB", bytes >> 30);
  else
    std::snprintf(text, sizeof text, "%zu MiB", bytes >> 20);
  return text;
}

int run(int argc, char** argv) {
  Options options;
  bool quick = false, sizeGiven = false;
  CLI::App app;
  setupToolApp(app, "megatrain-profile", {kUsage, kDescription, kExamples});
  const std::string group = "Options";
  addValueOption(app, "-o,--out", "FILE", "write the JSON here (default: stdout; `-` is stdout)", group,
                 [&](const std::string& v) { options.output = v; });
  addFlagOption(app, "--quick",
                "small sizes (matmul 2048, 64 MiB copies, 4M AdamW parameters, 256 MiB of disk): a smoke "
                "test of a few seconds",
                group, [&] { quick = true; });
  addValueOption(app, "--matmul-size", "N", "side of the square matmuls (default 8192)", group,
                 [&](const std::string& v) {
                   const int64_t size = parsePositive(v, "--matmul-size");
                   if (size < 16 || size > 65536)
                     throw std::runtime_error("--matmul-size: between 16 and 65536, got " + std::to_string(size));
                   options.device.matmulSize = static_cast<int>(size);
                   sizeGiven = true;
                 });
  addValueOption(app, "--disk", "DIR",
                 "also measure direct-I/O disk bandwidth with a scratch file in DIR (removed afterwards; "
                 "default: not measured, and the profile omits the disk fields so the compiler keeps "
                 "its defaults)",
                 group, [&](const std::string& v) { options.disk = v; });
  addValueOption(app, "--name", "NAME", "the profile's name (default: the device's name)", group,
                 [&](const std::string& v) { options.name = v; });
  if (parseToolCommandLine(app, argc, argv)) return 0;  // --help or --version
  if (quick) {
    if (!sizeGiven) options.device.matmulSize = 2048;
    options.device.copyBytes = size_t(64) << 20;
    options.device.runs = 3;
    options.device.launches = 1000;
    options.adamwParams = size_t(4) << 20;
    options.hostBytes = size_t(64) << 20;
    options.diskBytes = size_t(256) << 20;
    options.runs = 3;
  }
  if (!options.disk.empty()) {
    struct stat info;
    if (::stat(options.disk.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
      throw std::runtime_error("--disk " + options.disk + ": not a directory");
  }

  const cuda::DeviceFigures device = cuda::measureDevice(options.device);
  MeasuredProfile profile;
  profile.name = options.name.empty() ? device.name : options.name;
  profile.deviceMemoryBytes = device.memoryBytes;
  // The machine's physical memory: the compiler's default host capacity is this minus a margin.
  const long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && pageSize > 0)
    profile.hostMemoryBytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(pageSize);
  profile.set("matmul_fp32_flops", device.matmulFp32);
  profile.set("matmul_tf32_flops", device.matmulTf32);
  profile.set("matmul_bf16_flops", device.matmulBf16);
  profile.set("hbm_bytes_per_s", device.hbmBytesPerS);
  profile.set("h2d_bytes_per_s", device.h2dBytesPerS);
  profile.set("d2h_bytes_per_s", device.d2hBytesPerS);
  profile.set("duplex_bytes_per_s", device.duplexBytesPerS);
  profile.set("launch_s", device.launchS);

  // AdamW: CpuBackend and CudaBackend both call adamwUpdate, which splits a
  // large tensor over the host thread pool; the profile's rate is that call's.
  // Measured twice: on an idle host, and with both links copying as they do beside
  // the host's updates in a training step (pinned host memory is read and written
  // by the copies at the same time). The profile takes the second: the rate the
  // updates of a step see (bench/RESULTS.md, leases AG and AI).
  HostAdamW hostAdamW(options.adamwParams);
  const int adamwRuns = std::min(options.runs, 3);
  const double idleAdamW = hostAdamW.rate(adamwRuns);
  double loadedAdamW = 0;
  const double linkLoad = cuda::whileLinksCopy(options.device.copyBytes / 4,
                                               [&] { loadedAdamW = hostAdamW.rate(adamwRuns); });
  profile.set("host_adamw_params_per_s", loadedAdamW);
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  profile.set("host_bytes_per_s", measureHostBandwidth(options.hostBytes, threads, options.runs));
  if (!options.disk.empty()) {
    const DiskRates disk = measureDiskRates(options.disk, options.diskBytes);
    profile.set("disk_read_bytes_per_s", disk.readBytesPerS);
    profile.set("disk_write_bytes_per_s", disk.writeBytesPerS);
  }

  std::vector<std::string> notes = {
      "matmuls " + std::to_string(options.device.matmulSize) + "^3; copies of " + sizeText(options.device.copyBytes) +
          "; best of " + std::to_string(options.device.runs) + " runs each",
      "host AdamW: the runtime's adamwUpdate (f32, " + std::string(adamwIsaName(adamwBestIsa())) + ") on " +
          std::to_string(adamwDefaultChunks(options.adamwParams)) + " of " + std::to_string(hostThreadCount()) +
          " host threads, as the runtime runs it, over " + std::to_string(options.adamwParams >> 20) +
          "M parameters, while both links copy (" + figureText(linkLoad * 1e-9, "GB/s") + " in all); on an idle host " +
          figureText(idleAdamW * 1e-9, "G params/s") + " (the ceiling, 3.5 G/s, is torch's fused AdamW on 16 threads; docs/hardware.md)",
      "host memory: " + std::to_string(threads) + " threads, arrays of " + sizeText(options.hostBytes),
      options.disk.empty() ? std::string("disk: not measured (--disk DIR); the profile keeps the compiler's defaults")
                           : "disk: " + sizeText(options.diskBytes) + " in " + options.disk +
                                 ", 64 MiB O_DIRECT transfers through the disk tier's I/O, " +
                                 std::to_string(diskThreadCount()) + " threads",
  };
  if (quick) notes.push_back("--quick: small sizes, a smoke test; the figures are below the machine's");
  printTable(profile, notes);

  const std::string json = profileJson(profile);
  if (options.output.empty() || options.output == "-") {
    std::fputs(json.c_str(), stdout);
  } else {
    writeFileAtomically(options.output, json);
    std::fprintf(stderr, "wrote %s\n", options.output.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace megatrain::runtime::tools

int main(int argc, char** argv) {
  return megatrain::runTool(
      "megatrain-profile", [&] { return megatrain::runtime::tools::run(argc, argv); });
}
