// CudaBackend.cpp - the CUDA backend: pools in device and pinned host memory, kernel steps resolved once, a CUDA stream per plan stream.
#include "CudaBackend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "CudaBackendImpl.h"
#include "megatrain/runtime/DType.h"
#include "megatrain/runtime/Error.h"
#include "megatrain/runtime/Format.h"
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
  MT_CUDA_CHECK(cudaDeviceGetAttribute(&context_.smCount, cudaDevAttrMultiProcessorCount, device));
  MT_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
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
  auto flag = [](const char* name) {
    const char* value = std::getenv(name);
    return value && *value && std::strcmp(value, "0") != 0;
  };
  syncEveryKernel_ = flag("MEGATRAIN_CUDA_SYNC");
  poison_ = options.poison || flag("MEGATRAIN_POISON");
}

// Frees everything, checking nothing: a destructor must not throw, and an
// earlier error has already been reported.
CudaBackend::~CudaBackend() {
  if (compute_) cudaStreamSynchronize(compute_);
  for (cudaStream_t stream : ownStreams_) cudaStreamSynchronize(stream);
  releasePlanMemory();
  for (cudaEvent_t event : traceStart_) cudaEventDestroy(event);
  for (cudaEvent_t event : traceEnd_) cudaEventDestroy(event);
  if (traceOrigin_) cudaEventDestroy(traceOrigin_);
  for (cudaStream_t stream : ownStreams_) cudaStreamDestroy(stream);
  if (badData_) cudaFreeHost(badData_);
  if (cublasWorkspace_) cudaFree(cublasWorkspace_);
  if (cublas_) cublasDestroy(cublas_);
  if (compute_) cudaStreamDestroy(compute_);
}

void CudaBackend::releasePlanMemory() {
  for (auto& [name, event] : events_) cudaEventDestroy(event);
  events_.clear();
  for (Pool& pool : pools_) {
    if (!pool.base) continue;
    if (pool.tier == plan::DEVICE) cudaFree(pool.base);
    else cudaFreeHost(pool.base);
  }
  pools_.clear();
  if (scratch_) cudaFree(scratch_);
  scratch_ = nullptr;
  context_.scratch = nullptr;
  context_.scratchBytes = 0;
  kernels_.clear();
  hostSlots_.clear();
  streams_.clear();  // the CUDA streams stay in ownStreams_ for the next plan
  plan_ = nullptr;
}

const kernels::KernelSpec* CudaBackend::findKernel(const std::string& name) const {
  const CudaKernelRegistry::Registered* registered = cudaKernels().find(name);
  return registered ? registered->spec : nullptr;
}

const Pool& CudaBackend::poolOf(const plan::Tensor& tensor) const {
  if (!plan_) throw Error("cuda backend: prepare() was not called");
  const uint32_t pool = tensor.buffer().pool();
  if (pool >= pools_.size())
    throw Error("cuda backend: tensor '" + tensor.name() + "' names pool " + std::to_string(pool));
  return pools_[pool];
}

void* CudaBackend::operandAddress(const plan::Tensor& tensor) const {
  if (!onDevice(tensor))
    throw Error("cuda backend: kernel operand '" + tensor.name() + "' is not in a DEVICE pool");
  return address(tensor);
}

cudaStream_t CudaBackend::streamFor(const std::string& stream) const {
  auto it = streams_.find(stream);
  return it == streams_.end() ? compute_ : it->second;
}

cudaStream_t CudaBackend::currentStream() const {
  if (currentStep_ == kNoStep || !plan_ || currentStep_ >= static_cast<uint32_t>(plan_->steps_size())) return compute_;
  return streamFor(plan_->steps(static_cast<int>(currentStep_)).stream());
}

void CudaBackend::prepare(const plan::Plan& plan) {
  drain();
  releasePlanMemory();
  recordMemoryBeforePrepare();
  checkDeviceBudget(plan);
  plan_ = &plan;
  assignStreams(plan);
  allocatePools(plan);
  prepareHostTaskSlots(plan);
  createEvents(plan);
  const size_t largestScratch = resolveKernelSteps(plan);
  planMatmuls(plan);
  allocateScratch(largestScratch);
  drain();
  afterPrepare_ = deviceUsedBytes();
}

