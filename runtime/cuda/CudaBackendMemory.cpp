// CudaBackendMemory.cpp - the CUDA backend's pools, copies (a disk copy: CudaBackendDisk.cpp), poisoning and host reads and writes, and the streams and events that order them.
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <string>

#include "CudaBackendImpl.h"
#include "EnvSetting.h"
#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/Format.h"
#include "megatrain/plan/Streams.h"
#include "megatrain/runtime/HostThreads.h"
#include "megatrain/runtime/PlanStats.h"

namespace megatrain::runtime::cuda {

// ---- prepare()'s steps ----

// The device arena must fit the budget the plan was compiled for.
void CudaBackend::checkDeviceBudget(const plan::Plan& plan) const {
  // The budget is the arena's: a pool of device-resident training state only
  // (docs/tiering.md "State homes"), or of its staging (the accumulators'
  // visits), sits beside it.
  std::vector<bool> arenaPool(static_cast<size_t>(plan.pools_size()), false);
  for (const plan::Tensor& tensor : plan.tensors()) {
    const plan::Role role = tensor.role();
    const bool state = role == plan::PARAMETER || role == plan::GRADIENT || role == plan::OPTIMIZER_STATE ||
                       role == plan::PARAMETER_COMPUTE || role == plan::STATE_STAGE;
    if (!state && tensor.buffer().pool() < arenaPool.size()) arenaPool[tensor.buffer().pool()] = true;
  }
  uint64_t arena = 0;
  for (int i = 0; i < plan.pools_size(); ++i)
    if (plan.pools(i).tier() == plan::DEVICE && arenaPool[static_cast<size_t>(i)]) arena += plan.pools(i).size_bytes();
  const uint64_t budget = plan.header().device_budget_bytes();
  if (budget > 0 && arena > budget)
    throw Error("cuda backend: the plan's device pools take " + formatBytes(arena) + " (" + std::to_string(arena) +
                " bytes), more than its device budget of " + formatBytes(budget) + " (" + std::to_string(budget) +
                " bytes)");
}

// The stream whose kernels run at the compute stream's priority, or "": the
// `optimizer` stream when an update on it visits the device
// (updatesVisitTheDevice), since the visit holds a ring slot that the next
// fetch waits for; at a lower priority its blocks get SMs only between the
// step's kernels and the fetches queue behind it (docs/cuda.md "Stream
// priorities").
// MEGATRAIN_UPDATE_PRIORITY: auto (that rule), compute (always), low (never).
std::string CudaBackend::urgentKernelStream(const plan::Plan& plan) {
  const int choice = envChoice("MEGATRAIN_UPDATE_PRIORITY", {"auto", "compute", "low"});
  if (choice == 1) return plan::kOptimizerStream;
  if (choice == 2) return "";
  return updatesVisitTheDevice(plan) ? plan::kOptimizerStream : "";
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
  const std::string urgent = urgentKernelStream(plan);
  std::vector<bool> taken(ownStreams_.size(), false);
  auto give = [&](const std::string& name) {
    if (name.empty() || streams_.count(name)) return;
    if (name == kernelStream) {
      streams_[name] = compute_;
      return;
    }
    const bool high = name == urgent;
    size_t i = 0;
    while (i < ownStreams_.size() && (taken[i] || ownStreamHigh_[i] != high)) ++i;
    if (i == ownStreams_.size()) {
      int leastPriority = 0, greatestPriority = 0;
      MT_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&leastPriority, &greatestPriority));
      cudaStream_t stream = nullptr;
      MT_CUDA_CHECK(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking,
                                                 high ? greatestPriority : leastPriority));
      ownStreams_.push_back(stream);
      ownStreamHigh_.push_back(high);
      taken.push_back(false);
    }
    taken[i] = true;
    streams_[name] = ownStreams_[i];
  };
  if (!kernelStream.empty()) give(kernelStream);
  for (const std::string& name : plan.streams()) give(name);
  for (const plan::Step& step : plan.steps()) give(step.stream());
}

