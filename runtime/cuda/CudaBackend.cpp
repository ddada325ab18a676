// CudaBackend.cpp - the CUDA backend: its device state, prepare() as a sequence of named steps, kernel launches and synchronization.
//
// The backend runs a plan on one GPU behind the Backend interface (docs/cuda.md).
// It allocates everything in prepare() and nothing while steps run; kernels go
// to one compute stream, every other plan stream gets a CUDA stream of its own,
// and the plan's record/wait steps become CUDA events one for one, so the host
// waits for the device only at synchronize(). One class (CudaBackendImpl.h),
// its members defined by job:
//
//   CudaBackend.cpp            the device, cuBLAS and the bad-data word (made once,
//                              in the constructor); prepare(); kernel steps resolved
//                              once (bf16 attention's cuDNN graphs with them, through
//                              its scratch function), their cuBLASLt plans and the shared scratch;
//                              launches; drain() and synchronize(), where host task
//                              failures and kernels' bad-data flags are reported
//   CudaBackendMemory.cpp      pools (DEVICE and HOST_PINNED), copies, poisoning, host
//                              reads and writes; the CUDA stream of each plan stream
//                              and the events of the record/wait steps
//   CudaBackendHostTasks.cpp   AdamW, ACCUMULATE and READ_LOSS enqueued on their
//                              stream with cudaLaunchHostFunc (HostTaskSlot)
//   CudaBackendDisk.cpp        DISK pools: a file each (DiskTier), copies to and from
//                              pinned staging by the disk I/O thread in the disk
//                              stream's order (an event and a stream wait on a flag)
//   CudaBackendGraph.cpp       a training step recorded as a CUDA graph and replayed
//   CudaBackendReports.cpp     the step trace (--trace) and the device memory report
//
// prepare() takes its steps in this order, which is also the order of its CUDA
// calls: measure the device, check the device budget, streams, pools, disk
// files, host task slots, events, kernel steps, cuBLASLt plans, scratch,
// measure again.
#include "CudaBackend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "CudaBackendImpl.h"
#include "DeviceSupport.h"
#include "EnvSetting.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/Format.h"
#include "megatrain/plan/Streams.h"
#include "megatrain/runtime/KernelBinding.h"

