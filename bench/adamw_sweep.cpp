// adamw_sweep.cpp - variants of the host AdamW's AVX-512 f32 loop, timed side by side (not built by
// CMake; the measurement behind kAdamWPrefetchBytes, bench/RESULTS.md):
//
//   g++ -O2 -std=c++17 -mavx512f -mavx512bw -ffp-contract=off -pthread bench/adamw_sweep.cpp -o adamw_sweep
//   ./adamw_sweep [MILLIONS (256)] [RUNS (7)] [THREADS (all)]
//
// For 4 KiB pages and madvise(MADV_HUGEPAGE) pages, and for three ways of spreading the work
// (4 chunks a thread claimed dynamically, as the runtime does; one static range a thread,
// pinned to a core; the same unpinned), it times the loop without prefetch, with software
// prefetch of the four input streams 512 B to 4 KiB ahead, unrolled twice, with the bf16 copy,
// and a plain loop with the same traffic (p, m, v += g). The arithmetic is the runtime's; the
// coefficients are fixed stand-ins, since only the time is of interest.
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

struct C { float b1, omb1, b2, omb2, decay, step, isc2, eps; };

template <int PF, bool COPY, bool UNROLL>
void kern(float* p, const float* g, float* m, float* v, size_t n, const C& c, uint16_t* cp) {
  const __m512 b1 = _mm512_set1_ps(c.b1), o1 = _mm512_set1_ps(c.omb1), b2 = _mm512_set1_ps(c.b2), o2 = _mm512_set1_ps(c.omb2);
  const __m512 dec = _mm512_set1_ps(c.decay), st = _mm512_set1_ps(c.step), isc = _mm512_set1_ps(c.isc2), ep = _mm512_set1_ps(c.eps);
  auto one = [&](size_t i) {
    const __m512 gg = _mm512_loadu_ps(g + i);
    const __m512 mn = _mm512_add_ps(_mm512_mul_ps(b1, _mm512_loadu_ps(m + i)), _mm512_mul_ps(o1, gg));
    const __m512 vn = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_loadu_ps(v + i)), _mm512_mul_ps(_mm512_mul_ps(o2, gg), gg));
    _mm512_storeu_ps(m + i, mn);
    _mm512_storeu_ps(v + i, vn);
    const __m512 den = _mm512_add_ps(_mm512_mul_ps(_mm512_sqrt_ps(vn), isc), ep);
    const __m512 pp = _mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(p + i), dec), _mm512_div_ps(_mm512_mul_ps(st, mn), den));
    _mm512_storeu_ps(p + i, pp);
    if constexpr (COPY) {
      __m512i w = _mm512_castps_si512(pp);
      __m512i up = _mm512_srli_epi32(w, 16);
      __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(w, _mm512_set1_epi32(0x7FFF)), _mm512_and_si512(up, _mm512_set1_epi32(1))), 16);
      _mm256_stream_si256((__m256i*)(cp + i), _mm512_cvtepi32_epi16(r));
    }
  };
  const size_t step = UNROLL ? 32 : 16;
  for (size_t i = 0; i + step <= n; i += step) {
    if constexpr (PF > 0) {
      if (UNROLL || (i % 16 == 0)) {
        _mm_prefetch((const char*)(g + i + PF / 4), _MM_HINT_T0);
        _mm_prefetch((const char*)(m + i + PF / 4), _MM_HINT_T0);
        _mm_prefetch((const char*)(v + i + PF / 4), _MM_HINT_T0);
        _mm_prefetch((const char*)(p + i + PF / 4), _MM_HINT_T0);
        if (UNROLL) {
          _mm_prefetch((const char*)(g + i + 16 + PF / 4), _MM_HINT_T0);
          _mm_prefetch((const char*)(m + i + 16 + PF / 4), _MM_HINT_T0);
          _mm_prefetch((const char*)(v + i + 16 + PF / 4), _MM_HINT_T0);
          _mm_prefetch((const char*)(p + i + 16 + PF / 4), _MM_HINT_T0);
        }
      }
    }
    one(i);
    if (UNROLL) one(i + 16);
  }
  if (COPY) _mm_sfence();
}

// bandwidth ceiling: same 4 reads / 3 writes, trivial math
void ceil_k(float* p, const float* g, float* m, float* v, size_t n) {
  for (size_t i = 0; i + 16 <= n; i += 16) {
    __m512 gg = _mm512_loadu_ps(g + i);
    _mm512_storeu_ps(m + i, _mm512_add_ps(_mm512_loadu_ps(m + i), gg));
    _mm512_storeu_ps(v + i, _mm512_add_ps(_mm512_loadu_ps(v + i), gg));
    _mm512_storeu_ps(p + i, _mm512_add_ps(_mm512_loadu_ps(p + i), gg));
  }
}

using Kern = void (*)(float*, const float*, float*, float*, size_t, const C&, uint16_t*);

