// CpuBackend.cpp - the reference backend: plain C++ on host memory, one thread, in order.
#include "megatrain/runtime/CpuBackend.h"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/CpuKernel.h"
#include "megatrain/runtime/AdamW.h"
#include "megatrain/runtime/DiskTier.h"
#include "megatrain/runtime/HostThreads.h"
#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/KernelBinding.h"

namespace megatrain::runtime {
namespace {

constexpr size_t kAlignment = 4096;

struct AlignedFree {
  void operator()(std::byte* p) const { std::free(p); }
};
using AlignedBytes = std::unique_ptr<std::byte[], AlignedFree>;

// At least `size` bytes (and never zero), 4 KiB aligned.
AlignedBytes allocateAligned(size_t size, const std::string& what) {
  // The plan validator bounds pool sizes; a plan handed straight to prepare() is not.
  if (size > std::numeric_limits<size_t>::max() - kAlignment)
    throw Error("cpu backend: cannot allocate " + std::to_string(size) + " bytes for " + what +
                " (rounding it up to 4 KiB overflows)");
  const size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded ? rounded : kAlignment);
  if (!p) throw Error("cpu backend: cannot allocate " + std::to_string(size) + " bytes for " + what);
  return AlignedBytes(static_cast<std::byte*>(p));
}

// A kernel step resolved once: its function and operands with their addresses.
struct PreparedKernel {
  const cpu::CpuKernelRegistry::Registered* kernel = nullptr;
  cpu::KernelArgs args;
};

}  // namespace

struct CpuBackend::Impl {
  const plan::Plan* plan = nullptr;
  std::vector<AlignedBytes> pools;
  std::vector<PreparedKernel> kernels;  // [steps], kernel == nullptr for non-kernel steps
  AlignedBytes scratch;
  size_t scratchBytes = 0;
  std::string diskDir;
  std::vector<std::unique_ptr<DiskTier>> disks;  // [pools], set for a file-backed DISK pool

  DiskTier* diskOf(const plan::Tensor& tensor) const {
    const uint32_t pool = tensor.buffer().pool();
    return pool < disks.size() ? disks[pool].get() : nullptr;
  }

};

CpuBackend::CpuBackend() : impl_(std::make_unique<Impl>()) {}
CpuBackend::~CpuBackend() = default;

const kernels::KernelSpec* CpuBackend::findKernel(const std::string& name) const {
  const cpu::CpuKernelRegistry::Registered* registered = cpu::cpuKernels().find(name);
  return registered ? registered->spec : nullptr;
}

void CpuBackend::prepare(const plan::Plan& plan) {
  Impl& impl = *impl_;
  impl.plan = &plan;
  impl.pools.clear();
  impl.disks.clear();
  for (const plan::Pool& pool : plan.pools()) {
    if (pool.tier() == plan::DISK && !impl.diskDir.empty()) {
      impl.disks.resize(impl.pools.size() + 1);
      impl.disks.back() = std::make_unique<DiskTier>(impl.diskDir, pool.name(), pool.size_bytes());
      impl.pools.push_back(allocateAligned(0, "pool '" + pool.name() + "'"));
      continue;
    }
    impl.pools.push_back(allocateAligned(pool.size_bytes(), "pool '" + pool.name() + "'"));
    std::memset(impl.pools.back().get(), 0xFF, pool.size_bytes());
  }

  impl.kernels.assign(static_cast<size_t>(plan.steps_size()), PreparedKernel{});
  size_t scratch = 0;
  for (int i = 0; i < plan.steps_size(); ++i) {
    const plan::Step& step = plan.steps(i);
    if (step.op_case() != plan::Step::kKernel) continue;
    const plan::Kernel& kernel = step.kernel();
    PreparedKernel& prepared = impl.kernels[static_cast<size_t>(i)];
    prepared.kernel = cpu::cpuKernels().find(kernel.kernel());
    if (!prepared.kernel) throw Error("cpu backend: unknown kernel '" + kernel.kernel() + "'");
    try {
      bindKernelCall(plan, i, [&](const plan::Tensor& tensor) -> void* { return data(tensor); }, prepared.args);
    } catch (const Error& e) {
      throw Error("cpu backend: step " + std::to_string(i) + ": " + e.what());
    }
    // Shape errors in the kernel's own words, as a launch would give them.
    kernels::checkKernelCall(*prepared.kernel->spec, prepared.args);
    if (prepared.kernel->entry.scratchBytes)
      scratch = std::max(scratch, prepared.kernel->entry.scratchBytes(prepared.args));
  }
  impl.scratch = allocateAligned(scratch, "kernel scratch");
  impl.scratchBytes = scratch;
  for (PreparedKernel& prepared : impl.kernels) prepared.args.scratch = impl.scratch.get();
}