namespace megatrain::runtime::cuda {
namespace {

constexpr size_t kScratchAlignment = 256;

}  // namespace

CudaBackend::CudaBackend(int device, const CudaOptions& options) : device_(device) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0)
    throw Error(std::string("cuda backend: no CUDA device is usable (") +
                (status == cudaSuccess ? "none found" : cudaGetErrorString(status)) + ")");
  if (device < 0 || device >= count)
    throw Error("cuda backend: device " + std::to_string(device) + " does not exist (" + std::to_string(count) +
                " found)");
  MT_CUDA_CHECK(cudaSetDevice(device));
  MT_CUDA_CHECK(cudaFree(nullptr));  // makes the context now, so that the memory report sees it
  checkDeviceSupported(device);
  MT_CUDA_CHECK(cudaDeviceGetAttribute(&context_.smCount, cudaDevAttrMultiProcessorCount, device));
  // The compute stream at the device's greatest priority: kernels on other
  // streams (the device AdamW on `optimizer`, megatrain-compile
  // --optimizer-stream) take the SMs the step's kernels leave free.
  int leastPriority = 0, greatestPriority = 0;
  MT_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&leastPriority, &greatestPriority));
  MT_CUDA_CHECK(cudaStreamCreateWithPriority(&compute_, cudaStreamNonBlocking, greatestPriority));
  MT_CUBLAS_CHECK(cublasCreate(&cublas_));
  MT_CUBLAS_CHECK(cublasSetStream(cublas_, compute_));
  // Plain fp32 / fp64 arithmetic: no TF32 or other reduced-precision paths,
  // so that F32 results stay within 1e-5 of the CPU reference.
  MT_CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
  MT_CUBLAS_CHECK(cublasSetPointerMode(cublas_, CUBLAS_POINTER_MODE_HOST));
  // The context and cuBLAS's own state: in use before this backend allocates anything.
  contextBytes_ = deviceUsedBytes();
  // A workspace of our own, so cuBLAS allocates nothing while the steps run
  // (cublasSetStream resets it, hence after).
  MT_CUDA_CHECK(cudaMalloc(&cublasWorkspace_, kCublasWorkspaceBytes));
  MT_CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublasWorkspace_, kCublasWorkspaceBytes));
  MT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&badData_), sizeof(int), cudaHostAllocMapped));
  *badData_ = 0;
  MT_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&context_.badData), badData_, 0));
  context_.stream = compute_;
  context_.cublas = cublas_;
  attention_ = std::make_unique<CudnnAttention>(compute_);  // its cuDNN handle comes with the first bf16 attention
  context_.attention = attention_.get();
  auto flag = [](const char* name) {
    const char* value = std::getenv(name);
    return value && *value && std::strcmp(value, "0") != 0;
  };
  syncEveryKernel_ = flag("MEGATRAIN_CUDA_SYNC");
  poison_ = options.poison || flag("MEGATRAIN_POISON");
  overlapHost_ = options.overlapHostTasks && envChoice("MEGATRAIN_CUDA_HOST_OVERLAP", {"0", "1"}) != 0;
  switch (envChoice("MEGATRAIN_CUDA_GRAPHS", {"0", "1", "auto"})) {
    case 0: stepGraphs_ = CudaOptions::StepGraphs::Off; break;
    case 1: stepGraphs_ = CudaOptions::StepGraphs::On; break;
    case 2: stepGraphs_ = CudaOptions::StepGraphs::Auto; break;
    default: stepGraphs_ = options.stepGraphs;
  }
}

// Frees everything, checking nothing: a destructor must not throw, and an
// earlier error has already been reported.
CudaBackend::~CudaBackend() {
  if (compute_) cudaStreamSynchronize(compute_);
  for (cudaStream_t stream : ownStreams_) cudaStreamSynchronize(stream);
  releasePlanMemory();
  stopDiskThread();
  attention_.reset();  // its cuDNN handle is bound to compute_
  if (recordFork_) cudaEventDestroy(recordFork_);
  for (cudaEvent_t event : recordJoins_) cudaEventDestroy(event);
  for (cudaEvent_t event : traceStart_) cudaEventDestroy(event);
  for (cudaEvent_t event : traceEnd_) cudaEventDestroy(event);
  if (traceOrigin_) cudaEventDestroy(traceOrigin_);
  for (cudaStream_t stream : ownStreams_) cudaStreamDestroy(stream);
  if (badData_) cudaFreeHost(badData_);
  if (staging_) cudaFreeHost(staging_);
  for (cudaEvent_t event : stagingFree_)
    if (event) cudaEventDestroy(event);
  if (cublasWorkspace_) cudaFree(cublasWorkspace_);
  if (cublas_) cublasDestroy(cublas_);
  if (compute_) cudaStreamDestroy(compute_);
}

// What prepare() made for one plan; the CUDA streams, the matmul planner and
// the trace's events stay for the next.
void CudaBackend::releasePlanMemory() {
  releaseStepGraph();
  recordingRefused_ = false;
  recordingFailure_.clear();
  for (auto& [name, event] : events_) cudaEventDestroy(event);
  events_.clear();
  for (Pool& pool : pools_) {
    if (!pool.base) continue;
    if (pool.tier == plan::DEVICE) cudaFree(pool.base);
    else releasePinned(pool);
  }
  pools_.clear();
  releaseDiskPools();
  if (scratch_) cudaFree(scratch_);
  scratch_ = nullptr;
  context_.scratch = nullptr;
  context_.scratchBytes = 0;
  kernels_.clear();
  hostSlots_.clear();
  slotHalf_ = 0;
  for (auto& [step, event] : hostMarks_) cudaEventDestroy(event);
  hostMarks_.clear();
  streams_.clear();  // the CUDA streams stay in ownStreams_ for the next plan
  plan_ = nullptr;
}

