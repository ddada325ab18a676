// ScheduleBackend.h - a backend that runs a plan's streams in an adversarial interleaving.
//
// It wraps another backend (the CPU reference) and models what the CUDA backend
// does with a plan's streams: every kernel, copy, host task and poison the
// executor issues is queued on the plan stream of its step instead of run;
// record and wait steps are queued too. A wait captures, when it is queued,
// the latest record of its event queued so far (cudaStreamWaitEvent's rule),
// and is ready once that record has executed (or at once when none was
// queued). Whenever the executor waits for the device (synchronize, write,
// read, hostData), the queues are drained: among the streams whose next entry
// is ready, the policy picks one and runs that entry, until every queue is
// empty; no ready stream with work left is a deadlock (an Error).
//
// If the plan's events order every conflicting access (what the schedule
// verifier claims), every interleaving gives the bits the plan order gives.
//
// With ScheduleOptions::trace it times steps as the CUDA backend does
// (Backend::beginStepTrace), on a clock that counts the entries run: a work
// entry of a traced window's step w, plan step s that runs as the n-th entry
// gets the span [n, n + 1) at w * steps + s.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "megatrain/runtime/Backend.h"

namespace megatrain::runtime::testing {

enum class SchedulePolicy {
  Random,  // any ready stream, uniformly
  Behind,  // the ready stream whose next entry comes first in plan order
  Ahead,   // the ready stream whose next entry comes last in plan order
  Starve,  // never the starved stream while another is ready (random among the others)
};

struct ScheduleOptions {
  SchedulePolicy policy = SchedulePolicy::Random;
  uint64_t seed = 1;
  std::string starved;  // Starve: the plan stream run last
  // End a training step before the host stream's tasks after the loss
  // (Backend::overlapsHostTasks), leaving them queued beside the next step's.
  bool overlapHost = false;
  // With overlapHost: drop every waitHostTask (a broken executor, for the tests
  // that must see what the waits order).
  bool ignoreHostWaits = false;
  // Time traced steps on the entries-run clock (canTraceSteps).
  bool trace = false;
};

class ScheduleBackend final : public Backend {
 public:
  ScheduleBackend(std::unique_ptr<Backend> inner, ScheduleOptions options);

  std::string name() const override { return "schedule(" + inner_->name() + ")"; }
  const kernels::KernelSpec* findKernel(const std::string& name) const override { return inner_->findKernel(name); }
  void prepare(const plan::Plan& plan) override;
  void copy(const plan::Tensor& src, const plan::Tensor& dst) override;
  void launchKernel(uint32_t step) override;
  void runAdamW(const plan::Tensor& param, const plan::Tensor& grad, const plan::Tensor& m,
                const plan::Tensor& v, const plan::AdamW& hyper, int64_t t,
                const plan::Tensor* compute) override;
  void recordEvent(const std::string& event, const std::string& stream) override;
  void waitEvent(const std::string& event, const std::string& stream) override;
  void synchronize() override { drain(); }
  void poison(const plan::Tensor& tensor) override;
  void write(const plan::Tensor& tensor, const void* bytes, size_t size) override;
  void read(const plan::Tensor& tensor, void* bytes, size_t size) const override;
  std::byte* hostData(const plan::Tensor& tensor) override;
  void setCurrentStep(uint32_t step) override { currentStep_ = step; }
  void runAccumulate(const plan::Tensor& acc, const plan::Tensor& addend) override;
  void readLoss(const plan::Tensor& readout, double* loss) override;
  bool poisonsDeadTensors() const override { return true; }
  void poisonOnStream(const plan::Tensor& tensor, const std::string& stream) override;
  bool overlapsHostTasks() const override { return options_.overlapHost; }
  void markHostTask(uint32_t step) override;
  void waitHostTask(uint32_t step, const std::string& stream) override;
  void finishStepBeforeHost(uint32_t lossStep) override;
  void writeBesideHostTasks(const plan::Tensor& tensor, const void* bytes, size_t size) override;
  bool canTraceSteps() const override { return options_.trace; }
  void beginStepTrace(uint32_t steps) override;
  void nextTracedStep() override;
  std::vector<StepSpan> endStepTrace() override;
  // Host entries still queued when each step of the last traced window began.
  const std::vector<uint64_t>& hostQueuedAtTracedStarts() const { return hostAtStarts_; }
  // Entries left queued on the host stream when the last step ended.
  uint64_t hostEntriesLeft() const { return hostLeft_; }

  // Entries run so far, and how many of them ran while an entry queued
  // earlier (in issue order) on another stream had not run yet.
  uint64_t entriesRun() const { return entriesRun_; }
  uint64_t entriesOvertaking() const { return overtaking_; }

 private:
  struct Entry {
    enum class Kind { Work, Record, Wait } kind = Kind::Work;
    uint64_t issued = 0;   // issue order (the executor's call order)
    uint32_t step = 0;     // the plan step it belongs to
    std::string event;     // Record, Wait
    uint64_t record = 0;   // Record: its number; Wait: the record it waits for (0: none)
    std::function<void()> work;
    std::string what;  // for messages
    size_t traceAt = SIZE_MAX;  // Work of a traced step: its span's index
  };
  struct EventState {
    uint64_t latestQueued = 0;
    std::set<uint64_t> done;
  };

  void enqueue(const std::string& stream, Entry entry);
  void enqueueWork(const std::string& stream, std::function<void()> work, std::string what = "");
  std::string currentStream() const;
  bool ready(const Entry& entry) const;
  void drain() const { drainUntil([] { return false; }); }
  // Runs entries as drain() does until `done` holds or every queue is empty.
  void drainUntil(const std::function<bool()>& done) const;
  // Whether every queue but the host stream's is empty.
  bool onlyHostLeft() const;

  std::unique_ptr<Backend> inner_;
  ScheduleOptions options_;
  const plan::Plan* plan_ = nullptr;
  uint32_t currentStep_ = UINT32_MAX;
  uint64_t nextIssue_ = 0;
  uint64_t nextRecord_ = 0;
  // Mutable: read() is const in Backend, and drains like every other host access.
  mutable std::vector<std::string> streamNames_;
  mutable std::unordered_map<std::string, std::deque<Entry>> queues_;
  mutable std::unordered_map<std::string, EventState> events_;
  mutable std::mt19937_64 rng_;
  mutable uint64_t entriesRun_ = 0, overtaking_ = 0;
  uint64_t hostLeft_ = 0;
  // Tracing: the window's spans (mutable: entries run in const drains) and the current step's base.
  bool tracing_ = false;
  size_t traceBase_ = 0, traceSize_ = 0;
  mutable std::vector<StepSpan> spans_;
  std::vector<uint64_t> hostAtStarts_;
  uint64_t hostQueued() const;
};

}  // namespace megatrain::runtime::testing