// The device arena must fit the budget the plan was compiled for.
void CudaBackend::checkDeviceBudget(const plan::Plan& plan) const {
  uint64_t arena = 0;
  for (const plan::Pool& source : plan.pools())
    if (source.tier() == plan::DEVICE) arena += source.size_bytes();
  const uint64_t budget = plan.header().device_budget_bytes();
  if (budget > 0 && arena > budget)
    throw Error("cuda backend: the plan's device pools take " + formatBytes(arena) + " (" + std::to_string(arena) +
                " bytes), more than its device budget of " + formatBytes(budget) + " (" + std::to_string(budget) +
                " bytes)");
}

// The kernels' plan stream runs on compute_ (cuBLAS is bound to it), every
// other plan stream on a CUDA stream of its own, made once and kept for later
// plans. With MEGATRAIN_CUDA_SYNC=1 none is assigned: all run on compute_.
void CudaBackend::assignStreams(const plan::Plan& plan) {
  std::string kernelStream;
  for (const plan::Step& step : plan.steps()) {
    if (step.op_case() != plan::Step::kKernel) continue;
    if (kernelStream.empty()) kernelStream = step.stream();
    if (step.stream() != kernelStream)
      throw Error("cuda backend: step " + std::to_string(step.index()) + " runs a kernel on stream '" +
                  step.stream() + "', but kernels run on one stream ('" + kernelStream + "')");
  }
  if (syncEveryKernel_) return;
  size_t next = 0;
  auto give = [&](const std::string& name) {
    if (name.empty() || streams_.count(name)) return;
    if (name == kernelStream) {
      streams_[name] = compute_;
      return;
    }
    if (next == ownStreams_.size()) {
      cudaStream_t stream = nullptr;
      MT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      ownStreams_.push_back(stream);
    }
    streams_[name] = ownStreams_[next++];
  };
  if (!kernelStream.empty()) give(kernelStream);
  for (const std::string& name : plan.streams()) give(name);
  for (const plan::Step& step : plan.steps()) give(step.stream());
}

// One cudaMalloc per DEVICE pool, one cudaHostAlloc per HOST_PINNED pool, both
// filled with 0xFF bytes (NaN in every float type) so that a read before the
// first write shows up.
void CudaBackend::allocatePools(const plan::Plan& plan) {
  for (const plan::Pool& source : plan.pools()) {
    Pool pool;
    pool.tier = source.tier();
    pool.bytes = source.size_bytes();
    if (pool.bytes > 0) {
      if (pool.tier == plan::DEVICE) {
        MT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&pool.base), pool.bytes));
        MT_CUDA_CHECK(cudaMemsetAsync(pool.base, 0xFF, pool.bytes, compute_));
      } else if (pool.tier == plan::HOST_PINNED) {
        MT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&pool.base), pool.bytes, cudaHostAllocDefault));
        std::memset(pool.base, 0xFF, pool.bytes);
      } else {
        throw Error("cuda backend: pool '" + source.name() + "' has tier " + tierName(pool.tier) +
                    ", which this backend does not support");
      }
    }
    pools_.push_back(pool);
  }
}

