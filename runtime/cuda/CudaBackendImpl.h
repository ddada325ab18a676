// CudaBackendImpl.h - the CUDA backend's class, private to runtime/cuda: its state and which file defines each job.
//
// One class, defined across four files (CudaBackend.cpp says what lives where);
// everything outside this folder reaches it through makeCudaBackend()
// (CudaBackend.h) and the Backend interface.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "CudaBackend.h"
#include "CudaKernel.h"
#include "CudnnAttention.h"
#include "MatmulPlanner.h"
#include "megatrain/runtime/DiskTier.h"

namespace megatrain::runtime::cuda {

constexpr size_t kCublasWorkspaceBytes = 32u << 20;  // cuBLAS's recommendation for Hopper

// A kernel step resolved once: its registered kernel and its launch.
struct PreparedKernel {
  const CudaKernelRegistry::Registered* kernel = nullptr;
  Launch launch;
};

struct Pool {
  std::byte* base = nullptr;  // device address (DEVICE) or pinned host address (HOST_PINNED)
  plan::Tier tier = plan::TIER_UNSPECIFIED;
  size_t bytes = 0;
  bool registered = false;  // HOST_PINNED: mmap + cudaHostRegister (freed by unregister + munmap)
};

class CudaBackend;

// Frees a HOST_PINNED pool the way allocatePools made it (CudaBackendMemory.cpp).
void releasePinned(Pool& pool);

// A disk copy step for the disk I/O thread (CudaBackendDisk.cpp): once `ready`
// completes, move `bytes` between the file range and the pinned staging, then
// store `value` into the step's flag.
struct DiskJob {
  cudaEvent_t ready = nullptr;
  DiskTier* file = nullptr;
  bool reading = true;  // file to staging; false: staging to file
  uint64_t offset = 0;
  std::byte* host = nullptr;
  size_t bytes = 0;
  uint32_t step = 0;
  uint32_t value = 0;
};

// A host task enqueued on its stream with cudaLaunchHostFunc: filled when the
// step is issued, read by the host function when the stream reaches it. One
// slot per plan step; a step is issued at most once per training step, and
// every training step ends with a full synchronize, so a slot is never
// rewritten while its function may still run.
struct HostTaskSlot {
  enum class Kind { AdamW, Accumulate, ReadLoss } kind = Kind::AdamW;
  CudaBackend* backend = nullptr;
  uint32_t step = 0;
  plan::DType dtype = plan::DTYPE_UNSPECIFIED;
  std::byte* a = nullptr;  // AdamW: param; Accumulate: acc; ReadLoss: readout
  std::byte* b = nullptr;  // AdamW: grad; Accumulate: addend
  std::byte* m = nullptr;
  std::byte* v = nullptr;
  uint16_t* compute = nullptr;
  size_t count = 0;
  plan::AdamW hyper;
  int64_t t = 0;
  double* loss = nullptr;
  // Traced: its span's index in the window (CudaBackend::spans_); kUntraced otherwise.
  static constexpr size_t kUntraced = SIZE_MAX;
  size_t traceAt = kUntraced;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, const CudaOptions& options);
  ~CudaBackend() override;

  // ---- CudaBackend.cpp: the plan's preparation, kernel launches, synchronization ----
  std::string name() const override { return "cuda"; }
  const kernels::KernelSpec* findKernel(const std::string& name) const override;
  void prepare(const plan::Plan& plan) override;
  void launchKernel(uint32_t step) override;
  void synchronize() override;
  void setCurrentStep(uint32_t step) override { currentStep_ = step; }
  bool overlapsHostTasks() const override;
  void markHostTask(uint32_t step) override;
  void waitHostTask(uint32_t step, const std::string& stream) override;
  void finishStepBeforeHost(uint32_t lossStep) override;
  void writeBesideHostTasks(const plan::Tensor& tensor, const void* bytes, size_t size) override;

  // ---- CudaBackendMemory.cpp: pools, copies, streams and events ----
  void copy(const plan::Tensor& src, const plan::Tensor& dst) override;
  void recordEvent(const std::string& event, const std::string& stream) override;
  void waitEvent(const std::string& event, const std::string& stream) override;
  void poison(const plan::Tensor& tensor) override;
  bool poisonsDeadTensors() const override { return poison_; }
  void poisonOnStream(const plan::Tensor& tensor, const std::string& stream) override;
  void write(const plan::Tensor& tensor, const void* bytes, size_t size) override;
  void read(const plan::Tensor& tensor, void* bytes, size_t size) const override;
  void zero(const plan::Tensor& tensor) override;
  std::byte* hostData(const plan::Tensor& tensor) override;

  // ---- CudaBackendHostTasks.cpp: host tasks in stream order ----
  void runAdamW(const plan::Tensor& param, const plan::Tensor& grad, const plan::Tensor& m,
                const plan::Tensor& v, const plan::AdamW& hyper, int64_t t,
                const plan::Tensor* compute) override;
  void runAccumulate(const plan::Tensor& acc, const plan::Tensor& addend) override;
  void readLoss(const plan::Tensor& readout, double* loss) override;
  // The host function of every host task (cudaLaunchHostFunc): runs the slot's
  // task, catching what it throws. No CUDA call in here.
  static void CUDART_CB runHostTask(void* slot);