namespace {

// A HOST_PINNED pool of at least this size is mapped and registered rather
// than allocated by cudaHostAlloc (allocatePinned).
constexpr size_t kRegisterFrom = size_t{1} << 30;

// `bytes` of page-locked host memory filled with 0xFF. cudaHostAlloc zeroes
// and pins page by page on one thread: about 1.3 GB/s on the H200 machine, over
// a minute for a 100 GiB pool. A large pool is instead mapped with transparent
// huge pages, its pages touched by the host threads (the 0xFF fill), then
// registered with CUDA, which pins it for DMA as cudaHostAlloc would. Where the
// registration is refused it is cudaHostAlloc's. MEGATRAIN_HOST_REGISTER=0
// keeps every pool on cudaHostAlloc, =1 registers every pool (the GPU tests'
// way to run their small pools through this path).
std::byte* allocatePinned(size_t bytes, bool& registered) {
  registered = false;
  const char* setting = std::getenv("MEGATRAIN_HOST_REGISTER");
  const std::string mode = setting ? setting : "";
  const bool tryRegister = mode == "1" || (mode != "0" && bytes >= kRegisterFrom);
  if (tryRegister) {
    void* mapped = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped != MAP_FAILED) {
      ::madvise(mapped, bytes, MADV_HUGEPAGE);  // a hint: without THP the pages are 4 KiB
      hostParallelMemset(mapped, 0xFF, bytes);
      if (cudaHostRegister(mapped, bytes, cudaHostRegisterDefault) == cudaSuccess) {
        registered = true;
        return static_cast<std::byte*>(mapped);
      }
      (void)cudaGetLastError();  // the refusal is not an error of a later call
      ::munmap(mapped, bytes);
    }
  }
  std::byte* base = nullptr;
  MT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&base), bytes, cudaHostAllocDefault));
  hostParallelMemset(base, 0xFF, bytes);
  return base;
}

}  // namespace

void releasePinned(Pool& pool) {
  if (pool.registered) {
    cudaHostUnregister(pool.base);
    ::munmap(pool.base, pool.bytes);
  } else {
    cudaFreeHost(pool.base);
  }
}