// An event per recorded name, in the order of the record steps.
void CudaBackend::createEvents(const plan::Plan& plan) {
  for (const plan::Step& step : plan.steps()) {
    if (step.op_case() != plan::Step::kRecord) continue;
    cudaEvent_t& event = events_[step.record().event()];
    if (!event) MT_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  }
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

void CudaBackend::copy(const plan::Tensor& src, const plan::Tensor& dst) {
  const size_t bytes = dst.buffer().size_bytes();
  if (src.buffer().size_bytes() != bytes)
    throw Error("cuda backend: copy from '" + src.name() + "' (" + std::to_string(src.buffer().size_bytes()) +
                " bytes) to '" + dst.name() + "' (" + std::to_string(bytes) + " bytes)");
  const cudaStream_t stream = currentStream();
  traceBegin(stream);
  copyBytes(address(dst), address(src), bytes, stream);
  traceEnd(stream);
  if (syncEveryKernel_) drain();
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

void CudaBackend::recordEvent(const std::string& event, const std::string& stream) {
  auto it = events_.find(event);
  if (it == events_.end()) throw Error("cuda backend: event '" + event + "' was not prepared");
  MT_CUDA_CHECK(cudaEventRecord(it->second, streamFor(stream)));
}

void CudaBackend::waitEvent(const std::string& event, const std::string& stream) {
  auto it = events_.find(event);
  if (it == events_.end()) throw Error("cuda backend: event '" + event + "' was not prepared");
  MT_CUDA_CHECK(cudaStreamWaitEvent(streamFor(stream), it->second, 0));
}

void CudaBackend::synchronize() {
  currentStep_ = kNoStep;
  drain();
}

void CudaBackend::drain() const {
  MT_CUDA_CHECK(cudaStreamSynchronize(compute_));
  for (cudaStream_t stream : ownStreams_) MT_CUDA_CHECK(cudaStreamSynchronize(stream));
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

void CudaBackend::poison(const plan::Tensor& tensor) {
  // 0xFF bytes: NaN in every float dtype, -1 or 255 in the integer ones.
  const size_t bytes = tensor.buffer().size_bytes();
  if (onDevice(tensor)) {
    MT_CUDA_CHECK(cudaMemsetAsync(address(tensor), 0xFF, bytes, currentStream()));
  } else {
    drain();
    std::memset(address(tensor), 0xFF, bytes);
  }
}

void CudaBackend::poisonOnStream(const plan::Tensor& tensor, const std::string& stream) {
  // In the order of the stream that last used the tensor: a later reuse of
  // its bytes waits (through the plan's events) for that use, and so for this.
  const size_t bytes = tensor.buffer().size_bytes();
  if (onDevice(tensor)) {
    MT_CUDA_CHECK(cudaMemsetAsync(address(tensor), 0xFF, bytes, streamFor(stream)));
  } else {
    drain();
    std::memset(address(tensor), 0xFF, bytes);
  }
}

void CudaBackend::write(const plan::Tensor& tensor, const void* bytes, size_t size) {
  if (size != tensor.buffer().size_bytes())
    throw Error("tensor '" + tensor.name() + "': writing " + std::to_string(size) + " bytes into " +
                std::to_string(tensor.buffer().size_bytes()));
  drain();  // work in flight on any stream may still read or write these bytes
  if (onDevice(tensor)) {
    MT_CUDA_CHECK(cudaMemcpyAsync(address(tensor), bytes, size, cudaMemcpyHostToDevice, compute_));
    drain();  // the caller's bytes may be reused as soon as this returns
  } else {
    std::memcpy(address(tensor), bytes, size);
  }
}

void CudaBackend::read(const plan::Tensor& tensor, void* bytes, size_t size) const {
  if (size != tensor.buffer().size_bytes())
    throw Error("tensor '" + tensor.name() + "': reading " + std::to_string(size) + " bytes from " +
                std::to_string(tensor.buffer().size_bytes()));
  drain();
  if (onDevice(tensor)) {
    MT_CUDA_CHECK(cudaMemcpyAsync(bytes, address(tensor), size, cudaMemcpyDeviceToHost, compute_));
    drain();
  } else {
    std::memcpy(bytes, address(tensor), size);
  }
}

std::byte* CudaBackend::hostData(const plan::Tensor& tensor) {
  if (onDevice(tensor)) throw Error("cuda backend: tensor '" + tensor.name() + "' is in device memory");
  drain();  // a copy or host task in flight may still read or write these bytes
  return address(tensor);
}

}  // namespace megatrain::runtime::cuda

namespace megatrain::runtime {

std::unique_ptr<Backend> makeCudaBackend(int device) {
  return std::make_unique<cuda::CudaBackend>(device, CudaOptions{});
}

std::unique_ptr<Backend> makeCudaBackend(int device, const CudaOptions& options) {
  return std::make_unique<cuda::CudaBackend>(device, options);
}

}  // namespace megatrain::runtime