const kernels::KernelSpec* CudaBackend::findKernel(const std::string& name) const {
  const CudaKernelRegistry::Registered* registered = cudaKernels().find(name);
  return registered ? registered->spec : nullptr;
}

void CudaBackend::prepare(const plan::Plan& plan) {
  drain();
  releasePlanMemory();
  recordMemoryBeforePrepare();
  checkDeviceBudget(plan);
  plan_ = &plan;
  assignStreams(plan);
  allocatePools(plan);
  openDiskPools(plan);
  prepareHostTaskSlots(plan);
  createEvents(plan);
  attention_->beginPlan();
  const size_t largestScratch = resolveKernelSteps(plan);
  planMatmuls(plan);
  allocateScratch(largestScratch);
  drain();
  afterPrepare_ = deviceUsedBytes();
}

// Each Kernel step into a Launch (device addresses, shapes, dtypes,
// attributes, by the binding the CPU backend and the validator use), checked
// against its kernel's shape rule; a launch only reads it.
size_t CudaBackend::resolveKernelSteps(const plan::Plan& plan) {
  kernels_.assign(static_cast<size_t>(plan.steps_size()), PreparedKernel{});
  size_t scratch = 0;
  for (int i = 0; i < plan.steps_size(); ++i) {
    const plan::Step& step = plan.steps(i);
    if (step.op_case() != plan::Step::kKernel) continue;
    const plan::Kernel& kernel = step.kernel();
    PreparedKernel& prepared = kernels_[static_cast<size_t>(i)];
    prepared.kernel = cudaKernels().find(kernel.kernel());
    if (!prepared.kernel) throw Error("cuda backend: step " + std::to_string(i) + ": unknown kernel '" + kernel.kernel() + "'");
    Launch& launch = prepared.launch;
    try {
      bindKernelCall(plan, i, [&](const plan::Tensor& tensor) { return operandAddress(tensor); }, launch);
      launch.device = &context_;
      kernels::checkKernelCall(*prepared.kernel->spec, launch);
      if (prepared.kernel->entry.scratchBytes)
        scratch = std::max(scratch, prepared.kernel->entry.scratchBytes(launch));
      if (prepared.kernel->entry.prepare) prepared.kernel->entry.prepare(launch);
    } catch (const Error& e) {
      throw Error("cuda backend: step " + std::to_string(i) + ": " + e.what());
    }
  }
  return scratch;
}

// cuBLASLt: the workspace once, an algorithm per distinct f32/bf16 matmul
// (MatmulPlanner.h).
void CudaBackend::planMatmuls(const plan::Plan& plan) {
  if (!matmul_) matmul_ = std::make_unique<MatmulPlanner>();
  context_.matmul = matmul_.get();
  matmul_->beginPlan(plan.steps_size());
  for (const PreparedKernel& prepared : kernels_) {
    if (!prepared.kernel) continue;
    try {
      matmul_->prepare(prepared.launch);
    } catch (const Error& e) {
      throw Error("cuda backend: step " + std::to_string(prepared.launch.step) + ": " + e.what());
    }
  }
}

// One device scratch for every kernel step, the largest any step asks for; it
// and the two workspaces must fit the fixed workspace beyond the budget.
void CudaBackend::allocateScratch(size_t largestScratch) {
  context_.scratchBytes = (largestScratch + kScratchAlignment - 1) / kScratchAlignment * kScratchAlignment;
  if (context_.scratchBytes + kCublasWorkspaceBytes + MatmulPlanner::kWorkspaceBytes > kCudaFixedWorkspaceBytes)
    throw Error("cuda backend: the kernels' scratch (" + formatBytes(context_.scratchBytes) +
                ") and the cuBLAS and cuBLASLt workspaces (" +
                formatBytes(kCublasWorkspaceBytes + MatmulPlanner::kWorkspaceBytes) +
                ") exceed the fixed workspace of " + formatBytes(kCudaFixedWorkspaceBytes) +
                " allowed beyond the device budget");
  if (context_.scratchBytes) MT_CUDA_CHECK(cudaMalloc(&scratch_, context_.scratchBytes));
  context_.scratch = scratch_;
}