  // ---- CudaBackendDisk.cpp: DISK pools through the disk I/O thread ----
  void setDiskDirectory(const std::string& dir) override { diskDir_ = dir; }

  // ---- CudaBackendGraph.cpp: a training step recorded as a CUDA graph and replayed ----
  bool canRecordSteps() const override;
  void beginStepRecording() override;
  bool endStepRecording(const std::string& failure) override;
  bool hasRecordedStep() const override { return stepGraph_ != nullptr; }
  void replayStep(const plan::AdamW& hyper, int64_t t, double* loss) override;
  std::string stepRecordingFailure() const override { return recordingFailure_; }

  // ---- CudaBackendReports.cpp: the step trace and the memory report ----
  bool canTraceSteps() const override { return true; }
  void beginStepTrace(uint32_t steps) override;
  void nextTracedStep() override;
  std::vector<StepSpan> endStepTrace() override;
  std::optional<DeviceMemory> deviceMemory() const override;
  std::optional<DeviceMemoryReport> memoryReport() const override;

 private:
  static constexpr uint32_t kNoStep = std::numeric_limits<uint32_t>::max();

  // ---- CudaBackend.cpp ----
  // prepare()'s steps, in the order it takes them; the pools, streams, events
  // and host task slots are made by the files of their jobs (below).
  size_t resolveKernelSteps(const plan::Plan& plan);  // returns the largest scratch a step asks for
  void planMatmuls(const plan::Plan& plan);
  void allocateScratch(size_t largestScratch);
  void releasePlanMemory();
  // Waits for every stream (but the host's, which may go on, when
  // `hostStream` is false), then reports a host task's failure or any bad
  // data a kernel flagged.
  void drain(bool hostStream = true) const;
  // Reports a host task's failure or bad data a kernel flagged, once.
  void reportFailures() const;

  // ---- CudaBackendMemory.cpp ----
  void checkDeviceBudget(const plan::Plan& plan) const;
  void assignStreams(const plan::Plan& plan);
  static std::string urgentKernelStream(const plan::Plan& plan);
  void allocatePools(const plan::Plan& plan);
  void createEvents(const plan::Plan& plan);
  const Pool& poolOf(const plan::Tensor& tensor) const;
  // write()/read() of a device tensor: through two pinned staging buffers, so
  // the host's copy into one overlaps the DMA of the other (a pageable
  // cudaMemcpy runs at a fraction of the link's rate).
  /// With `besideHostTasks` (writeBesideHostTasks): plain copies into the
  /// staging, and only its own copies waited for, not the host stream's tasks.
  void stagedTransfer(std::byte* device, std::byte* host, size_t size, bool toDevice,
                      bool besideHostTasks = false) const;
  std::byte* address(const plan::Tensor& tensor) const { return poolOf(tensor).base + tensor.buffer().offset(); }
  bool onDevice(const plan::Tensor& tensor) const { return poolOf(tensor).tier == plan::DEVICE; }
  // The device address of a kernel operand (an Error for one outside the DEVICE pools).
  void* operandAddress(const plan::Tensor& tensor) const;
  // The CUDA stream a plan stream runs on (all of them the compute stream
  // with MEGATRAIN_CUDA_SYNC=1, or before prepare()).
  cudaStream_t streamFor(const std::string& stream) const;
  // The stream of the step being issued (the compute stream outside a step).
  cudaStream_t currentStream() const;

  // ---- CudaBackendHostTasks.cpp ----
  void prepareHostTaskSlots(const plan::Plan& plan);
  // Fills the current step's host task slot and enqueues it on the step's stream.
  HostTaskSlot& hostSlot(HostTaskSlot::Kind kind);
  void enqueueHostTask(HostTaskSlot& slot);
  void hostFailed(uint32_t step, const std::string& what);

  // ---- CudaBackendDisk.cpp ----
  using WaitValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  void openDiskPools(const plan::Plan& plan);
  void releaseDiskPools();
  void stopDiskThread();
  bool onDisk(const plan::Tensor& tensor) const;
  DiskTier& diskOf(const plan::Tensor& tensor) const;
  // A copy step between a DISK pool and pinned staging, on the step's stream.
  void copyDisk(const plan::Tensor& src, const plan::Tensor& dst);
  void runDiskJob(const DiskJob& job) const;
  void diskLoop();  // the disk I/O thread
  void readDisk(const plan::Tensor& tensor, void* bytes, size_t size) const;
  void writeDisk(const plan::Tensor& tensor, const void* bytes, size_t size);

  // ---- CudaBackendGraph.cpp ----
  // The CUDA streams of this plan's streams other than compute_.
  std::vector<cudaStream_t> sideStreams() const;
  // While recording: notes that the step's AdamW kernel just launched on
  // `stream` must take each replay's step count and lr.
  void recordAdamWNode(cudaStream_t stream, plan::DType dtype);
  void releaseStepGraph();

