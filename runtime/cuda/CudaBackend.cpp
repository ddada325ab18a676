// CudaBackend.cpp - the CUDA backend: pools in device and pinned host memory, kernel steps resolved once, one stream.
#include "CudaBackend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "CudaKernel.h"
#include "MatmulPlanner.h"
#include "megatrain/runtime/AdamW.h"
#include "megatrain/runtime/DType.h"
#include "megatrain/runtime/Error.h"

namespace megatrain::runtime {
namespace {

static_assert(static_cast<int>(cuda::DType::F32) == plan::F32 && static_cast<int>(cuda::DType::F64) == plan::F64 &&
                  static_cast<int>(cuda::DType::BF16) == plan::BF16 && static_cast<int>(cuda::DType::F16) == plan::F16 &&
                  static_cast<int>(cuda::DType::I64) == plan::I64 && static_cast<int>(cuda::DType::I32) == plan::I32 &&
                  static_cast<int>(cuda::DType::U8) == plan::U8 && static_cast<int>(cuda::DType::Bool) == plan::BOOL,
              "cuda::DType numbers its types as plan.proto does");

constexpr size_t kCublasWorkspaceBytes = 32u << 20;  // cuBLAS's recommendation for Hopper
constexpr size_t kScratchAlignment = 256;

// A kernel step resolved once: its entry, its launch and the attributes the launch reads.
struct PreparedKernel {
  const cuda::KernelEntry* entry = nullptr;
  std::vector<cuda::Attribute> attributes;
  cuda::Launch launch;
};

struct Pool {
  std::byte* base = nullptr;  // device address (DEVICE) or pinned host address (HOST_PINNED)
  plan::Tier tier = plan::TIER_UNSPECIFIED;
  size_t bytes = 0;
};

std::vector<cuda::Attribute> copyAttributes(const plan::Kernel& kernel) {
  std::vector<cuda::Attribute> result;
  for (const plan::Attribute& source : kernel.attributes()) {
    cuda::Attribute a;
    a.name = source.name();
    switch (source.value_case()) {
      case plan::Attribute::kI: a.kind = cuda::Attribute::Kind::Int; a.i = source.i(); break;
      case plan::Attribute::kF: a.kind = cuda::Attribute::Kind::Float; a.f = source.f(); break;
      case plan::Attribute::kS: a.kind = cuda::Attribute::Kind::String; a.s = source.s(); break;
      case plan::Attribute::kInts:
        a.kind = cuda::Attribute::Kind::Ints;
        a.ints.assign(source.ints().values().begin(), source.ints().values().end());
        break;
      case plan::Attribute::kFloats:
        a.kind = cuda::Attribute::Kind::Floats;
        a.floats.assign(source.floats().values().begin(), source.floats().values().end());
        break;
      default: throw Error(kernel.kernel() + ": attribute '" + source.name() + "' has no value");
    }
    result.push_back(std::move(a));
  }
  return result;
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  const KernelSignature* findKernel(const std::string& name) const override;
  void prepare(const plan::Plan& plan) override;
  void copy(const plan::Tensor& src, const plan::Tensor& dst) override;
  void launchKernel(uint32_t step) override;
  void runAdamW(const plan::Tensor& param, const plan::Tensor& grad, const plan::Tensor& m,
                const plan::Tensor& v, const plan::AdamW& hyper, int64_t t,
                const plan::Tensor* compute) override;
  void recordEvent(const std::string& event, const std::string& stream) override;
  void waitEvent(const std::string& event, const std::string& stream) override;
  void synchronize() override { drain(); }
  void poison(const plan::Tensor& tensor) override;
  void write(const plan::Tensor& tensor, const void* bytes, size_t size) override;
  void read(const plan::Tensor& tensor, void* bytes, size_t size) const override;
  std::byte* hostData(const plan::Tensor& tensor) override;
  std::optional<DeviceMemory> deviceMemory() const override;

 private:
  const Pool& poolOf(const plan::Tensor& tensor) const;
  std::byte* address(const plan::Tensor& tensor) const { return poolOf(tensor).base + tensor.buffer().offset(); }
  bool onDevice(const plan::Tensor& tensor) const { return poolOf(tensor).tier == plan::DEVICE; }
  // The CUDA stream a plan stream runs on. Every plan stream maps to the
  // compute stream today; the tiering work gives h2d/d2h their own.
  cudaStream_t streamFor(const std::string& stream) const { return compute_; }
  cuda::Operand operand(const plan::Tensor& tensor) const;
  // Waits for the stream, then reports any bad data a kernel flagged.
  void drain() const;
  void releasePlanMemory();

  int device_ = 0;
  bool syncEveryKernel_ = false;
  cudaStream_t compute_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* cublasWorkspace_ = nullptr;
  int* badData_ = nullptr;  // pinned, mapped: [1], step + 1 of the first bad-data flag
  cuda::DeviceContext context_;
  std::unordered_map<std::string, KernelSignature> signatures_;

  const plan::Plan* plan_ = nullptr;
  std::vector<Pool> pools_;
  void* scratch_ = nullptr;
  std::vector<PreparedKernel> kernels_;  // [steps]; entry == nullptr for other steps
  std::unordered_map<std::string, cudaEvent_t> events_;
  std::unique_ptr<cuda::MatmulPlanner> matmul_;  // made by the first prepare(); its algorithm cache outlives plans
};

CudaBackend::CudaBackend(int device) : device_(device) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0)
    throw Error(std::string("cuda backend: no CUDA device is usable (") +
                (status == cudaSuccess ? "none found" : cudaGetErrorString(status)) + ")");
  if (device < 0 || device >= count)
    throw Error("cuda backend: device " + std::to_string(device) + " does not exist (" + std::to_string(count) +
                " found)");
  MT_CUDA_CHECK(cudaSetDevice(device));
  MT_CUDA_CHECK(cudaDeviceGetAttribute(&context_.smCount, cudaDevAttrMultiProcessorCount, device));
  MT_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
  MT_CUBLAS_CHECK(cublasCreate(&cublas_));
  MT_CUBLAS_CHECK(cublasSetStream(cublas_, compute_));
  // Plain fp32 / fp64 arithmetic: no TF32 or other reduced-precision paths,
  // so that F32 results stay within 1e-5 of the CPU reference.
  MT_CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
  MT_CUBLAS_CHECK(cublasSetPointerMode(cublas_, CUBLAS_POINTER_MODE_HOST));
  // A workspace of our own, so cuBLAS allocates nothing while the steps run
  // (cublasSetStream resets it, hence after).
  MT_CUDA_CHECK(cudaMalloc(&cublasWorkspace_, kCublasWorkspaceBytes));
  MT_CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublasWorkspace_, kCublasWorkspaceBytes));
  MT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&badData_), sizeof(int), cudaHostAllocMapped));
  *badData_ = 0;
  MT_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&context_.badData), badData_, 0));
  context_.stream = compute_;
  context_.cublas = cublas_;
  for (const auto& [name, entry] : cuda::cudaKernels().entries())
    signatures_[name] = KernelSignature{entry.inputs, entry.outputs};
  const char* sync = std::getenv("MEGATRAIN_CUDA_SYNC");
  syncEveryKernel_ = sync && std::strcmp(sync, "0") != 0 && *sync;
}

