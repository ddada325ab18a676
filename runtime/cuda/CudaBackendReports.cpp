// CudaBackendReports.cpp - what the CUDA backend measures for the user: the step trace (--trace) and the device memory report.
//
// Trace: for the traced window's steps only, a timing event before and after
// every kernel and copy on its stream, and host clock readings inside host
// tasks, aligned through an event recorded on the idle device at the window's
// start. The later steps of a window start beside the previous step's host
// tasks, which keep their own spans (HostTaskSlot::traceAt). The timing events
// are made as the first window that needs them starts; without tracing none
// exist. Memory: cudaMemGetInfo when the backend starts (the constructor,
// CudaBackend.cpp), before and after prepare(), with the arena, scratch and
// workspaces prepare() allocated.
#include <cuda_runtime.h>

#include <chrono>
#include <limits>

#include "CudaBackendImpl.h"
#include "megatrain/plan/Error.h"

namespace megatrain::runtime::cuda {

// ---- the memory report ----

// prepare()'s first step, after the previous plan's memory is released.
void CudaBackend::recordMemoryBeforePrepare() {
  size_t free = 0, total = 0;
  MT_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  totalBytes_ = total;
  beforePrepare_ = total - free;
}

uint64_t CudaBackend::deviceUsedBytes() const {
  size_t free = 0, total = 0;
  MT_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return total - free;
}

std::optional<DeviceMemory> CudaBackend::deviceMemory() const {
  size_t free = 0, total = 0;
  MT_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return DeviceMemory{free, total};
}

std::optional<DeviceMemoryReport> CudaBackend::memoryReport() const {
  if (!plan_) return std::nullopt;
  DeviceMemoryReport report;
  report.totalBytes = totalBytes_;
  report.contextBytes = contextBytes_;
  report.beforePrepare = beforePrepare_;
  report.afterPrepare = afterPrepare_;
  for (const Pool& pool : pools_)
    if (pool.tier == plan::DEVICE) report.arenaBytes += pool.bytes;
  report.scratchBytes = context_.scratchBytes;
  report.workspaceBytes = kCublasWorkspaceBytes + MatmulPlanner::kWorkspaceBytes;
  report.budgetBytes = plan_->header().device_budget_bytes();
  report.fixedWorkspaceBytes = kCudaFixedWorkspaceBytes;
  return report;
}

// ---- the step trace ----

size_t CudaBackend::traceIndex() const {
  if (!tracing_ || !plan_ || currentStep_ >= static_cast<size_t>(plan_->steps_size())) return HostTaskSlot::kUntraced;
  return traceBase_ + currentStep_;
}

void CudaBackend::traceBegin(cudaStream_t stream) {
  const size_t at = traceIndex();
  if (at != HostTaskSlot::kUntraced) MT_CUDA_CHECK(cudaEventRecord(traceStart_[at], stream));
}

void CudaBackend::traceEnd(cudaStream_t stream) {
  const size_t at = traceIndex();
  if (at == HostTaskSlot::kUntraced) return;
  MT_CUDA_CHECK(cudaEventRecord(traceEnd_[at], stream));
  timed_[at] = true;
}

double CudaBackend::hostSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - hostOrigin_).count();
}

void CudaBackend::beginStepTrace(uint32_t window) {
  if (!plan_) throw Error("cuda backend: prepare() was not called");
  if (window == 0) throw Error("cuda backend: a traced window of no steps");
  drain();
  traceWindow_ = window;
  traceBase_ = 0;
  const size_t steps = static_cast<size_t>(plan_->steps_size()) * window;
  if (!traceOrigin_) MT_CUDA_CHECK(cudaEventCreate(&traceOrigin_));
  while (traceStart_.size() < steps) {
    cudaEvent_t start = nullptr, end = nullptr;
    MT_CUDA_CHECK(cudaEventCreate(&start));
    traceStart_.push_back(start);
    MT_CUDA_CHECK(cudaEventCreate(&end));
    traceEnd_.push_back(end);
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  spans_.assign(steps, StepSpan{nan, nan});
  timed_.assign(steps, false);
  // The device is idle: the origin event completes at once, and the host
  // clock read right after it is the same instant (to a few microseconds).
  MT_CUDA_CHECK(cudaEventRecord(traceOrigin_, compute_));
  MT_CUDA_CHECK(cudaEventSynchronize(traceOrigin_));
  hostOrigin_ = std::chrono::steady_clock::now();
  tracing_ = true;
}

void CudaBackend::nextTracedStep() {
  if (!tracing_) throw Error("cuda backend: nextTracedStep without beginStepTrace");
  const size_t steps = static_cast<size_t>(plan_->steps_size());
  if (traceBase_ + steps >= steps * traceWindow_)
    throw Error("cuda backend: a traced window of " + std::to_string(traceWindow_) + " steps has no more");
  traceBase_ += steps;
}

std::vector<StepSpan> CudaBackend::endStepTrace() {
  if (!tracing_) return {};
  drain();  // every host task of the window has written its span
  tracing_ = false;
  traceBase_ = 0;
  for (size_t s = 0; s < timed_.size(); ++s) {
    if (!timed_[s]) continue;
    float startMs = 0, endMs = 0;
    MT_CUDA_CHECK(cudaEventElapsedTime(&startMs, traceOrigin_, traceStart_[s]));
    MT_CUDA_CHECK(cudaEventElapsedTime(&endMs, traceOrigin_, traceEnd_[s]));
    spans_[s] = StepSpan{startMs * 1e-3, endMs * 1e-3};
  }
  return spans_;
}

}  // namespace megatrain::runtime::cuda
