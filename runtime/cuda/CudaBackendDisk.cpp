// CudaBackendDisk.cpp - the CUDA backend's DISK pools: one file each (DiskTier), copied to and from pinned staging by a disk I/O thread in the order of the disk stream.
//
// A plan copies disk-resident optimizer state (docs/tiering.md "State homes")
// between its DISK pool and host staging on stream `disk`, ordered by the
// plan's record/wait steps like any copy. Here a disk copy step becomes, on
// that stream's CUDA stream:
//
//   record ready[step]             the stream reached the copy: the plan's waits before it are met
//   cuStreamWaitValue32(flag[step] == seq)
//                                  the stream goes on (to the plan's records after
//                                  the copy) once the I/O thread says the bytes moved
//
// and a job {ready, file range, staging address, seq} for the disk I/O thread,
// which takes jobs in issue order: it waits for `ready` (cudaEventSynchronize
// on a blocking-sync event), reads or writes the bytes (DiskTier: O_DIRECT
// over a few threads, straight into or out of the 4 KiB-aligned staging), then
// stores seq into flag[step] (pinned, mapped host memory). No host callback is
// involved, so the disk works while the host AdamW (cudaLaunchHostFunc, on the
// `host` stream) runs, and nothing on the executor's thread waits.
//
// A job that fails (or follows a failed host task) still stores its flag, so
// the streams drain; the failure is kept as a host task's is and reported by
// the next drain() with its step. Without cuStreamWaitValue32 (a driver that
// does not give it) and under MEGATRAIN_CUDA_SYNC=1, a disk copy waits for its
// stream and moves the bytes on the executor's thread instead.
#include <cuda.h>
#include <cuda_runtime.h>

#include <atomic>
#include <string>

#include "CudaBackendImpl.h"
#include "megatrain/plan/Error.h"

namespace megatrain::runtime::cuda {

bool CudaBackend::onDisk(const plan::Tensor& tensor) const { return poolOf(tensor).tier == plan::DISK; }

DiskTier& CudaBackend::diskOf(const plan::Tensor& tensor) const {
  const uint32_t pool = tensor.buffer().pool();
  if (pool >= diskFiles_.size() || !diskFiles_[pool])
    throw Error("cuda backend: tensor '" + tensor.name() + "' is in a DISK pool that has no file");
  return *diskFiles_[pool];
}

// prepare()'s step: a file per DISK pool, an event and a flag per disk copy
// step, and the I/O thread (started once, kept for later plans).
void CudaBackend::openDiskPools(const plan::Plan& plan) {
  diskFiles_.clear();
  diskFiles_.resize(static_cast<size_t>(plan.pools_size()));
  bool any = false;
  for (const plan::Pool& pool : plan.pools()) {
    if (pool.tier() != plan::DISK) continue;
    if (diskDir_.empty())
      throw Error("cuda backend: the plan keeps pool '" + pool.name() +
                  "' on disk, and no directory was given for it (megatrain-run --disk-dir DIR)");
    diskFiles_[pool.id()] = std::make_unique<DiskTier>(diskDir_, pool.name(), pool.size_bytes());
    any = true;
  }
  if (!any) return;

  if (!diskFlags_) {
    // The driver's stream wait on a host word; looked up once.
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &entry, 12000, cudaEnableDefault, &found) ==
            cudaSuccess &&
        found == cudaDriverEntryPointSuccess)
      waitValue_ = reinterpret_cast<WaitValue32>(entry);
    (void)cudaGetLastError();
  }
  const size_t steps = static_cast<size_t>(plan.steps_size());
  if (diskFlagCount_ < steps) {
    if (diskFlags_) MT_CUDA_CHECK(cudaFreeHost(diskFlags_));
    diskFlags_ = nullptr;
    MT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&diskFlags_), steps * sizeof(uint32_t), cudaHostAllocMapped));
    void* device = nullptr;
    MT_CUDA_CHECK(cudaHostGetDevicePointer(&device, diskFlags_, 0));
    diskFlagsDevice_ = reinterpret_cast<CUdeviceptr>(device);
    diskFlagCount_ = steps;
  }
  for (size_t i = 0; i < steps; ++i) diskFlags_[i] = 0;
  diskReady_.assign(steps, nullptr);
  for (const plan::Step& step : plan.steps()) {
    if (step.op_case() != plan::Step::kCopy) continue;
    const plan::Tier from = pools_.at(plan.tensors(static_cast<int>(step.copy().src())).buffer().pool()).tier;
    const plan::Tier to = pools_.at(plan.tensors(static_cast<int>(step.copy().dst())).buffer().pool()).tier;
    if (from != plan::DISK && to != plan::DISK) continue;
    if (from == plan::DEVICE || to == plan::DEVICE)
      throw Error("cuda backend: step " + std::to_string(step.index()) +
                  " copies between a DISK pool and device memory; disk copies go through host staging");
    MT_CUDA_CHECK(cudaEventCreateWithFlags(&diskReady_[step.index()], cudaEventDisableTiming | cudaEventBlockingSync));
  }
  if (!diskThread_.joinable()) diskThread_ = std::thread([this] { diskLoop(); });
}

