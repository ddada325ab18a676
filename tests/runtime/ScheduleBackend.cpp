// ScheduleBackend.cpp - a backend that runs a plan's streams in an adversarial interleaving.
#include "ScheduleBackend.h"

#include <algorithm>
#include <limits>

#include "megatrain/plan/Error.h"

namespace megatrain::runtime::testing {

ScheduleBackend::ScheduleBackend(std::unique_ptr<Backend> inner, ScheduleOptions options)
    : inner_(std::move(inner)), options_(std::move(options)), rng_(options_.seed) {}

void ScheduleBackend::prepare(const plan::Plan& plan) {
  drain();
  inner_->prepare(plan);
  plan_ = &plan;
  streamNames_.clear();
  queues_.clear();
  events_.clear();
  for (const std::string& stream : plan.streams())
    if (!queues_.count(stream)) queues_[stream], streamNames_.push_back(stream);
  for (const plan::Step& step : plan.steps())
    if (!queues_.count(step.stream())) queues_[step.stream()], streamNames_.push_back(step.stream());
}

std::string ScheduleBackend::currentStream() const {
  if (!plan_ || currentStep_ >= static_cast<uint32_t>(plan_->steps_size()))
    throw Error("schedule backend: work issued outside a plan step");
  return plan_->steps(static_cast<int>(currentStep_)).stream();
}

void ScheduleBackend::enqueue(const std::string& stream, Entry entry) {
  entry.issued = nextIssue_++;
  entry.step = currentStep_;
  if (tracing_ && entry.kind == Entry::Kind::Work && plan_ &&
      currentStep_ < static_cast<uint32_t>(plan_->steps_size()))
    entry.traceAt = traceBase_ + currentStep_;
  auto it = queues_.find(stream);
  if (it == queues_.end()) {
    streamNames_.push_back(stream);
    it = queues_.emplace(stream, std::deque<Entry>{}).first;
  }
  it->second.push_back(std::move(entry));
}

void ScheduleBackend::enqueueWork(const std::string& stream, std::function<void()> work, std::string what) {
  Entry entry;
  entry.what = std::move(what);
  entry.kind = Entry::Kind::Work;
  entry.work = std::move(work);
  enqueue(stream, std::move(entry));
}

void ScheduleBackend::copy(const plan::Tensor& src, const plan::Tensor& dst) {
  enqueueWork(currentStream(), [this, &src, &dst] { inner_->copy(src, dst); });
}

void ScheduleBackend::launchKernel(uint32_t step) {
  enqueueWork(currentStream(), [this, step] { inner_->launchKernel(step); });
}

void ScheduleBackend::runAdamW(const plan::Tensor& param, const plan::Tensor& grad, const plan::Tensor& m,
                               const plan::Tensor& v, const plan::AdamW& hyper, int64_t t,
                               const plan::Tensor* compute) {
  enqueueWork(currentStream(), [this, &param, &grad, &m, &v, hyper, t, compute] {
    inner_->runAdamW(param, grad, m, v, hyper, t, compute);
  });
}

void ScheduleBackend::runAccumulate(const plan::Tensor& acc, const plan::Tensor& addend) {
  enqueueWork(currentStream(), [this, &acc, &addend] { inner_->runAccumulate(acc, addend); });
}

void ScheduleBackend::readLoss(const plan::Tensor& readout, double* loss) {
  enqueueWork(currentStream(), [this, &readout, loss] { inner_->readLoss(readout, loss); });
}

void ScheduleBackend::recordEvent(const std::string& event, const std::string& stream) {
  Entry entry;
  entry.kind = Entry::Kind::Record;
  entry.event = event;
  entry.record = ++nextRecord_;
  events_[event].latestQueued = entry.record;
  enqueue(stream, std::move(entry));
}

void ScheduleBackend::waitEvent(const std::string& event, const std::string& stream) {
  Entry entry;
  entry.kind = Entry::Kind::Wait;
  entry.event = event;
  auto it = events_.find(event);
  entry.record = it == events_.end() ? 0 : it->second.latestQueued;  // what cudaStreamWaitEvent sees now
  enqueue(stream, std::move(entry));
}

void ScheduleBackend::poisonOnStream(const plan::Tensor& tensor, const std::string& stream) {
  enqueueWork(stream, [this, &tensor] { inner_->poison(tensor); }, "poison " + tensor.name());
}

void ScheduleBackend::poison(const plan::Tensor& tensor) {
  drain();
  inner_->poison(tensor);
}

void ScheduleBackend::write(const plan::Tensor& tensor, const void* bytes, size_t size) {
  drain();
  inner_->write(tensor, bytes, size);
}

void ScheduleBackend::read(const plan::Tensor& tensor, void* bytes, size_t size) const {
  drain();
  inner_->read(tensor, bytes, size);
}

std::byte* ScheduleBackend::hostData(const plan::Tensor& tensor) {
  drain();
  return inner_->hostData(tensor);
}

bool ScheduleBackend::ready(const Entry& entry) const {
  if (entry.kind != Entry::Kind::Wait || entry.record == 0) return true;
  auto it = events_.find(entry.event);
  return it != events_.end() && it->second.done.count(entry.record) != 0;
}

namespace {
const std::string kHost = "host";
std::string hostMark(uint32_t step) { return "host task " + std::to_string(step); }
}  // namespace

void ScheduleBackend::markHostTask(uint32_t step) { recordEvent(hostMark(step), currentStream()); }

void ScheduleBackend::waitHostTask(uint32_t step, const std::string& stream) {
  if (!options_.ignoreHostWaits) waitEvent(hostMark(step), stream);
}

bool ScheduleBackend::onlyHostLeft() const {
  for (const auto& [name, queue] : queues_)
    if (name != kHost && !queue.empty()) return false;
  return true;
}

void ScheduleBackend::finishStepBeforeHost(uint32_t lossStep) {
  const std::string mark = hostMark(lossStep);
  drainUntil([&] {
    auto it = events_.find(mark);
    return onlyHostLeft() && it != events_.end() && it->second.done.count(it->second.latestQueued) != 0;
  });
  auto host = queues_.find(kHost);
  hostLeft_ = host == queues_.end() ? 0 : host->second.size();
}

void ScheduleBackend::writeBesideHostTasks(const plan::Tensor& tensor, const void* bytes, size_t size) {
  if (plan_ && plan_->pools(static_cast<int>(tensor.buffer().pool())).tier() != plan::DEVICE)
    return write(tensor, bytes, size);
  drainUntil([&] { return onlyHostLeft(); });
  inner_->write(tensor, bytes, size);
}

void ScheduleBackend::drainUntil(const std::function<bool()>& done) const {
  std::vector<size_t> candidates;
  for (;;) {
    if (done()) return;
    candidates.clear();
    bool work = false;
    for (size_t i = 0; i < streamNames_.size(); ++i) {
      const std::deque<Entry>& queue = queues_.at(streamNames_[i]);
      if (queue.empty()) continue;
      work = true;
      if (ready(queue.front())) candidates.push_back(i);
    }
    if (!work) return;
    if (candidates.empty()) {
      std::string blocked;
      for (const std::string& name : streamNames_) {
        const std::deque<Entry>& queue = queues_.at(name);
        if (queue.empty()) continue;
        blocked += (blocked.empty() ? "" : ", ") + name + " at step " + std::to_string(queue.front().step) +
                   " (wait " + queue.front().event + ")";
      }
      throw Error("schedule backend: deadlock: every stream with work waits for an event that never completes: " +
                  blocked);
    }
    auto front = [&](size_t i) -> const Entry& { return queues_.at(streamNames_[i]).front(); };
    size_t pick = candidates.front();
    switch (options_.policy) {
      case SchedulePolicy::Random:
        pick = candidates[std::uniform_int_distribution<size_t>(0, candidates.size() - 1)(rng_)];
        break;
      case SchedulePolicy::Behind:
        for (size_t i : candidates)
          if (front(i).issued < front(pick).issued) pick = i;
        break;
      case SchedulePolicy::Ahead:
        for (size_t i : candidates)
          if (front(i).issued > front(pick).issued) pick = i;
        break;
      case SchedulePolicy::Starve: {
        std::vector<size_t> others;
        for (size_t i : candidates)
          if (streamNames_[i] != options_.starved) others.push_back(i);
        if (!others.empty())
          pick = others[std::uniform_int_distribution<size_t>(0, others.size() - 1)(rng_)];
        break;
      }
    }
    std::deque<Entry>& queue = queues_.at(streamNames_[pick]);
    Entry entry = std::move(queue.front());
    queue.pop_front();
    for (size_t i = 0; i < streamNames_.size(); ++i) {
      const std::deque<Entry>& other = queues_.at(streamNames_[i]);
      if (i != pick && !other.empty() && other.front().issued < entry.issued) {
        ++overtaking_;
        break;
      }
    }
    ++entriesRun_;
    switch (entry.kind) {
      case Entry::Kind::Work:
        inner_->setCurrentStep(entry.step);
        try {
          entry.work();
        } catch (const Error& e) {
          throw Error("schedule backend: step " + std::to_string(entry.step) + ": " + e.what());
        }
        if (entry.traceAt < spans_.size())
          spans_[entry.traceAt] = StepSpan{double(entriesRun_), double(entriesRun_ + 1)};
        break;
      case Entry::Kind::Record:
        events_[entry.event].done.insert(entry.record);
        break;
      case Entry::Kind::Wait:
        break;
    }
  }
}

uint64_t ScheduleBackend::hostQueued() const {
  auto host = queues_.find(kHost);
  return host == queues_.end() ? 0 : host->second.size();
}

void ScheduleBackend::beginStepTrace(uint32_t steps) {
  if (!plan_) throw Error("schedule backend: prepare() was not called");
  drain();  // as the CUDA backend: the window starts on an idle device
  traceBase_ = 0;
  traceSize_ = static_cast<size_t>(plan_->steps_size()) * steps;
  spans_.assign(traceSize_, StepSpan{std::numeric_limits<double>::quiet_NaN(),
                                     std::numeric_limits<double>::quiet_NaN()});
  hostAtStarts_.assign(1, hostQueued());
  tracing_ = true;
}

void ScheduleBackend::nextTracedStep() {
  if (!tracing_) throw Error("schedule backend: nextTracedStep without beginStepTrace");
  traceBase_ += static_cast<size_t>(plan_->steps_size());
  if (traceBase_ >= traceSize_) throw Error("schedule backend: the traced window has no more steps");
  hostAtStarts_.push_back(hostQueued());
}

std::vector<StepSpan> ScheduleBackend::endStepTrace() {
  if (!tracing_) return {};
  drain();
  tracing_ = false;
  return std::move(spans_);
}

}  // namespace megatrain::runtime::testing
