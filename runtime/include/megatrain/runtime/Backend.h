// Backend.h - what the executor needs from a device: memory, copies, kernels, host tasks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "megatrain/plan/plan.pb.h"

namespace megatrain::runtime {

// A kernel's operand counts, as docs/ops.md defines them; the plan validator
// checks every Kernel step against the backend's table. `inputs` is
// kAnyInputs for a variadic kernel (concat), which takes one or more.
struct KernelSignature {
  static constexpr int kAnyInputs = -1;
  int inputs = 0;
  int outputs = 0;
};

// Device memory as the device reports it, in bytes.
struct DeviceMemory {
  uint64_t free = 0;
  uint64_t total = 0;
};

// A backend executes one plan's steps over memory it owns. Tensors are
// addressed by their plan entry (pool, offset, size), never by raw pointer, so
// device memory need not be host-visible. The executor drives it from one
// thread; no method is thread-safe.
class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu", "cuda".
  virtual std::string name() const = 0;

  // The signature of kernel `name`, or nullptr if this backend lacks it.
  virtual const KernelSignature* findKernel(const std::string& name) const = 0;

  // Allocates every pool of `plan` once and resolves its kernel steps. The
  // plan is validated and must outlive every later call.
  virtual void prepare(const plan::Plan& plan) = 0;

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

  // The host address of a HOST_PINNED tensor's bytes, valid until the next
  // launch; waits for launched work first. Host tensors live in host memory on
  // every backend, so the executor's host work (gradient clipping,
  // checkpoints) uses them in place instead of staging copies. Error for a
  // tensor the host cannot address.
  virtual std::byte* hostData(const plan::Tensor& tensor) = 0;

  // The device's free and total memory, for preflight checks and progress;
  // nullopt for a backend whose "device" pools are host memory (cpu).
  virtual std::optional<DeviceMemory> deviceMemory() const { return std::nullopt; }
};

}  // namespace megatrain::runtime
