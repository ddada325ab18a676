// WeightLoading.cpp - megatrain-run's initial weights: --weights (ONNX, safetensors, a Hugging Face directory) or --init, with progress.
#include "WeightLoading.h"

#include <chrono>
#include <cstdio>

#include "megatrain/plan/Error.h"
#include "megatrain/plan/Format.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/WeightInit.h"

namespace megatrain::runtime::tools {

std::unique_ptr<WeightSource> openInitialWeights(const std::string& weights, const std::string& init,
                                                 std::optional<uint64_t> initSeed, uint64_t seed) {
  if (!weights.empty() && !init.empty())
    throw Error("--weights and --init both give the initial weights; keep one");
  if (initSeed && init.empty()) throw Error("--init-seed needs --init normal:STD");
  if (!init.empty()) return std::make_unique<NormalInit>(parseNormalInit(init), initSeed.value_or(seed));
  if (weights.empty())
    throw Error("missing --weights (MODEL.onnx, MODEL.safetensors or a Hugging Face model directory) or --init normal:STD");
  try {
    return openWeights(weights);
  } catch (const Error& e) {
    throw Error("--weights " + std::string(e.what()));
  }
}

void loadInitialWeights(Executor& executor, const WeightSource& source, std::vector<std::string>& notes) {
  using Clock = std::chrono::steady_clock;
  constexpr uint64_t kReportFrom = uint64_t{1} << 30;
  const Clock::time_point start = Clock::now();
  Clock::time_point lastReport = start;
  uint64_t loaded = 0;
  auto rate = [](uint64_t bytes, double seconds) { return seconds > 0 ? bytes / seconds / 1e9 : 0.0; };
  executor.loadWeights(source, [&](uint64_t done, uint64_t total) {
    loaded = total;
    const Clock::time_point now = Clock::now();
    if (total < kReportFrom || now - lastReport < std::chrono::seconds(2)) return;
    lastReport = now;
    const double seconds = std::chrono::duration<double>(now - start).count();
    std::fprintf(stderr, "weights   loading %3.0f%% (%s of %s, %.2f GB/s)\n", 100.0 * done / total,
                 formatBytes(done).c_str(), formatBytes(total).c_str(), rate(done, seconds));
    std::fflush(stderr);
  });
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  char line[160];
  std::snprintf(line, sizeof line, " (%s of masters in %.1f s, %.2f GB/s)", formatBytes(loaded).c_str(), seconds,
                rate(loaded, seconds));
  notes.push_back("weights   " + source.path() + line);
  for (const std::string& note : source.notes()) notes.push_back(note);
}

}  // namespace megatrain::runtime::tools