static std::vector<int> cpus() {
  cpu_set_t s; CPU_ZERO(&s); sched_getaffinity(0, sizeof s, &s);
  std::vector<int> r; for (int i = 0; i < CPU_SETSIZE; ++i) if (CPU_ISSET(i, &s)) r.push_back(i);
  return r;
}

// run f(t) on T threads; pinned -> thread t on cpus[t]
static void par(int T, bool pinned, const std::function<void(int)>& f) {
  static std::vector<int> cs = cpus();
  std::vector<std::thread> th;
  for (int t = 0; t < T; ++t) th.emplace_back([&, t] {
    if (pinned) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(cs[t % cs.size()], &s); pthread_setaffinity_np(pthread_self(), sizeof s, &s); }
    f(t);
  });
  for (auto& x : th) x.join();
}

static void* alloc(size_t bytes, bool huge) {
  if (!huge) return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  size_t b = (bytes + (2u << 20) - 1) / (2u << 20) * (2u << 20);
  void* p = std::aligned_alloc(2u << 20, b);
  if (madvise(p, b, MADV_HUGEPAGE) != 0) perror("madvise");
  return p;
}

struct T { float *p, *g, *m, *v; uint16_t* c; };

int main(int argc, char** argv) {
  size_t n = size_t(argc > 1 ? atoi(argv[1]) : 256) << 20;
  int runs = argc > 2 ? atoi(argv[2]) : 7;
  int NT = argc > 3 ? atoi(argv[3]) : (int)std::thread::hardware_concurrency();
  C c{0.9f, 0.1f, 0.999f, 0.001f, 1 - 1e-6f, 1e-3f, 1.2f, 1e-8f};
  for (bool huge : {false, true}) {
    T x{(float*)alloc(n * 4, huge), (float*)alloc(n * 4, huge), (float*)alloc(n * 4, huge), (float*)alloc(n * 4, huge), (uint16_t*)alloc(n * 2, huge)};
    // first touch, static partition pinned
    par(NT, true, [&](int t) {
      size_t b = n * t / NT / 16 * 16, e = n * (t + 1) / NT / 16 * 16; if (t == NT - 1) e = n;
      uint32_t s = 1 + t;
      for (size_t i = b; i < e; ++i) { s = s * 1664525u + 1013904223u; x.p[i] = (s >> 8) * (1.0f / 16777216.0f) - .5f; x.g[i] = ((s >> 4) & 0xFFFF) / 65536.0f - .5f; x.m[i] = 0; x.v[i] = 0; x.c[i] = 0; }
    });
    struct K { const char* name; Kern k; bool copy; };
    K ks[] = {{"base", kern<0, false, false>, false}, {"pf512", kern<512, false, false>, false}, {"pf1k", kern<1024, false, false>, false},
              {"pf2k", kern<2048, false, false>, false}, {"pf4k", kern<4096, false, false>, false}, {"unroll", kern<0, false, true>, false},
              {"unr+pf2k", kern<2048, false, true>, false}, {"base+copy", kern<0, true, false>, true}, {"pf2k+copy", kern<2048, true, false>, true},
              {"ceiling", nullptr, false}};
    for (int mode = 0; mode < 3; ++mode) {  // 0: dynamic 4 chunks/thread unpinned, 1: static pinned, 2: static unpinned
      for (auto& k : ks) {
        double best = 1e9;
        for (int r = 0; r <= runs; ++r) {
          auto t0 = std::chrono::steady_clock::now();
          if (mode == 0) {
            int chunks = NT * 4; std::atomic<int> next{0};
            par(NT, false, [&](int) {
              for (int ch = next++; ch < chunks; ch = next++) {
                size_t b = n * ch / chunks / 16 * 16, e = n * (ch + 1) / chunks / 16 * 16; if (ch == chunks - 1) e = n;
                if (k.k) k.k(x.p + b, x.g + b, x.m + b, x.v + b, e - b, c, x.c + b); else ceil_k(x.p + b, x.g + b, x.m + b, x.v + b, e - b);
              }
            });
          } else {
            par(NT, mode == 1, [&](int t) {
              size_t b = n * t / NT / 16 * 16, e = n * (t + 1) / NT / 16 * 16; if (t == NT - 1) e = n;
              if (k.k) k.k(x.p + b, x.g + b, x.m + b, x.v + b, e - b, c, x.c + b); else ceil_k(x.p + b, x.g + b, x.m + b, x.v + b, e - b);
            });
          }
          double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (r > 0 && s < best) best = s;
        }
        double rate = n / best;
        printf("%-5s %-14s %-10s %6.2f G/s %6.1f GB/s\n", huge ? "huge" : "4k", mode == 0 ? "dyn" : mode == 1 ? "static-pinned" : "static", k.name, rate / 1e9, rate * (k.copy ? 30 : 28) / 1e9);
        fflush(stdout);
      }
    }
    free(x.p); free(x.g); free(x.m); free(x.v); free(x.c);
  }
}
