// CudaBackendHostTasks.cpp - the CUDA backend's host tasks (AdamW, ACCUMULATE, READ_LOSS), run in stream order through cudaLaunchHostFunc.
//
// A host task of device-resident tensors is a kernel on its step's stream
// instead (the fused AdamW, the accumulate), timed by the step trace as the
// kernel steps are. A host task is enqueued on its step's stream, so it runs after the waits
// before it and a record after it completes when it returns: the host
// optimizer overlaps the rest of backward and nothing on the host waits for
// the device within a step. A host function calls no CUDA; what it throws is
// kept (the first failure; later host tasks are skipped) and rethrown with its
// step by the next drain() (CudaBackend.cpp).
#include <cuda_runtime.h>

#include <exception>
#include <mutex>
#include <string>

#include "CudaBackendImpl.h"
#include "DeviceAdamW.h"
#include "megatrain/runtime/Accumulate.h"
#include "megatrain/runtime/AdamW.h"
#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"

namespace megatrain::runtime::cuda {

// prepare()'s step: one slot per plan step.
void CudaBackend::prepareHostTaskSlots(const plan::Plan& plan) {
  hostSlots_.assign(2 * static_cast<size_t>(plan.steps_size()), HostTaskSlot{});
  slotHalf_ = 0;
}

HostTaskSlot& CudaBackend::hostSlot(HostTaskSlot::Kind kind) {
  if (!plan_) throw Error("cuda backend: prepare() was not called");
  // Outside a plan step (a direct call): one slot, run at once by enqueueHostTask.
  const size_t steps = hostSlots_.size() / 2;
  HostTaskSlot& slot = currentStep_ < steps ? hostSlots_[currentStep_ + slotHalf_ * steps] : looseSlot_;
  slot = HostTaskSlot{};
  slot.kind = kind;
  slot.backend = this;
  slot.step = currentStep_;
  slot.traceAt = traceIndex();
  return slot;
}

void CudaBackend::enqueueHostTask(HostTaskSlot& slot) {
  if (&slot == &looseSlot_) {
    drain();
    runHostTask(&slot);
    drain();  // reports what it threw
    return;
  }
  MT_CUDA_CHECK(cudaLaunchHostFunc(currentStream(), &CudaBackend::runHostTask, &slot));
  if (recording_) graphHostTasks_.push_back(slot.step);
  if (syncEveryKernel_) drain();
}

void CudaBackend::hostFailed(uint32_t step, const std::string& what) {
  std::lock_guard<std::mutex> lock(hostErrorMutex_);
  if (hostFailed_.load()) return;  // the first failure is the one to report
  hostError_ = "cuda backend: step " + std::to_string(step) + " (host task): " + what;
  hostFailed_.store(true);
}

void CUDART_CB CudaBackend::runHostTask(void* opaque) {
  HostTaskSlot& slot = *static_cast<HostTaskSlot*>(opaque);
  CudaBackend& self = *slot.backend;
  // After a failure the host state is suspect: skip until it is reported.
  if (self.hostFailed_.load()) return;
  const bool traced = slot.traceAt != HostTaskSlot::kUntraced;
  const double start = traced ? self.hostSeconds() : 0;
  try {
    switch (slot.kind) {
      case HostTaskSlot::Kind::AdamW:
        adamwUpdate(slot.dtype, slot.a, slot.b, slot.m, slot.v, slot.count, slot.hyper, slot.t, slot.compute);
        break;
      case HostTaskSlot::Kind::Accumulate:
        accumulate(slot.dtype, slot.a, slot.b, slot.count);
        break;
      case HostTaskSlot::Kind::ReadLoss:
        *slot.loss = scalarAsDouble(slot.a, slot.dtype);
        break;
    }
  } catch (const std::exception& e) {
    self.hostFailed(slot.step, e.what());
  } catch (...) {
    self.hostFailed(slot.step, "unknown exception");
  }
  // The window's spans_ keep their size until endStepTrace, which first waits for every host task.
  if (traced && slot.traceAt < self.spans_.size()) self.spans_[slot.traceAt] = StepSpan{start, self.hostSeconds()};
}

void CudaBackend::runAdamW(const plan::Tensor& param, const plan::Tensor& grad, const plan::Tensor& m,
                           const plan::Tensor& v, const plan::AdamW& hyper, int64_t t,
                           const plan::Tensor* compute) {
  // A device-resident parameter (docs/tiering.md "State homes"): the fused
  // kernel on the step's stream (the plan validator checked that all of its
  // tensors are on the device).
  if (onDevice(param)) {
    for (const plan::Tensor* tensor : {&grad, &m, &v, compute})
      if (tensor && !onDevice(*tensor))
        throw Error("cuda backend: AdamW of device-resident '" + param.name() + "': operand '" + tensor->name() +
                    "' is in host memory");
    traceBegin(currentStream());
    launchAdamW(param.dtype(), address(param), address(grad), address(m), address(v),
                static_cast<size_t>(elementCount(param.shape())), hyper, t,
                compute ? reinterpret_cast<uint16_t*>(address(*compute)) : nullptr, currentStream());
    if (recording_ && elementCount(param.shape()) > 0) recordAdamWNode(currentStream(), param.dtype());
    traceEnd(currentStream());
    if (syncEveryKernel_) drain();
    return;
  }
  for (const plan::Tensor* tensor : {&param, &grad, &m, &v, compute})
    if (tensor && onDevice(*tensor))
      throw Error("cuda backend: AdamW operand '" + tensor->name() + "' is in device memory; it runs on the host");
  // In stream order: the plan's waits before this step make the gradient's
  // device-to-host copy land first.
  HostTaskSlot& slot = hostSlot(HostTaskSlot::Kind::AdamW);
  slot.dtype = param.dtype();
  slot.a = address(param);
  slot.b = address(grad);
  slot.m = address(m);
  slot.v = address(v);
  slot.compute = compute ? reinterpret_cast<uint16_t*>(address(*compute)) : nullptr;
  slot.count = static_cast<size_t>(elementCount(param.shape()));
  slot.hyper = hyper;
  slot.t = t;
  enqueueHostTask(slot);
}

void CudaBackend::runAccumulate(const plan::Tensor& acc, const plan::Tensor& addend) {
  if (onDevice(acc) && onDevice(addend)) {
    if (acc.dtype() != addend.dtype() || elementCount(acc.shape()) != elementCount(addend.shape()))
      throw Error("cuda backend: ACCUMULATE of '" + addend.name() + "' into '" + acc.name() +
                  "': dtypes or element counts differ");
    traceBegin(currentStream());
    launchAccumulate(acc.dtype(), address(acc), address(addend), static_cast<size_t>(elementCount(acc.shape())),
                     currentStream());
    traceEnd(currentStream());
    if (syncEveryKernel_) drain();
    return;
  }
  for (const plan::Tensor* tensor : {&acc, &addend})
    if (onDevice(*tensor))
      throw Error("cuda backend: ACCUMULATE operand '" + tensor->name() + "' is in device memory; it runs on the host");
  if (acc.dtype() != addend.dtype() || elementCount(acc.shape()) != elementCount(addend.shape()))
    throw Error("cuda backend: ACCUMULATE of '" + addend.name() + "' into '" + acc.name() +
                "': dtypes or element counts differ");
  HostTaskSlot& slot = hostSlot(HostTaskSlot::Kind::Accumulate);
  slot.dtype = acc.dtype();
  slot.a = address(acc);
  slot.b = address(addend);
  slot.count = static_cast<size_t>(elementCount(acc.shape()));
  enqueueHostTask(slot);
}

void CudaBackend::readLoss(const plan::Tensor& readout, double* loss) {
  if (onDevice(readout)) throw Error("cuda backend: loss readout '" + readout.name() + "' is in device memory");
  HostTaskSlot& slot = hostSlot(HostTaskSlot::Kind::ReadLoss);
  slot.dtype = readout.dtype();
  slot.a = address(readout);
  slot.loss = loss;
  enqueueHostTask(slot);
}

}  // namespace megatrain::runtime::cuda
