// CpuBackend.h - the reference backend: plain C++ on host memory, one thread, in order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "megatrain/runtime/Backend.h"

namespace megatrain::runtime {

// Pools are 4 KiB-aligned host allocations (the disk tier's O_DIRECT reads
// land in them), filled with 0xFF (NaN as any
// float) when allocated so that a read before the first write shows up;
// copies are memcpy; kernels are the f32/f64 reference kernels of runtime/cpu/,
// deterministic (fixed summation order, sums in double). Events are no-ops:
// everything runs in program order.
class CpuBackend final : public Backend {
 public:
  CpuBackend();
  ~CpuBackend() override;

  std::string name() const override { return "cpu"; }
  const kernels::KernelSpec* findKernel(const std::string& name) const override;
  void prepare(const plan::Plan& plan) override;
  void copy(const plan::Tensor& src, const plan::Tensor& dst) override;
  void launchKernel(uint32_t step) override;
  void runAdamW(const plan::Tensor& param, const plan::Tensor& grad, const plan::Tensor& m,
                const plan::Tensor& v, const plan::AdamW& hyper, int64_t t,
                const plan::Tensor* compute = nullptr) override;
  void poison(const plan::Tensor& tensor) override;
  void write(const plan::Tensor& tensor, const void* bytes, size_t size) override;
  void zero(const plan::Tensor& tensor) override;
  void read(const plan::Tensor& tensor, void* bytes, size_t size) const override;
  std::byte* hostData(const plan::Tensor& tensor) override { return data(tensor); }

  // The host address of a tensor's bytes: all of this backend's memory is host memory.
  std::byte* data(const plan::Tensor& tensor) const;

  // Bytes of double-precision scratch the prepared kernels share.
  size_t scratchBytes() const;

  // Where DISK pools live (megatrain-run --disk-dir): one O_DIRECT file per
  // pool (DiskTier.h). Without a directory they are emulated in host memory,
  // like every other tier. Call before prepare().
  void setDiskDirectory(const std::string& dir) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace megatrain::runtime
