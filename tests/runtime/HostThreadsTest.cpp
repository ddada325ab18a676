// HostThreadsTest.cpp - the host thread pool: every task once, concurrent callers, nested calls, the env var.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "megatrain/plan/Error.h"
#include "megatrain/runtime/Finite.h"
#include "megatrain/runtime/HostThreads.h"

namespace megatrain::runtime::testing {
namespace {

// Runs `tasks` tasks and checks each ran exactly once.
void expectEachTaskOnce(unsigned tasks) {
  std::vector<std::atomic<int>> runs(tasks);
  for (auto& r : runs) r.store(0);
  hostParallelFor(tasks, [&](unsigned i) { runs[i].fetch_add(1); });
  for (unsigned i = 0; i < tasks; ++i) ASSERT_EQ(runs[i].load(), 1) << "task " << i << " of " << tasks;
}

TEST(HostThreads, EveryTaskRunsOnce) {
  EXPECT_GE(hostThreadCount(), 1u);
  for (unsigned tasks : {0u, 1u, 2u, 3u, 17u, 100u}) expectEachTaskOnce(tasks);
  // Many small jobs back to back: the pool's hand-over between jobs.
  for (int job = 0; job < 2000; ++job) expectEachTaskOnce(1 + job % 7);
}

// With N threads, N tasks run at the same time: each waits (up to 20 s)
// until all N have started, which only happens if every thread took one.
TEST(HostThreads, TasksRunConcurrently) {
  const unsigned threads = hostThreadCount();
  std::atomic<unsigned> started{0};
  std::atomic<bool> allMet{true};
  hostParallelFor(threads, [&](unsigned) {
    started.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (started.load() < threads)
      if (std::chrono::steady_clock::now() > deadline) {
        allMet.store(false);
        return;
      }
  });
  EXPECT_TRUE(allMet.load()) << threads << " threads";
}

TEST(HostThreads, ConcurrentCallers) {
  std::vector<std::thread> callers;
  std::atomic<long> total{0};
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&] {
      for (int job = 0; job < 300; ++job) hostParallelFor(5, [&](unsigned i) { total.fetch_add(i + 1); });
    });
  for (std::thread& caller : callers) caller.join();
  EXPECT_EQ(total.load(), 4L * 300 * (1 + 2 + 3 + 4 + 5));
}

TEST(HostThreads, NestedCallRunsInline) {
  std::atomic<int> inner{0};
  hostParallelFor(4, [&](unsigned) { hostParallelFor(3, [&](unsigned) { inner.fetch_add(1); }); });
  EXPECT_EQ(inner.load(), 12);
}

TEST(HostThreadsDeathTest, Environment) {
#ifdef GTEST_FLAG_SET
  GTEST_FLAG_SET(death_test_style, "threadsafe");
#else
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
#endif
  // A fresh process each, where the pool has not read the variable yet.
  EXPECT_EXIT(
      {
        setenv("MEGATRAIN_HOST_THREADS", "3", 1);
        if (hostThreadCount() != 3) std::exit(2);
        expectEachTaskOnce(10);
        std::atomic<unsigned> started{0};
        hostParallelFor(3, [&](unsigned) {
          started.fetch_add(1);
          while (started.load() < 3) {
          }
        });
        std::exit(::testing::Test::HasFailure() ? 1 : 0);
      },
      ::testing::ExitedWithCode(0), "");
  for (const char* bad : {"0", "-2", "two", "3x"})
    EXPECT_EXIT(
        {
          setenv("MEGATRAIN_HOST_THREADS", bad, 1);
          try {
            hostThreadCount();
          } catch (const Error& e) {
            std::exit(std::string(e.what()).find("MEGATRAIN_HOST_THREADS") != std::string::npos ? 0 : 3);
          }
          std::exit(1);
        },
        ::testing::ExitedWithCode(0), "")
        << "MEGATRAIN_HOST_THREADS=" << bad;
}

// Large enough to be split over the threads (8 MiB and up), with an odd length
// so that the last range is short.
TEST(HostThreads, ParallelMemsetAndMemcpyCoverEveryByte) {
  const size_t bytes = (size_t{9} << 20) + 7;
  std::vector<unsigned char> a(bytes, 1), b(bytes, 2);
  hostParallelMemset(a.data(), 0xAB, bytes);
  EXPECT_EQ(std::count(a.begin(), a.end(), 0xAB), static_cast<std::ptrdiff_t>(bytes));
  for (size_t i = 0; i < bytes; i += 4099) a[i] = static_cast<unsigned char>(i * 31);
  hostParallelMemcpy(b.data(), a.data(), bytes);
  EXPECT_TRUE(a == b);
  hostParallelMemset(a.data() + 3, 0, 5);  // small: inline
  EXPECT_EQ(std::count(a.begin() + 3, a.begin() + 8, 0), 5);
}

// firstNonFinite splits large tensors over the threads and still reports the
// first bad element overall, whichever range finds one first.
TEST(HostThreads, FirstNonFiniteOverThreadsFindsTheFirst) {
  const size_t count = (size_t{3} << 20) + 5;
  std::vector<float> f(count, 1.5f);
  EXPECT_EQ(firstNonFinite(f.data(), count, plan::F32), -1);
  f[count - 1] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(firstNonFinite(f.data(), count, plan::F32), static_cast<int64_t>(count - 1));
  f[count / 2 + 3] = std::numeric_limits<float>::quiet_NaN();
  f[7] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(firstNonFinite(f.data(), count, plan::F32), 7);
  std::vector<double> d(count, -2.0);
  d[count / 3] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(firstNonFinite(d.data(), count, plan::F64), static_cast<int64_t>(count / 3));
  d[count / 3] = std::numeric_limits<double>::max();  // finite: the largest double
  EXPECT_EQ(firstNonFinite(d.data(), count, plan::F64), -1);
}

}  // namespace
}  // namespace megatrain::runtime::testing
