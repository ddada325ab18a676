// Backend.h - what the executor needs from a device: memory, copies, kernels, host tasks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "megatrain/plan/plan.pb.h"

namespace megatrain::kernels {
struct KernelSpec;  // megatrain/kernels/Manifest.h
}

namespace megatrain::runtime {

// Device memory as the device reports it, in bytes.
struct DeviceMemory {
  uint64_t free = 0;
  uint64_t total = 0;
};

// ---- Measured schedule and device memory (docs/runtime.md, "Trace and memory report") ----

// When one plan step ran, in seconds from the start of the traced training
// step (after its inputs were written; of a window's first step, for every step
// of the window); NaN for a step that was not timed (records, waits).
struct StepSpan {
  double start = 0;
  double end = 0;
};

// What a device backend uses of device memory, in bytes. `contextBytes` is
// what the device had in use when the backend started, before any allocation
// of its own (the CUDA context and cuBLAS, plus whatever other processes
// hold); `beforePrepare` / `afterPrepare` are the device's used bytes (total
// - free) around prepare(); the arena, scratch and workspace are what the
// backend allocated; `budgetBytes` is the plan's device budget (0: none) and
// `fixedWorkspaceBytes` the allowance for scratch and workspaces beyond it.
struct DeviceMemoryReport {
  uint64_t totalBytes = 0;
  uint64_t contextBytes = 0;
  uint64_t beforePrepare = 0;
  uint64_t afterPrepare = 0;
  uint64_t arenaBytes = 0;
  uint64_t scratchBytes = 0;
  uint64_t workspaceBytes = 0;
  uint64_t budgetBytes = 0;
  uint64_t fixedWorkspaceBytes = 0;
};
// ---- end of measured schedule and device memory ----

// A backend executes one plan's steps over memory it owns. Tensors are
// addressed by their plan entry (pool, offset, size), never by raw pointer, so
// device memory need not be host-visible. The executor drives it from one
// thread; no method is thread-safe.
class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu", "cuda".
  virtual std::string name() const = 0;

  // The manifest entry of kernel `name` (operand counts, shape rule), or
  // nullptr if this backend does not implement it.
  virtual const kernels::KernelSpec* findKernel(const std::string& name) const = 0;

  // Allocates every pool of `plan` once and resolves its kernel steps. The
  // plan is validated and must outlive every later call.
  virtual void prepare(const plan::Plan& plan) = 0;

  // Where the plan's DISK pools live (megatrain-run --disk-dir): one O_DIRECT
  // file per pool, `DIR/<pool>.state` (DiskTier.h). Call before prepare(). A
  // backend without a disk tier ignores it and refuses DISK pools in prepare().
  virtual void setDiskDirectory(const std::string& dir) {}

  // Copies src's bytes to dst (equal sizes, any tiers).
  virtual void copy(const plan::Tensor& src, const plan::Tensor& dst) = 0;

  // Runs the Kernel step `step` (an index into the prepared plan's steps).
  virtual void launchKernel(uint32_t step) = 0;

  // The AdamW host task (docs/ops.md) on host tensors; t is the 1-based count
  // of optimizer steps taken, this one included. `compute`, when not null, is
  // the parameter's bf16 PARAMETER_COMPUTE copy, rewritten from the update.
  virtual void runAdamW(const plan::Tensor& param, const plan::Tensor& grad,
                        const plan::Tensor& m, const plan::Tensor& v,
                        const plan::AdamW& hyper, int64_t t,
                        const plan::Tensor* compute = nullptr) = 0;

  // Events order work across streams; a backend that runs in order ignores them.
  virtual void recordEvent(const std::string& event, const std::string& stream) {}
  virtual void waitEvent(const std::string& event, const std::string& stream) {}

  // Waits until all launched work is done.
  virtual void synchronize() {}

  // Marks a dead tensor's bytes: NaN for floating dtypes, 0xFF bytes otherwise.
  virtual void poison(const plan::Tensor& tensor) = 0;

  // Host access to a tensor's bytes (size == tensor.buffer().size_bytes()).
  virtual void write(const plan::Tensor& tensor, const void* bytes, size_t size) = 0;
  virtual void read(const plan::Tensor& tensor, void* bytes, size_t size) const = 0;

  // Sets every byte of the tensor to 0, as write() of zeros would (the
  // optimizer's moments before the first step). The default writes a zero
  // buffer; backends set their own memory in place, without one.
  virtual void zero(const plan::Tensor& tensor);

  // The host address of a HOST_PINNED tensor's bytes, valid until the next
  // launch; waits for launched work first. Host tensors live in host memory on
  // every backend, so the executor's host work (gradient clipping,
  // checkpoints) uses them in place instead of staging copies. Error for a
  // tensor the host cannot address.
  virtual std::byte* hostData(const plan::Tensor& tensor) = 0;

  // The device's free and total memory, for preflight checks and progress;
  // nullopt for a backend whose "device" pools are host memory (cpu).
  virtual std::optional<DeviceMemory> deviceMemory() const { return std::nullopt; }

  // ---- Host tasks in stream order, poisoning, tracing, memory report ----
  // A backend with queues (cuda) runs these in the order of the plan's step
  // stream; the defaults wait for launched work and run at once.