void CpuBackend::setDiskDirectory(const std::string& dir) { impl_->diskDir = dir; }

std::byte* CpuBackend::data(const plan::Tensor& tensor) const {
  if (!impl_->plan) throw Error("cpu backend: prepare() was not called");
  if (impl_->diskOf(tensor))
    throw Error("cpu backend: tensor '" + tensor.name() + "' is in a disk file; read() and write() reach it");
  return impl_->pools.at(tensor.buffer().pool()).get() + tensor.buffer().offset();
}

size_t CpuBackend::scratchBytes() const { return impl_->scratchBytes; }

void CpuBackend::copy(const plan::Tensor& src, const plan::Tensor& dst) {
  // The disk tier: straight between the file and the (block-aligned) staging.
  if (DiskTier* disk = impl_->diskOf(src)) return disk->read(src.buffer().offset(), data(dst), dst.buffer().size_bytes());
  if (DiskTier* disk = impl_->diskOf(dst)) return disk->write(dst.buffer().offset(), data(src), src.buffer().size_bytes());
  // memmove: a planner may legally hand a copy overlapping bytes of one pool.
  std::memmove(data(dst), data(src), dst.buffer().size_bytes());
}

void CpuBackend::launchKernel(uint32_t step) {
  if (step >= impl_->kernels.size() || !impl_->kernels[step].kernel)
    throw Error("cpu backend: step " + std::to_string(step) + " is not a prepared kernel");
  const PreparedKernel& prepared = impl_->kernels[step];
  prepared.kernel->entry.run(prepared.args);
}

void CpuBackend::runAdamW(const plan::Tensor& param, const plan::Tensor& grad,
                          const plan::Tensor& m, const plan::Tensor& v, const plan::AdamW& hyper,
                          int64_t t, const plan::Tensor* compute) {
  adamwUpdate(param.dtype(), data(param), data(grad), data(m), data(v),
              static_cast<size_t>(elementCount(param.shape())), hyper, t,
              compute ? reinterpret_cast<uint16_t*>(data(*compute)) : nullptr);
}

void CpuBackend::poison(const plan::Tensor& tensor) {
  std::byte* p = data(tensor);
  const size_t bytes = tensor.buffer().size_bytes();
  if (tensor.dtype() == plan::F32) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (size_t i = 0; i < bytes / 4; ++i) std::memcpy(p + 4 * i, &nan, 4);
  } else if (tensor.dtype() == plan::F64) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (size_t i = 0; i < bytes / 8; ++i) std::memcpy(p + 8 * i, &nan, 8);
  } else {
    // 0xFFFF is also a NaN in bf16 and f16; for integers it is -1 or 255.
    std::memset(p, 0xFF, bytes);
  }
}

void CpuBackend::write(const plan::Tensor& tensor, const void* bytes, size_t size) {
  if (size != tensor.buffer().size_bytes())
    throw Error("tensor '" + tensor.name() + "': writing " + std::to_string(size) +
                " bytes into " + std::to_string(tensor.buffer().size_bytes()));
  if (DiskTier* disk = impl_->diskOf(tensor)) return disk->write(tensor.buffer().offset(), bytes, size);
  std::memcpy(data(tensor), bytes, size);
}

void CpuBackend::zero(const plan::Tensor& tensor) {
  if (impl_->diskOf(tensor)) return Backend::zero(tensor);
  hostParallelMemset(data(tensor), 0, tensor.buffer().size_bytes());
}

void CpuBackend::read(const plan::Tensor& tensor, void* bytes, size_t size) const {
  if (size != tensor.buffer().size_bytes())
    throw Error("tensor '" + tensor.name() + "': reading " + std::to_string(size) +
                " bytes from " + std::to_string(tensor.buffer().size_bytes()));
  if (DiskTier* disk = impl_->diskOf(tensor)) return disk->read(tensor.buffer().offset(), bytes, size);
  std::memcpy(bytes, data(tensor), size);
}

}  // namespace megatrain::runtime