// Frees everything, checking nothing: a destructor must not throw, and an
// earlier error has already been reported.
CudaBackend::~CudaBackend() {
  if (compute_) cudaStreamSynchronize(compute_);
  releasePlanMemory();
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
  plan_ = nullptr;
}

const KernelSignature* CudaBackend::findKernel(const std::string& name) const {
  auto it = signatures_.find(name);
  return it == signatures_.end() ? nullptr : &it->second;
}

const Pool& CudaBackend::poolOf(const plan::Tensor& tensor) const {
  if (!plan_) throw Error("cuda backend: prepare() was not called");
  const uint32_t pool = tensor.buffer().pool();
  if (pool >= pools_.size())
    throw Error("cuda backend: tensor '" + tensor.name() + "' names pool " + std::to_string(pool));
  return pools_[pool];
}

cuda::Operand CudaBackend::operand(const plan::Tensor& tensor) const {
  if (tensor.shape_size() > cuda::kMaxRank)
    throw Error("cuda backend: tensor '" + tensor.name() + "' has rank " + std::to_string(tensor.shape_size()) +
                ", the CUDA kernels support at most " + std::to_string(cuda::kMaxRank));
  if (!onDevice(tensor))
    throw Error("cuda backend: kernel operand '" + tensor.name() + "' is not in a DEVICE pool");
  cuda::Operand result;
  result.data = address(tensor);
  result.shape.rank = tensor.shape_size();
  for (int i = 0; i < tensor.shape_size(); ++i) result.shape.dims[i] = tensor.shape(i);
  result.dtype = static_cast<cuda::DType>(tensor.dtype());
  result.name = tensor.name().c_str();
  return result;
}