// releasePlanMemory()'s part: the files and events (after a drain, or in the
// destructor after every stream finished).
void CudaBackend::releaseDiskPools() {
  for (cudaEvent_t& event : diskReady_)
    if (event) cudaEventDestroy(event);
  diskReady_.clear();
  diskFiles_.clear();
}

// The destructor's part: the thread ends once its queue is empty.
void CudaBackend::stopDiskThread() {
  if (diskThread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(diskMutex_);
      diskStop_ = true;
    }
    diskWake_.notify_all();
    diskThread_.join();
  }
  if (diskFlags_) cudaFreeHost(diskFlags_);
  diskFlags_ = nullptr;
}

void CudaBackend::copyDisk(const plan::Tensor& src, const plan::Tensor& dst) {
  const bool reading = onDisk(src);
  const plan::Tensor& disk = reading ? src : dst;
  const plan::Tensor& host = reading ? dst : src;
  if (onDisk(host) || onDevice(host))
    throw Error("cuda backend: copy between '" + src.name() + "' and '" + dst.name() +
                "': a disk copy goes between a DISK pool and pinned host memory");
  DiskJob job;
  job.file = &diskOf(disk);
  job.reading = reading;
  job.offset = disk.buffer().offset();
  job.host = address(host);
  job.bytes = disk.buffer().size_bytes();
  job.step = currentStep_;

  const cudaStream_t stream = currentStream();
  const bool inStep = currentStep_ < diskReady_.size() && diskReady_[currentStep_];
  if (!inStep || !waitValue_ || syncEveryKernel_) {
    // At once, on this thread: after the work the stream holds (its waits).
    MT_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (hostFailed_.load()) return;
    try {
      runDiskJob(job);
    } catch (const std::exception& e) {
      hostFailed(job.step, e.what());
    }
    if (syncEveryKernel_ || !inStep) drain();
    return;
  }
  job.ready = diskReady_[currentStep_];
  job.value = ++diskSeq_;
  if (job.value == 0) job.value = ++diskSeq_;  // 0 is the flags' value before any job
  traceBegin(stream);
  MT_CUDA_CHECK(cudaEventRecord(job.ready, stream));
  const CUresult waited =
      waitValue_(reinterpret_cast<CUstream>(stream), diskFlagsDevice_ + sizeof(uint32_t) * currentStep_, job.value, CU_STREAM_WAIT_VALUE_EQ);
  if (waited != CUDA_SUCCESS)
    throw Error("cuda backend: step " + std::to_string(currentStep_) + ": cuStreamWaitValue32 failed (CUresult " +
                std::to_string(static_cast<int>(waited)) + ")");
  traceEnd(stream);
  {
    std::lock_guard<std::mutex> lock(diskMutex_);
    diskJobs_.push_back(job);
  }
  diskWake_.notify_one();
}

void CudaBackend::runDiskJob(const DiskJob& job) const {
  if (job.reading)
    job.file->read(job.offset, job.host, job.bytes);
  else
    job.file->write(job.offset, job.host, job.bytes);
}

void CudaBackend::diskLoop() {
  (void)cudaSetDevice(device_);
  for (;;) {
    DiskJob job;
    {
      std::unique_lock<std::mutex> lock(diskMutex_);
      diskWake_.wait(lock, [this] { return diskStop_ || !diskJobs_.empty(); });
      if (diskJobs_.empty()) return;  // stopping, nothing left
      job = diskJobs_.front();
      diskJobs_.pop_front();
    }
    const cudaError_t ready = cudaEventSynchronize(job.ready);
    if (ready != cudaSuccess)
      hostFailed(job.step, std::string("waiting for the disk stream: ") + cudaGetErrorString(ready));
    else if (!hostFailed_.load()) {
      try {
        runDiskJob(job);
      } catch (const std::exception& e) {
        hostFailed(job.step, e.what());
      }
    }
    // Always: the stream waits for it.
    std::atomic_thread_fence(std::memory_order_release);
    reinterpret_cast<volatile uint32_t*>(diskFlags_)[job.step] = job.value;
  }
}

// ---- host reads and writes of disk-resident tensors (checkpoints, initial state) ----

void CudaBackend::readDisk(const plan::Tensor& tensor, void* bytes, size_t size) const {
  drain();
  diskOf(tensor).read(tensor.buffer().offset(), bytes, size);
}

void CudaBackend::writeDisk(const plan::Tensor& tensor, const void* bytes, size_t size) {
  drain();
  diskOf(tensor).write(tensor.buffer().offset(), bytes, size);
}

}  // namespace megatrain::runtime::cuda
