// CopyQueueProbe.cpp - how copies to the device on two CUDA streams share the host link
// (bench/device.sh COPY_QUEUE=1; docs/tiering.md "Update visits", "Measured"). Not a test:
// it prints what the machine does, for the plan simulator's link model (plan/lib/Simulate.cpp,
// LinkQueue) to be checked against.
//
// Each case times a small copy on stream B (64 MiB) beside a large one on stream A (256 MiB),
// both host -> device from pinned memory, 5 times, and prints the medians, in ms from the
// moment B's copy was issued:
//   alone            B's copy with nothing else on the link (its time at the link's rate)
//   both ready       A's copy issued, then B's at once: shared (B ends near twice its time
//                    alone), first come first served (B ends after A), or B first
//   A gated          A's copy issued behind an event that a host function opens 20 ms later,
//                    then B's: whether a copy that waits for its event holds back a copy
//                    issued after it on another stream (B ends near its time alone if not)
//   B issued first   the gated case with B issued before A (the control)
//   A backlog        A's 256 MiB as four copies of 64 MiB issued, then B's: whether a stream
//                    with copies queued keeps the link until they are done
// `gpu_copy_queue_probe N` makes N streams between A's and B's (default 0): the CUDA runtime
// spreads streams over CUDA_DEVICE_MAX_CONNECTIONS hardware queues (8 unless set), so with
// N = 7 A and B may share one queue, whose work then runs in issue order.
// `gpu_copy_queue_probe N b-first` makes B's stream before A's: whether the link serves the
// streams by the order they were made in.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  std::fprintf(stderr, "gpu_copy_queue_probe: %s: %s\n", what, cudaGetErrorString(status));
  std::exit(1);
}

constexpr size_t kLarge = size_t{256} << 20, kSmall = size_t{64} << 20;
constexpr int kRepeats = 5;

struct Buffers {
  void* hostLarge = nullptr;
  void* hostSmall = nullptr;
  void* deviceLarge = nullptr;
  void* deviceSmall = nullptr;
};

void sleepTwentyMs(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }

struct Times {
  double smallEnd;  // B's copy's end, ms after B was issued
  double largeEnd;  // A's copy's end, ms after B was issued (NaN when A has no copy)
};

enum class Case { Alone, BothReady, AGated, BFirst, ABacklog };

Times run(Case c, const Buffers& b, cudaStream_t a, cudaStream_t s, cudaStream_t gate) {
  cudaEvent_t origin, smallEnd, largeEnd, open;
  for (cudaEvent_t* event : {&origin, &smallEnd, &largeEnd}) check(cudaEventCreate(event), "event");
  check(cudaEventCreateWithFlags(&open, cudaEventDisableTiming), "event");
  check(cudaDeviceSynchronize(), "sync");
  auto issueLarge = [&](bool gated, int parts = 1) {
    if (gated) {
      check(cudaLaunchHostFunc(gate, sleepTwentyMs, nullptr), "host function");
      check(cudaEventRecord(open, gate), "record");
      check(cudaStreamWaitEvent(a, open, 0), "wait");
    }
    const size_t part = kLarge / static_cast<size_t>(parts);
    for (int i = 0; i < parts; ++i)
      check(cudaMemcpyAsync(static_cast<char*>(b.deviceLarge) + i * part, static_cast<char*>(b.hostLarge) + i * part,
                            part, cudaMemcpyHostToDevice, a),
            "copy A");
    check(cudaEventRecord(largeEnd, a), "record");
  };
  auto issueSmall = [&] {
    check(cudaEventRecord(origin, s), "record");
    check(cudaMemcpyAsync(b.deviceSmall, b.hostSmall, kSmall, cudaMemcpyHostToDevice, s), "copy B");
    check(cudaEventRecord(smallEnd, s), "record");
  };
  switch (c) {
    case Case::Alone: issueSmall(); break;
    case Case::BothReady: issueLarge(false); issueSmall(); break;
    case Case::AGated: issueLarge(true); issueSmall(); break;
    case Case::BFirst: issueSmall(); issueLarge(true); break;
    case Case::ABacklog: issueLarge(false, 4); issueSmall(); break;
  }
  check(cudaDeviceSynchronize(), "sync");
  Times times{0, -1};
  float ms = 0;
  check(cudaEventElapsedTime(&ms, origin, smallEnd), "elapsed");
  times.smallEnd = ms;
  if (c != Case::Alone) {
    check(cudaEventElapsedTime(&ms, origin, largeEnd), "elapsed");
    times.largeEnd = ms;
  }
  for (cudaEvent_t event : {origin, smallEnd, largeEnd, open}) cudaEventDestroy(event);
  return times;
}

}  // namespace

int main(int argc, char** argv) {
  const int between = argc > 1 ? std::atoi(argv[1]) : 0;
  const bool bFirst = argc > 2 && std::string(argv[2]) == "b-first";
  Buffers b;
  check(cudaHostAlloc(&b.hostLarge, kLarge, cudaHostAllocDefault), "pinned");
  check(cudaHostAlloc(&b.hostSmall, kSmall, cudaHostAllocDefault), "pinned");
  check(cudaMalloc(&b.deviceLarge, kLarge), "device");
  check(cudaMalloc(&b.deviceSmall, kSmall), "device");
  cudaStream_t a, s, gate;
  check(cudaStreamCreateWithFlags(bFirst ? &s : &a, cudaStreamNonBlocking), "stream");
  std::vector<cudaStream_t> others(static_cast<size_t>(std::max(between, 0)));
  for (cudaStream_t& stream : others) check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  check(cudaStreamCreateWithFlags(bFirst ? &a : &s, cudaStreamNonBlocking), "stream");
  check(cudaStreamCreateWithFlags(&gate, cudaStreamNonBlocking), "stream");
  run(Case::BothReady, b, a, s, gate);  // warm-up
  const std::pair<Case, const char*> cases[] = {
      {Case::Alone, "alone"}, {Case::BothReady, "both ready"}, {Case::AGated, "A gated"}, {Case::BFirst, "B issued first"},
      {Case::ABacklog, "A backlog"}};
  const char* connections = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  std::printf("copies host -> device: B %zu MiB on one stream, A %zu MiB on another (%s made first), %d streams "
              "between them, CUDA_DEVICE_MAX_CONNECTIONS=%s; medians of %d, ms after B was issued\n",
              kSmall >> 20, kLarge >> 20, bFirst ? "B's" : "A's", between, connections ? connections : "(unset)",
              kRepeats);
  std::printf("%-16s %10s %10s\n", "case", "B ends", "A ends");
  for (const auto& [c, name] : cases) {
    std::vector<double> small, large;
    for (int i = 0; i < kRepeats; ++i) {
      const Times t = run(c, b, a, s, gate);
      small.push_back(t.smallEnd);
      large.push_back(t.largeEnd);
    }
    std::sort(small.begin(), small.end());
    std::sort(large.begin(), large.end());
    if (c == Case::Alone)
      std::printf("%-16s %10.3f %10s\n", name, small[kRepeats / 2], "-");
    else
      std::printf("%-16s %10.3f %10.3f\n", name, small[kRepeats / 2], large[kRepeats / 2]);
  }
  return 0;
}