// One cudaMalloc per DEVICE pool, page-locked host memory per HOST_PINNED pool
// (allocatePinned), both filled with 0xFF bytes (NaN in every float type) so
// that a read before the first write shows up.
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
        pool.base = allocatePinned(pool.bytes, pool.registered);
      } else if (pool.tier == plan::DISK) {
        // A file, opened by openDiskPools (CudaBackendDisk.cpp); no memory here.
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

// ---- addresses and streams ----

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

// ---- copies, events, poisoning ----

void CudaBackend::copy(const plan::Tensor& src, const plan::Tensor& dst) {
  const size_t bytes = dst.buffer().size_bytes();
  if (src.buffer().size_bytes() != bytes)
    throw Error("cuda backend: copy from '" + src.name() + "' (" + std::to_string(src.buffer().size_bytes()) +
                " bytes) to '" + dst.name() + "' (" + std::to_string(bytes) + " bytes)");
  if (onDisk(src) || onDisk(dst)) return copyDisk(src, dst);
  const cudaStream_t stream = currentStream();
  traceBegin(stream);
  copyBytes(address(dst), address(src), bytes, stream);
  traceEnd(stream);
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

void CudaBackend::poison(const plan::Tensor& tensor) {
  // 0xFF bytes: NaN in every float dtype, -1 or 255 in the integer ones.
  const size_t bytes = tensor.buffer().size_bytes();
  if (onDisk(tensor)) throw Error("cuda backend: cannot poison '" + tensor.name() + "': it is in a disk file");
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
  if (onDisk(tensor)) throw Error("cuda backend: cannot poison '" + tensor.name() + "': it is in a disk file");
  if (onDevice(tensor)) {
    MT_CUDA_CHECK(cudaMemsetAsync(address(tensor), 0xFF, bytes, streamFor(stream)));
  } else {
    drain();
    std::memset(address(tensor), 0xFF, bytes);
  }
}

// ---- host reads and writes: each waits for every stream first ----

void CudaBackend::write(const plan::Tensor& tensor, const void* bytes, size_t size) {
  if (size != tensor.buffer().size_bytes())
    throw Error("tensor '" + tensor.name() + "': writing " + std::to_string(size) + " bytes into " +
                std::to_string(tensor.buffer().size_bytes()));
  if (onDisk(tensor)) return writeDisk(tensor, bytes, size);
  drain();  // work in flight on any stream may still read or write these bytes
  if (onDevice(tensor)) {
    // Returns once the bytes are on the device: the caller may reuse its buffer.
    stagedTransfer(address(tensor), static_cast<std::byte*>(const_cast<void*>(bytes)), size, true);
  } else {
    hostParallelMemcpy(address(tensor), bytes, size);
  }
}

void CudaBackend::writeBesideHostTasks(const plan::Tensor& tensor, const void* bytes, size_t size) {
  // The host stream's tasks touch host memory only: a device tensor waits for the other streams.
  if (onDisk(tensor) || !onDevice(tensor) || size != tensor.buffer().size_bytes()) return write(tensor, bytes, size);
  drain(false);
  stagedTransfer(address(tensor), static_cast<std::byte*>(const_cast<void*>(bytes)), size, true,
                 /*besideHostTasks=*/true);
}

void CudaBackend::zero(const plan::Tensor& tensor) {
  if (onDisk(tensor)) return Backend::zero(tensor);
  drain();
  if (onDevice(tensor)) {
    MT_CUDA_CHECK(cudaMemsetAsync(address(tensor), 0, tensor.buffer().size_bytes(), compute_));
    drain();
  } else {
    hostParallelMemset(address(tensor), 0, tensor.buffer().size_bytes());
  }
}

namespace {
constexpr size_t kStagingHalf = size_t{32} << 20;
}

void CudaBackend::stagedTransfer(std::byte* device, std::byte* host, size_t size, bool toDevice,
                                 bool besideHostTasks) const {
  // Beside the host stream's tasks the copies into the staging are plain
  // (those tasks hold the host threads) and the end waits for these copies
  // alone, not for the tasks.
  auto copy = [&](void* to, const void* from, size_t bytes) {
    if (besideHostTasks) std::memcpy(to, from, bytes);
    else hostParallelMemcpy(to, from, bytes);
  };
  if (!staging_) {
    MT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&staging_), 2 * kStagingHalf, cudaHostAllocDefault));
    for (cudaEvent_t& event : stagingFree_) MT_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  }
  const size_t chunks = (size + kStagingHalf - 1) / kStagingHalf;
  auto span = [&](size_t chunk) { return std::min(kStagingHalf, size - chunk * kStagingHalf); };
  auto half = [&](size_t chunk) { return staging_ + (chunk % 2) * kStagingHalf; };
  if (toDevice) {
    for (size_t c = 0; c < chunks; ++c) {
      // The DMA of chunk c - 2 read this half; the copy of chunk c - 1 runs meanwhile.
      if (c >= 2) MT_CUDA_CHECK(cudaEventSynchronize(stagingFree_[c % 2]));
      copy(half(c), host + c * kStagingHalf, span(c));
      MT_CUDA_CHECK(cudaMemcpyAsync(device + c * kStagingHalf, half(c), span(c), cudaMemcpyHostToDevice, compute_));
      MT_CUDA_CHECK(cudaEventRecord(stagingFree_[c % 2], compute_));
    }
  } else {
    // Chunk c's DMA runs while chunk c - 1 is copied out of its half.
    for (size_t c = 0; c <= chunks; ++c) {
      if (c < chunks) {
        MT_CUDA_CHECK(cudaMemcpyAsync(half(c), device + c * kStagingHalf, span(c), cudaMemcpyDeviceToHost, compute_));
        MT_CUDA_CHECK(cudaEventRecord(stagingFree_[c % 2], compute_));
      }
      if (c >= 1) {
        MT_CUDA_CHECK(cudaEventSynchronize(stagingFree_[(c - 1) % 2]));
        copy(host + (c - 1) * kStagingHalf, half(c - 1), span(c - 1));
      }
    }
  }
  if (besideHostTasks) {
    MT_CUDA_CHECK(cudaStreamSynchronize(compute_));
    reportFailures();
  } else {
    drain();
  }
}

void CudaBackend::read(const plan::Tensor& tensor, void* bytes, size_t size) const {
  if (size != tensor.buffer().size_bytes())
    throw Error("tensor '" + tensor.name() + "': reading " + std::to_string(size) + " bytes from " +
                std::to_string(tensor.buffer().size_bytes()));
  if (onDisk(tensor)) return readDisk(tensor, bytes, size);
  drain();
  if (onDevice(tensor)) {
    stagedTransfer(address(tensor), static_cast<std::byte*>(bytes), size, false);
  } else {
    hostParallelMemcpy(bytes, address(tensor), size);
  }
}

std::byte* CudaBackend::hostData(const plan::Tensor& tensor) {
  if (onDevice(tensor)) throw Error("cuda backend: tensor '" + tensor.name() + "' is in device memory");
  if (onDisk(tensor))
    throw Error("cuda backend: tensor '" + tensor.name() + "' is in a disk file; read() and write() reach it");
  drain();  // a copy or host task in flight may still read or write these bytes
  return address(tensor);
}

}  // namespace megatrain::runtime::cuda