void CudaBackend::prepare(const plan::Plan& plan) {
  drain();
  releasePlanMemory();
  plan_ = &plan;

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

  kernels_.assign(static_cast<size_t>(plan.steps_size()), PreparedKernel{});
  size_t scratch = 0;
  for (int i = 0; i < plan.steps_size(); ++i) {
    const plan::Step& step = plan.steps(i);
    if (step.op_case() == plan::Step::kRecord) {
      cudaEvent_t& event = events_[step.record().event()];
      if (!event) MT_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    }
    if (step.op_case() != plan::Step::kKernel) continue;
    const plan::Kernel& kernel = step.kernel();
    PreparedKernel& prepared = kernels_[static_cast<size_t>(i)];
    prepared.entry = cuda::cudaKernels().find(kernel.kernel());
    if (!prepared.entry) throw Error("cuda backend: step " + std::to_string(i) + ": unknown kernel '" + kernel.kernel() + "'");
    if (kernel.inputs_size() > cuda::kMaxOperands || kernel.outputs_size() > cuda::kMaxOperands)
      throw Error("cuda backend: step " + std::to_string(i) + " has too many operands");
    prepared.attributes = copyAttributes(kernel);
    cuda::Launch& launch = prepared.launch;
    launch.kernel = kernel.kernel().c_str();
    launch.step = i;
    launch.attrs = cuda::Attributes(&prepared.attributes, launch.kernel);
    launch.device = &context_;
    launch.numIn = kernel.inputs_size();
    launch.numOut = kernel.outputs_size();
    for (int k = 0; k < launch.numIn; ++k) launch.in[k] = operand(plan.tensors(static_cast<int>(kernel.inputs(k))));
    for (int k = 0; k < launch.numOut; ++k)
      launch.out[k] = operand(plan.tensors(static_cast<int>(kernel.outputs(k))));
    if (prepared.entry->scratchBytes) {
      try {
        scratch = std::max(scratch, prepared.entry->scratchBytes(launch));
      } catch (const Error& e) {
        throw Error("cuda backend: step " + std::to_string(i) + ": " + e.what());
      }
    }
  }
  // ---- cuBLASLt: the workspace once, an algorithm per distinct f32/bf16 matmul (MatmulPlanner.h) ----
  if (!matmul_) matmul_ = std::make_unique<cuda::MatmulPlanner>();
  context_.matmul = matmul_.get();
  matmul_->beginPlan(plan.steps_size());
  for (const PreparedKernel& prepared : kernels_) {
    if (!prepared.entry) continue;
    try {
      matmul_->prepare(prepared.launch);
    } catch (const Error& e) {
      throw Error("cuda backend: step " + std::to_string(prepared.launch.step) + ": " + e.what());
    }
  }
  // ---- end cuBLASLt ----
  context_.scratchBytes = (scratch + kScratchAlignment - 1) / kScratchAlignment * kScratchAlignment;
  if (context_.scratchBytes) MT_CUDA_CHECK(cudaMalloc(&scratch_, context_.scratchBytes));
  context_.scratch = scratch_;
  drain();
}

void CudaBackend::copy(const plan::Tensor& src, const plan::Tensor& dst) {
  const size_t bytes = dst.buffer().size_bytes();
  if (src.buffer().size_bytes() != bytes)
    throw Error("cuda backend: copy from '" + src.name() + "' (" + std::to_string(src.buffer().size_bytes()) +
                " bytes) to '" + dst.name() + "' (" + std::to_string(bytes) + " bytes)");
  cuda::copyBytes(address(dst), address(src), bytes, compute_);
}