  // ---- CudaBackendReports.cpp ----
  void recordMemoryBeforePrepare();
  uint64_t deviceUsedBytes() const;
  // The current plan step's index in the traced window's events and spans;
  // HostTaskSlot::kUntraced while nothing is traced or outside a plan step.
  size_t traceIndex() const;
  // Timing events around a kernel or copy step when tracing.
  void traceBegin(cudaStream_t stream);
  void traceEnd(cudaStream_t stream);
  double hostSeconds() const;

  int device_ = 0;
  bool syncEveryKernel_ = false;
  bool poison_ = false;
  cudaStream_t compute_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* cublasWorkspace_ = nullptr;
  int* badData_ = nullptr;  // pinned, mapped: [1], step + 1 of the first bad-data flag
  mutable std::byte* staging_ = nullptr;  // pinned, 2 x kStagingHalf bytes, made on first use
  mutable cudaEvent_t stagingFree_[2] = {};
  DeviceContext context_;

  const plan::Plan* plan_ = nullptr;
  std::vector<Pool> pools_;
  void* scratch_ = nullptr;
  std::vector<PreparedKernel> kernels_;  // [steps]; kernel == nullptr for other steps
  std::unordered_map<std::string, cudaEvent_t> events_;
  std::unique_ptr<MatmulPlanner> matmul_;  // made by the first prepare(); its algorithm cache outlives plans
  std::unique_ptr<CudnnAttention> attention_;  // bf16 attention's cuDNN graphs; its cache outlives plans
  // One CUDA stream per plan stream; the kernels' stream is compute_.
  std::unordered_map<std::string, cudaStream_t> streams_;
  std::vector<cudaStream_t> ownStreams_;  // created here, destroyed with the backend
  std::vector<bool> ownStreamHigh_;       // [ownStreams_]: made at the compute stream's priority
  // [2 x steps]: the host tasks of a step that overlaps the previous one's
  // (overlapsHostTasks) take the other half, as those may not have run yet.
  std::vector<HostTaskSlot> hostSlots_;
  size_t slotHalf_ = 0;                   // 0 or 1: the half this step's tasks take
  bool overlapHost_ = true;               // CudaOptions::overlapHostTasks and the environment
  std::unordered_map<uint32_t, cudaEvent_t> hostMarks_;  // markHostTask's events, by step
  HostTaskSlot looseSlot_;                // a host task called outside a plan step
  uint32_t currentStep_ = kNoStep;

  // A host task that threw: the first failure, reported by the next drain().
  mutable std::mutex hostErrorMutex_;
  mutable std::string hostError_;
  mutable std::atomic<bool> hostFailed_{false};

  // Tracing (only while a traced window runs; no timing event exists otherwise).
  // Indexed by the window's step w and the plan step s at w * steps + s;
  // traceBase_ is the current training step's w * steps.
  bool tracing_ = false;
  size_t traceBase_ = 0, traceWindow_ = 0;
  cudaEvent_t traceOrigin_ = nullptr;
  std::vector<cudaEvent_t> traceStart_, traceEnd_;  // created as the largest window needs them
  std::vector<StepSpan> spans_;                      // host tasks write theirs
  std::vector<bool> timed_;                          // device events recorded this window
  std::chrono::steady_clock::time_point hostOrigin_;

  // The disk tier: a file per DISK pool under diskDir_, an event and a flag
  // word per disk copy step, the I/O thread and its queue.
  std::string diskDir_;
  std::vector<std::unique_ptr<DiskTier>> diskFiles_;  // [pools]; set for DISK pools
  std::vector<cudaEvent_t> diskReady_;                 // [steps]; set for disk copy steps
  uint32_t* diskFlags_ = nullptr;                      // pinned, mapped: [diskFlagCount_]
  CUdeviceptr diskFlagsDevice_ = 0;
  size_t diskFlagCount_ = 0;
  uint32_t diskSeq_ = 0;
  WaitValue32 waitValue_ = nullptr;  // cuStreamWaitValue32, when the driver gives it
  std::thread diskThread_;
  std::mutex diskMutex_;
  std::condition_variable diskWake_;
  std::deque<DiskJob> diskJobs_;
  bool diskStop_ = false;

  // The step graph: recording state, the recording, what a replay updates.
  struct GraphAdamW {
    cudaGraphNode_t node = nullptr;
    plan::DType dtype = plan::DTYPE_UNSPECIFIED;
  };
  CudaOptions::StepGraphs stepGraphs_ = CudaOptions::StepGraphs::Auto;
  bool recording_ = false;
  bool recordingRefused_ = false;  // a recording of this plan failed: it runs as issued
  std::string recordingFailure_;
  cudaEvent_t recordFork_ = nullptr;
  std::vector<cudaEvent_t> recordJoins_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t stepGraph_ = nullptr;
  std::vector<GraphAdamW> graphAdamW_;    // device AdamW kernel nodes
  std::vector<uint32_t> graphHostTasks_;  // the steps whose host task slot the graph's host nodes read

  // Memory report.
  uint64_t totalBytes_ = 0, contextBytes_ = 0, beforePrepare_ = 0, afterPrepare_ = 0;
};

}  // namespace megatrain::runtime::cuda
