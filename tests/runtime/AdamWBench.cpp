// AdamWBench.cpp - host AdamW throughput of each instruction-set path and thread count (not a test; run by hand).
//
//   runtime_adamw_bench [MILLIONS_OF_PARAMETERS (default 64)] [RUNS (default 5)]
//
// f32, the best of RUNS timed steps after a warm-up, for every path this CPU
// has and 1 .. hostThreadCount() threads (MEGATRAIN_HOST_THREADS raises it).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cpu/AdamWPaths.h"
#include "megatrain/runtime/HostThreads.h"

using namespace megatrain;
using namespace megatrain::runtime;

int main(int argc, char** argv) {
  const size_t count = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 64) << 20;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 5;
  std::vector<float> param(count), grad(count), m(count, 0.0f), v(count, 0.0f);
  uint32_t state = 12345;
  for (size_t i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    param[i] = static_cast<float>(state >> 8) * (1.0f / 16777216.0f) - 0.5f;
    grad[i] = static_cast<float>((state >> 4) & 0xFFFF) * (1.0f / 65536.0f) - 0.5f;
  }
  plan::AdamW hyper;
  hyper.set_lr(1e-4);
  hyper.set_beta1(0.9);
  hyper.set_beta2(0.999);
  hyper.set_eps(1e-8);
  hyper.set_weight_decay(0.01);
  std::printf("host AdamW, f32, %zuM parameters, best of %d; best path here: %s\n", count >> 20, runs,
              adamwIsaName(adamwBestIsa()));
  int64_t t = 1;
  for (AdamWIsa isa : {AdamWIsa::kScalar, AdamWIsa::kAvx2, AdamWIsa::kAvx512}) {
    if (!adamwIsaSupported(isa)) continue;
    for (unsigned threads = 1; threads <= hostThreadCount(); ++threads) {
      auto step = [&] {
        adamwUpdateWith(isa, threads, plan::F32, param.data(), grad.data(), m.data(), v.data(), count, hyper, t++);
      };
      step();  // warm-up
      double best = 1e30;
      for (int run = 0; run < runs; ++run) {
        const auto begin = std::chrono::steady_clock::now();
        step();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
      }
      std::printf("  %-7s %3u thread%s  %.3f G params/s\n", adamwIsaName(isa), threads, threads == 1 ? " " : "s",
                  static_cast<double>(count) / best / 1e9);
    }
  }
  return 0;
}