void CudaBackend::launchKernel(uint32_t step) {
  if (step >= kernels_.size() || !kernels_[step].entry)
    throw Error("cuda backend: step " + std::to_string(step) + " is not a prepared kernel");
  const PreparedKernel& prepared = kernels_[step];
  prepared.entry->launch(prepared.launch);
  if (syncEveryKernel_) drain();
}

void CudaBackend::runAdamW(const plan::Tensor& param, const plan::Tensor& grad, const plan::Tensor& m,
                           const plan::Tensor& v, const plan::AdamW& hyper, int64_t t,
                           const plan::Tensor* compute) {
  for (const plan::Tensor* tensor : {&param, &grad, &m, &v, compute})
    if (tensor && onDevice(*tensor))
      throw Error("cuda backend: AdamW operand '" + tensor->name() + "' is in device memory; it runs on the host");
  drain();  // the gradient's device-to-host copy must have landed
  adamwUpdate(param.dtype(), address(param), address(grad), address(m), address(v),
              static_cast<size_t>(elementCount(param.shape())), hyper, t,
              compute ? reinterpret_cast<uint16_t*>(address(*compute)) : nullptr);
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

void CudaBackend::drain() const {
  MT_CUDA_CHECK(cudaStreamSynchronize(compute_));
  const int flagged = *static_cast<volatile int*>(badData_);
  if (flagged == 0) return;
  *badData_ = 0;
  const size_t step = static_cast<size_t>(flagged - 1);
  std::string what = "a kernel flagged bad data";
  if (step < kernels_.size() && kernels_[step].entry) {
    const PreparedKernel& prepared = kernels_[step];
    what = std::string(prepared.launch.kernel) + ": " +
           (prepared.entry->badData ? prepared.entry->badData : "bad data");
  }
  throw Error("cuda backend: step " + std::to_string(step) + " (" + what + ")");
}

void CudaBackend::poison(const plan::Tensor& tensor) {
  // 0xFF bytes: NaN in every float dtype, -1 or 255 in the integer ones.
  const size_t bytes = tensor.buffer().size_bytes();
  if (onDevice(tensor)) {
    MT_CUDA_CHECK(cudaMemsetAsync(address(tensor), 0xFF, bytes, compute_));
  } else {
    drain();
    std::memset(address(tensor), 0xFF, bytes);
  }
}

void CudaBackend::write(const plan::Tensor& tensor, const void* bytes, size_t size) {
  if (size != tensor.buffer().size_bytes())
    throw Error("tensor '" + tensor.name() + "': writing " + std::to_string(size) + " bytes into " +
                std::to_string(tensor.buffer().size_bytes()));
  if (onDevice(tensor)) {
    MT_CUDA_CHECK(cudaMemcpyAsync(address(tensor), bytes, size, cudaMemcpyHostToDevice, compute_));
    drain();  // the caller's bytes may be reused as soon as this returns
  } else {
    drain();  // a copy in flight may still read or write these bytes
    std::memcpy(address(tensor), bytes, size);
  }
}

void CudaBackend::read(const plan::Tensor& tensor, void* bytes, size_t size) const {
  if (size != tensor.buffer().size_bytes())
    throw Error("tensor '" + tensor.name() + "': reading " + std::to_string(size) + " bytes from " +
                std::to_string(tensor.buffer().size_bytes()));
  if (onDevice(tensor)) MT_CUDA_CHECK(cudaMemcpyAsync(bytes, address(tensor), size, cudaMemcpyDeviceToHost, compute_));
  drain();
  if (!onDevice(tensor)) std::memcpy(bytes, address(tensor), size);
}

std::byte* CudaBackend::hostData(const plan::Tensor& tensor) {
  if (onDevice(tensor)) throw Error("cuda backend: tensor '" + tensor.name() + "' is in device memory");
  drain();  // a copy in flight may still read or write these bytes
  return address(tensor);
}

std::optional<DeviceMemory> CudaBackend::deviceMemory() const {
  size_t free = 0, total = 0;
  MT_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return DeviceMemory{free, total};
}

}  // namespace

std::unique_ptr<Backend> makeCudaBackend(int device) { return std::make_unique<CudaBackend>(device); }

}  // namespace megatrain::runtime
