// HostThreads.cpp - a small persistent thread pool: one job at a time, tasks claimed from a shared counter.
#include "megatrain/runtime/HostThreads.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "megatrain/plan/Error.h"

namespace megatrain::runtime {
namespace {

unsigned threadCountFromEnvironment() {
  const char* text = std::getenv("MEGATRAIN_HOST_THREADS");
  if (text == nullptr || *text == '\0') return std::max(1u, std::thread::hardware_concurrency());
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 1 || value > 4096)
    throw Error(std::string("MEGATRAIN_HOST_THREADS='") + text + "' is not a thread count (an integer from 1 to 4096)");
  return static_cast<unsigned>(value);
}

// True on the pool's workers and on a thread while it runs a job's tasks: a
// nested hostParallelFor from there runs inline instead of waiting on itself.
thread_local bool insideJob = false;

class Pool {
 public:
  explicit Pool(unsigned threads) : threads_(threads) {}

  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& worker : workers_) worker.join();
  }

  unsigned threads() const { return threads_; }

  void run(unsigned tasks, const std::function<void(unsigned)>& task) {
    std::lock_guard<std::mutex> oneJob(jobMutex_);
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (workers_.empty())
        for (unsigned i = 1; i < threads_; ++i) workers_.emplace_back([this] { workerLoop(); });
      // A worker that woke late for the previous job may still be looking at
      // the counters; the new job starts once none is.
      idle_.wait(lock, [this] { return busy_ == 0; });
      task_ = &task;
      tasks_ = tasks;
      next_.store(0, std::memory_order_relaxed);
      done_.store(0, std::memory_order_relaxed);
      ++generation_;
    }
    wake_.notify_all();
    insideJob = true;
    claimTasks();
    insideJob = false;
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return busy_ == 0 && done_.load(std::memory_order_acquire) == tasks_; });
    task_ = nullptr;
  }

 private:
  // noexcept: a task that throws ends the program (std::terminate) rather
  // than leave the pool waiting for it.
  void claimTasks() noexcept {
    for (unsigned i = next_.fetch_add(1, std::memory_order_relaxed); i < tasks_;
         i = next_.fetch_add(1, std::memory_order_relaxed)) {
      (*task_)(i);
      done_.fetch_add(1, std::memory_order_release);
    }
  }

  void workerLoop() {
    insideJob = true;
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      ++busy_;
      lock.unlock();
      claimTasks();
      lock.lock();
      if (--busy_ == 0) idle_.notify_all();
    }
  }

  const unsigned threads_;
  std::vector<std::thread> workers_;
  std::mutex jobMutex_;  // held for a whole run(): one job at a time
  std::mutex mutex_;     // guards everything below but the atomics
  std::condition_variable wake_, idle_;
  bool stop_ = false;
  uint64_t generation_ = 0;
  unsigned busy_ = 0;  // workers inside claimTasks()
  const std::function<void(unsigned)>* task_ = nullptr;
  unsigned tasks_ = 0;
  std::atomic<unsigned> next_{0}, done_{0};
};

Pool& pool() {
  static Pool instance(threadCountFromEnvironment());
  return instance;
}

}  // namespace

unsigned hostThreadCount() { return pool().threads(); }

void hostParallelFor(unsigned tasks, const std::function<void(unsigned)>& task) {
  if (tasks <= 1 || insideJob || pool().threads() == 1) {
    for (unsigned i = 0; i < tasks; ++i) task(i);
    return;
  }
  pool().run(tasks, task);
}

void hostParallelRanges(size_t count, unsigned chunks, const std::function<void(size_t, size_t)>& run) {
  constexpr size_t kAlign = 16;
  const size_t blocks = (count + kAlign - 1) / kAlign;
  hostParallelFor(chunks, [&](unsigned chunk) {
    const size_t begin = std::min(count, blocks * chunk / chunks * kAlign);
    const size_t end = std::min(count, blocks * (chunk + 1) / chunks * kAlign);
    if (begin < end) run(begin, end);
  });
}

namespace {
constexpr size_t kParallelBytesFrom = size_t{8} << 20;
}

void hostParallelMemset(void* dst, int value, size_t bytes) {
  auto* out = static_cast<unsigned char*>(dst);
  if (bytes < kParallelBytesFrom) {
    std::memset(out, value, bytes);
    return;
  }
  hostParallelRanges(bytes, hostThreadCount(),
                     [&](size_t begin, size_t end) { std::memset(out + begin, value, end - begin); });
}

void hostParallelMemcpy(void* dst, const void* src, size_t bytes) {
  auto* out = static_cast<unsigned char*>(dst);
  const auto* in = static_cast<const unsigned char*>(src);
  if (bytes < kParallelBytesFrom) {
    std::memcpy(out, in, bytes);
    return;
  }
  hostParallelRanges(bytes, hostThreadCount(),
                     [&](size_t begin, size_t end) { std::memcpy(out + begin, in + begin, end - begin); });
}

}  // namespace megatrain::runtime