void CudaBackend::launchKernel(uint32_t step) {
  if (step >= kernels_.size() || !kernels_[step].kernel)
    throw Error("cuda backend: step " + std::to_string(step) + " is not a prepared kernel");
  const PreparedKernel& prepared = kernels_[step];
  traceBegin(compute_);
  prepared.kernel->entry.launch(prepared.launch);
  traceEnd(compute_);
  if (syncEveryKernel_) drain();
}

void CudaBackend::synchronize() {
  currentStep_ = kNoStep;
  drain();
}

void CudaBackend::drain(bool hostStream) const {
  auto host = streams_.find(plan::kHostStream);
  MT_CUDA_CHECK(cudaStreamSynchronize(compute_));
  for (cudaStream_t stream : ownStreams_)
    if (hostStream || host == streams_.end() || stream != host->second) MT_CUDA_CHECK(cudaStreamSynchronize(stream));
  reportFailures();
}

// A plan with a disk tier is refused by the executor (its disk copies wait on host updates).
bool CudaBackend::overlapsHostTasks() const {
  return overlapHost_ && plan_ && !canRecordSteps() && !poison_ && !syncEveryKernel_ &&
         streams_.count(plan::kHostStream) != 0;
}

void CudaBackend::markHostTask(uint32_t step) {
  cudaEvent_t& event = hostMarks_[step];
  if (!event) MT_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  MT_CUDA_CHECK(cudaEventRecord(event, currentStream()));
}

void CudaBackend::waitHostTask(uint32_t step, const std::string& stream) {
  auto it = hostMarks_.find(step);
  if (it != hostMarks_.end()) MT_CUDA_CHECK(cudaStreamWaitEvent(streamFor(stream), it->second, 0));
}

void CudaBackend::finishStepBeforeHost(uint32_t lossStep) {
  currentStep_ = kNoStep;
  drain(false);
  auto loss = hostMarks_.find(lossStep);
  if (loss == hostMarks_.end()) throw Error("cuda backend: the loss's host task (step " + std::to_string(lossStep) + ") was not marked");
  MT_CUDA_CHECK(cudaEventSynchronize(loss->second));
  reportFailures();
  slotHalf_ ^= 1;  // the next step's host tasks take the other slots
}

void CudaBackend::reportFailures() const {
  if (hostFailed_.load()) {
    std::string what;
    {
      std::lock_guard<std::mutex> lock(hostErrorMutex_);
      what = hostError_;
      hostError_.clear();
      hostFailed_.store(false);
    }
    throw Error(what);
  }
  const int flagged = *static_cast<volatile int*>(badData_);
  if (flagged == 0) return;
  *badData_ = 0;
  const size_t step = static_cast<size_t>(flagged - 1);
  std::string what = "a kernel flagged bad data";
  if (step < kernels_.size() && kernels_[step].kernel) {
    const PreparedKernel& prepared = kernels_[step];
    what = std::string(prepared.launch.kernel) + ": " +
           (prepared.kernel->entry.badData ? prepared.kernel->entry.badData : "bad data");
  }
  throw Error("cuda backend: step " + std::to_string(step) + " (" + what + ")");
}

}  // namespace megatrain::runtime::cuda

namespace megatrain::runtime {

std::unique_ptr<Backend> makeCudaBackend(int device) {
  return std::make_unique<cuda::CudaBackend>(device, CudaOptions{});
}

std::unique_ptr<Backend> makeCudaBackend(int device, const CudaOptions& options) {
  return std::make_unique<cuda::CudaBackend>(device, options);
}

int cudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver, no device: the answer is none
    return 0;
  }
  return count;
}

}  // namespace megatrain::runtime