  // The plan step the following calls belong to (the executor says so before
  // each step); for error messages and the trace.
  virtual void setCurrentStep(uint32_t step) {}

  // The ACCUMULATE host task: acc += addend on the host (Accumulate.h), both
  // HOST_PINNED tensors. Default: synchronize(), then add.
  virtual void runAccumulate(const plan::Tensor& acc, const plan::Tensor& addend);

  // The READ_LOSS host task: *loss = element 0 of the readout (a host tensor)
  // as a double, once the work before it is done. *loss must stay valid until
  // the next synchronize(). Default: synchronize(), then read.
  virtual void readLoss(const plan::Tensor& readout, double* loss);

  // Whether the executor poisons dead DEVICE tensors (always on cpu; opt-in on cuda).
  virtual bool poisonsDeadTensors() const { return true; }

  // Poisons `tensor` after the last step that uses it, which ran on plan
  // stream `stream`. Default: poison(tensor).
  virtual void poisonOnStream(const plan::Tensor& tensor, const std::string& stream) { poison(tensor); }

  // Measured timing of a window of `steps` consecutive training steps on one
  // clock: whether this backend can, then beginStepTrace(steps) once the
  // first step's inputs are written (the device idle), nextTracedStep() before
  // each later step of the window is issued (the previous step's host tasks
  // may still run: "Host updates across steps"), and endStepTrace() after the
  // last step's final synchronize(), which returns steps x (plan steps) spans:
  // the window's step w, plan step s at w * plan steps + s.
  virtual bool canTraceSteps() const { return false; }
  virtual void beginStepTrace(uint32_t steps) { (void)steps; }
  virtual void nextTracedStep() {}
  virtual std::vector<StepSpan> endStepTrace() { return {}; }

  // Device memory the backend holds after prepare(); nullopt on cpu.
  virtual std::optional<DeviceMemoryReport> memoryReport() const { return std::nullopt; }

  // ---- Host tasks across steps (docs/runtime.md, "Host updates across steps") ----
  // A backend with queues may end a training step before the host stream's
  // tasks after the loss have run (the AdamW of the parameters updated last),
  // so that they run beside the next step's work. The executor then orders
  // each step of the next iteration that touches bytes of such a task after
  // it: markHostTask after issuing the task, waitHostTask before the step.
  // Whether this backend runs steps so now (cuda without step graphs, or a
  // test backend).
  virtual bool overlapsHostTasks() const { return false; }
  // After host task `step` was issued: a mark on its stream that a later
  // waitHostTask waits for (the latest mark of `step` issued before it).
  virtual void markHostTask(uint32_t step) {}
  // Holds plan stream `stream` until the latest mark of host task `step`
  // has been reached; none issued yet: no wait.
  virtual void waitHostTask(uint32_t step, const std::string& stream) {}
  // Ends a training step: waits for every stream but the host's, and for the
  // host stream up to the mark of host task `lossStep` (the READ_LOSS), so
  // the loss is read; the host tasks after it may still run. Default:
  // synchronize().
  virtual void finishStepBeforeHost(uint32_t lossStep) { synchronize(); }
  // write() of an INPUT tensor while host tasks of the previous step may still
  // run: they touch only host state, so a device tensor need not wait for
  // them. Default: write().
  virtual void writeBesideHostTasks(const plan::Tensor& tensor, const void* bytes, size_t size) {
    write(tensor, bytes, size);
  }

  // ---- Step graphs (docs/runtime.md, "Step graphs") ----
  // A backend with queues may record the issue of one training step and
  // replay the recording in later steps. Only the AdamW step count and
  // hyper-parameters (lr) and the loss's destination change between replays;
  // addresses, shapes and everything else a step issues stay as recorded.
  // Whether this backend can record steps now (cuda, unless poisoning,
  // MEGATRAIN_CUDA_SYNC, a disk tier, CudaOptions::stepGraphs = false or a
  // recording that failed turned it off for this plan).
  virtual bool canRecordSteps() const { return false; }
  // From here to endStepRecording() the step's calls are recorded, not run.
  virtual void beginStepRecording() {}
  // Ends the recording. True: it holds the whole step, and nothing of it has
  // run (replayStep runs it). False: a call could not be recorded, or the
  // issue stopped at an error (`failure`, its message; empty when the issue
  // completed); nothing of the step ran, it must be issued again, and this
  // plan is not recorded again.
  virtual bool endStepRecording(const std::string& failure) { return false; }
  // Whether a recorded step is held (until the next prepare()).
  virtual bool hasRecordedStep() const { return false; }
  // Runs the recorded step with AdamW's `hyper` and step count t; the READ_LOSS
  // task writes *loss, which must stay valid until the next synchronize().
  virtual void replayStep(const plan::AdamW& hyper, int64_t t, double* loss) {}
  // Why the last recording failed; empty when none did.
  virtual std::string stepRecordingFailure() const { return {}; }
  // ---- end of step graphs ----
  // ---- end of host tasks in stream order, poisoning, tracing, memory report ----
};

// Element 0 of a host tensor's bytes as a double (floating and integer
// dtypes; NaN for others).
double scalarAsDouble(const std::byte* bytes, plan::DType dtype);

}  // namespace megatrain::runtime
