// AdamWBench.cpp - host AdamW throughput of each instruction-set path and thread count (not a test; run by hand).
//
//   runtime_adamw_bench [MILLIONS_OF_PARAMETERS (default 64)] [RUNS (default 5)]
//       f32, the best of RUNS timed steps after a warm-up, for every path this
//       CPU has and 1 .. hostThreadCount() threads (MEGATRAIN_HOST_THREADS
//       raises it), one chunk per thread and the default chunking.
//   runtime_adamw_bench --entry [MILLIONS] [RUNS]
//       adamwUpdate as the runtime calls it (best path, default chunking),
//       without and with the bf16 compute copy, then the host's streaming
//       ceiling for the same traffic (read p, g, m, v; write p, m, v: 28 bytes
//       a parameter, with an add in place of the update, same chunking and
//       threads); prints `name value` lines (bench/adamw_vs_torch.sh reads them).
//
// The tensors are 64-byte aligned and first touched by the pool's threads in
// the chunks that later update them (as torch's parallel fills place its
// tensors), so each chunk's pages sit near the core that touched them.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "host/AdamWPaths.h"
#include "megatrain/runtime/AdamW.h"
#include "megatrain/runtime/HostThreads.h"

using namespace megatrain;
using namespace megatrain::runtime;

namespace {

template <typename T>
T* allocate(size_t count) {
  const size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
  void* memory = std::aligned_alloc(64, std::max<size_t>(bytes, 64));
  if (memory == nullptr) {
    std::fprintf(stderr, "runtime_adamw_bench: out of memory\n");
    std::exit(1);
  }
  return static_cast<T*>(memory);
}

struct Tensors {
  size_t count;
  float *param, *grad, *m, *v;
  uint16_t* copy;
};

// Allocates and fills the tensors chunk by chunk on the pool, in the default chunking.
Tensors makeTensors(size_t count) {
  Tensors x{count, allocate<float>(count), allocate<float>(count), allocate<float>(count), allocate<float>(count),
            allocate<uint16_t>(count)};
  const unsigned chunks = adamwDefaultChunks(count);
  hostParallelFor(chunks, [&](unsigned chunk) {
    const size_t begin = count * chunk / chunks, end = count * (chunk + 1) / chunks;
    uint32_t state = 12345u + chunk;
    for (size_t i = begin; i < end; ++i) {
      state = state * 1664525u + 1013904223u;
      x.param[i] = static_cast<float>(state >> 8) * (1.0f / 16777216.0f) - 0.5f;
      x.grad[i] = static_cast<float>((state >> 4) & 0xFFFF) * (1.0f / 65536.0f) - 0.5f;
      x.m[i] = 0.0f;
      x.v[i] = 0.0f;
      x.copy[i] = 0;
    }
  });
  return x;
}

plan::AdamW hyper() {
  plan::AdamW h;
  h.set_lr(1e-4);
  h.set_beta1(0.9);
  h.set_beta2(0.999);
  h.set_eps(1e-8);
  h.set_weight_decay(0.01);
  return h;
}

// The best of `runs` timed calls of step(t) after one warm-up, in parameters per second.
template <typename Step>
double bestRate(size_t count, int runs, int64_t& t, const Step& step) {
  step(t++);
  double best = 1e30;
  for (int run = 0; run < runs; ++run) {
    const auto begin = std::chrono::steady_clock::now();
    step(t++);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
  }
  return static_cast<double>(count) / best;
}

// The same memory traffic as the update with one add per stream: what the
// host's memory moves at most, for comparison (it changes the tensors; run it last).
void streamCeiling(const Tensors& x) {
  hostParallelRanges(x.count, adamwDefaultChunks(x.count), [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      const float g = x.grad[i];
      x.param[i] += g;
      x.m[i] += g;
      x.v[i] += g;
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  int arg = 1;
  const bool entry = argc > 1 && std::strcmp(argv[1], "--entry") == 0;
  if (entry) ++arg;
  const size_t count = (argc > arg ? std::strtoull(argv[arg], nullptr, 10) : 64) << 20;
  const int runs = argc > arg + 1 ? std::atoi(argv[arg + 1]) : 5;
  const Tensors x = makeTensors(count);
  const plan::AdamW h = hyper();
  int64_t t = 1;
  if (entry) {
    for (bool withCopy : {false, true}) {
      const double rate = bestRate(count, runs, t, [&](int64_t step) {
        adamwUpdate(plan::F32, x.param, x.grad, x.m, x.v, count, h, step, withCopy ? x.copy : nullptr);
      });
      std::printf("%s %.6g\n", withCopy ? "adamw_bf16_copy_params_per_s" : "adamw_params_per_s", rate);
    }
    std::printf("stream_ceiling_params_per_s %.6g\n", bestRate(count, runs, t, [&](int64_t) { streamCeiling(x); }));
    std::printf("adamw_isa %s\nadamw_threads %u\nadamw_chunks %u\n", adamwIsaName(adamwBestIsa()), hostThreadCount(),
                adamwDefaultChunks(count));
    return 0;
  }
  std::printf("host AdamW, f32, %zuM parameters, best of %d; best path here: %s; GB/s counts 28 bytes a parameter\n",
              count >> 20, runs, adamwIsaName(adamwBestIsa()));
  for (AdamWIsa isa : {AdamWIsa::kScalar, AdamWIsa::kAvx2, AdamWIsa::kAvx512}) {
    if (!adamwIsaSupported(isa)) continue;
    for (unsigned threads = 1; threads <= hostThreadCount(); ++threads)
      for (unsigned perThread : {1u, kAdamWChunksPerThread}) {
        const unsigned chunks = threads * perThread;
        const double rate = bestRate(count, runs, t, [&](int64_t step) {
          adamwUpdateWith(isa, chunks, plan::F32, x.param, x.grad, x.m, x.v, count, h, step);
        });
        std::printf("  %-7s %3u thread%s %3u chunks  %.3f G params/s  %6.1f GB/s\n", adamwIsaName(isa), threads,
                    threads == 1 ? " " : "s", chunks, rate / 1e9, rate * 28 / 1e9);
      }
  }
  const double rate = bestRate(count, runs, t, [&](int64_t step) {
    adamwUpdate(plan::F32, x.param, x.grad, x.m, x.v, count, h, step, x.copy);
  });
  std::printf("  adamwUpdate with the bf16 copy (%s, %u chunks)  %.3f G params/s  %6.1f GB/s (30 bytes)\n",
              adamwIsaName(adamwBestIsa()), adamwDefaultChunks(count), rate / 1e9, rate * 30 / 1e9);
  return 0;
}
