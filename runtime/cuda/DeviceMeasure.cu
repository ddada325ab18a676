// DeviceMeasure.cu - matmul rates, device and host-link bandwidths and launch cost, timed with CUDA events.
//
// Each figure is the best of `runs` timed runs after a warm-up, each run
// several repetitions between two events on one stream (the duplex figure:
// two streams joined by events). Inputs are random in [-1, 1]: zeros would let
// a matmul unit idle on some chips and report a rate no model sees.
#include "DeviceMeasure.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <thread>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

namespace megatrain::runtime::cuda {
namespace {

// ---- error checks: one line naming the call, the error, file and line ----

void checkCall(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  throw std::runtime_error(std::string("CUDA error: ") + call + ": " + cudaGetErrorString(status) +
                           " (" + file + ":" + std::to_string(line) + ")");
}
void checkCall(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw std::runtime_error(std::string("cuBLAS error: ") + call + ": " + cublasGetStatusString(status) +
                           " (" + file + ":" + std::to_string(line) + ")");
}
#define PROFILE_CHECK(call) checkCall((call), #call, __FILE__, __LINE__)

// ---- owned resources (freed on every path, errors included) ----

struct DeviceBuffer {
  void* data = nullptr;
  explicit DeviceBuffer(size_t bytes) { PROFILE_CHECK(cudaMalloc(&data, bytes)); }
  ~DeviceBuffer() { cudaFree(data); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

struct PinnedBuffer {
  void* data = nullptr;
  explicit PinnedBuffer(size_t bytes) {
    PROFILE_CHECK(cudaHostAlloc(&data, bytes, cudaHostAllocDefault));
    std::memset(data, 0x3c, bytes);  // touched, and not all zeros
  }
  ~PinnedBuffer() { cudaFreeHost(data); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
};

struct Stream {
  cudaStream_t stream = nullptr;
  Stream() { PROFILE_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(stream); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
};

struct Event {
  cudaEvent_t event = nullptr;
  Event() { PROFILE_CHECK(cudaEventCreate(&event)); }
  ~Event() { cudaEventDestroy(event); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

struct Cublas {
  cublasHandle_t handle = nullptr;
  Cublas() { PROFILE_CHECK(cublasCreate(&handle)); }
  ~Cublas() { cublasDestroy(handle); }
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;
};

// ---- kernels ----

__device__ float uniformAt(uint64_t i, uint32_t seed) {
  // splitmix64 of (index, seed): independent values in [-1, 1).
  uint64_t z = i * 0x9E3779B97F4A7C15ull + seed;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void fillUniform(float* out, size_t count, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    out[i] = uniformAt(i, seed);
}

__global__ void toBf16(const float* in, __nv_bfloat16* out, size_t count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16(in[i]);
}

__global__ void emptyKernel() {}

// ---- timing ----

// Best seconds per repetition over `runs` runs of `reps` calls of body(stream)
// between two events, after one warm-up call.
template <typename Body>
double bestSeconds(cudaStream_t stream, int runs, int reps, Body&& body) {
  Event start, stop;
  body(stream);
  PROFILE_CHECK(cudaStreamSynchronize(stream));
  double best = 1e30;
  for (int run = 0; run < runs; ++run) {
    PROFILE_CHECK(cudaEventRecord(start.event, stream));
    for (int rep = 0; rep < reps; ++rep) body(stream);
    PROFILE_CHECK(cudaEventRecord(stop.event, stream));
    PROFILE_CHECK(cudaEventSynchronize(stop.event));
    float ms = 0;
    PROFILE_CHECK(cudaEventElapsedTime(&ms, start.event, stop.event));
    best = std::min(best, static_cast<double>(ms) * 1e-3 / reps);
  }
  return best;
}

void launchFill(float* out, size_t count, uint32_t seed, cudaStream_t stream) {
  fillUniform<<<1024, 256, 0, stream>>>(out, count, seed);
  PROFILE_CHECK(cudaGetLastError());
}

// ---- the figures ----

void measureMatmuls(const DeviceMeasureOptions& options, cudaStream_t stream, DeviceFigures& figures) {
  const int n = options.matmulSize;
  const size_t count = size_t(n) * n;
  const double flops = 2.0 * n * double(n) * n;
  const int reps = 5;
  DeviceBuffer a(count * 4), b(count * 4), c(count * 4);
  DeviceBuffer a16(count * 2), b16(count * 2), c16(count * 2);
  const size_t workspaceBytes = size_t(32) << 20;  // as the CUDA backend's
  DeviceBuffer workspace(workspaceBytes);
  launchFill(static_cast<float*>(a.data), count, 1, stream);
  launchFill(static_cast<float*>(b.data), count, 2, stream);
  toBf16<<<1024, 256, 0, stream>>>(static_cast<const float*>(a.data), static_cast<__nv_bfloat16*>(a16.data), count);
  PROFILE_CHECK(cudaGetLastError());
  toBf16<<<1024, 256, 0, stream>>>(static_cast<const float*>(b.data), static_cast<__nv_bfloat16*>(b16.data), count);
  PROFILE_CHECK(cudaGetLastError());

  Cublas cublas;
  PROFILE_CHECK(cublasSetStream(cublas.handle, stream));
  PROFILE_CHECK(cublasSetWorkspace(cublas.handle, workspace.data, workspaceBytes));
  // The backend's mode: plain fp32 for Sgemm, no TF32.
  PROFILE_CHECK(cublasSetMathMode(cublas.handle, CUBLAS_DEFAULT_MATH));
  const float one = 1.0f, zero = 0.0f;
  const float* fa = static_cast<const float*>(a.data);
  const float* fb = static_cast<const float*>(b.data);
  float* fc = static_cast<float*>(c.data);

  figures.matmulFp32 = flops / bestSeconds(stream, options.runs, reps, [&](cudaStream_t) {
    PROFILE_CHECK(cublasSgemm(cublas.handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, fa, n, fb, n, &zero, fc, n));
  });
  figures.matmulTf32 = flops / bestSeconds(stream, options.runs, reps, [&](cudaStream_t) {
    PROFILE_CHECK(cublasGemmEx(cublas.handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, fa, CUDA_R_32F, n, fb,
                               CUDA_R_32F, n, &zero, fc, CUDA_R_32F, n, CUBLAS_COMPUTE_32F_FAST_TF32,
                               CUBLAS_GEMM_DEFAULT));
  });
  figures.matmulBf16 = flops / bestSeconds(stream, options.runs, reps, [&](cudaStream_t) {
    PROFILE_CHECK(cublasGemmEx(cublas.handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a16.data, CUDA_R_16BF, n,
                               b16.data, CUDA_R_16BF, n, &zero, c16.data, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT));
  });
  PROFILE_CHECK(cudaStreamSynchronize(stream));
}

void measureCopies(const DeviceMeasureOptions& options, cudaStream_t stream, DeviceFigures& figures) {
  const size_t bytes = options.copyBytes;
  {
    DeviceBuffer src(bytes), dst(bytes);
    launchFill(static_cast<float*>(src.data), bytes / 4, 3, stream);
    // Read + write: each copied byte crosses HBM twice.
    figures.hbmBytesPerS = 2.0 * double(bytes) / bestSeconds(stream, options.runs, 10, [&](cudaStream_t s) {
      PROFILE_CHECK(cudaMemcpyAsync(dst.data, src.data, bytes, cudaMemcpyDeviceToDevice, s));
    });
  }
  DeviceBuffer deviceIn(bytes), deviceOut(bytes);
  PinnedBuffer hostOut(bytes), hostIn(bytes);
  launchFill(static_cast<float*>(deviceOut.data), bytes / 4, 4, stream);
  const int reps = 3;
  figures.h2dBytesPerS = double(bytes) / bestSeconds(stream, options.runs, reps, [&](cudaStream_t s) {
    PROFILE_CHECK(cudaMemcpyAsync(deviceIn.data, hostOut.data, bytes, cudaMemcpyHostToDevice, s));
  });
  figures.d2hBytesPerS = double(bytes) / bestSeconds(stream, options.runs, reps, [&](cudaStream_t s) {
    PROFILE_CHECK(cudaMemcpyAsync(hostIn.data, deviceOut.data, bytes, cudaMemcpyDeviceToHost, s));
  });

  // Both directions at once: h2d on `stream`, d2h on a second stream that
  // starts when `stream` reaches `start` and is waited for before `stop`.
  Stream other;
  Event start, stop, otherDone;
  auto both = [&](int count) {
    PROFILE_CHECK(cudaEventRecord(start.event, stream));
    PROFILE_CHECK(cudaStreamWaitEvent(other.stream, start.event, 0));
    for (int rep = 0; rep < count; ++rep) {
      PROFILE_CHECK(cudaMemcpyAsync(deviceIn.data, hostOut.data, bytes, cudaMemcpyHostToDevice, stream));
      PROFILE_CHECK(cudaMemcpyAsync(hostIn.data, deviceOut.data, bytes, cudaMemcpyDeviceToHost, other.stream));
    }
    PROFILE_CHECK(cudaEventRecord(otherDone.event, other.stream));
    PROFILE_CHECK(cudaStreamWaitEvent(stream, otherDone.event, 0));
    PROFILE_CHECK(cudaEventRecord(stop.event, stream));
    PROFILE_CHECK(cudaEventSynchronize(stop.event));
    float ms = 0;
    PROFILE_CHECK(cudaEventElapsedTime(&ms, start.event, stop.event));
    return static_cast<double>(ms) * 1e-3;
  };
  both(1);  // warm-up
  double best = 1e30;
  for (int run = 0; run < options.runs; ++run) best = std::min(best, both(reps));
  figures.duplexBytesPerS = 2.0 * double(bytes) * reps / best;
}

void measureLaunch(const DeviceMeasureOptions& options, cudaStream_t stream, DeviceFigures& figures) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < 100; ++i) emptyKernel<<<1, 1, 0, stream>>>();
  PROFILE_CHECK(cudaGetLastError());
  PROFILE_CHECK(cudaStreamSynchronize(stream));
  double best = 1e30;
  for (int run = 0; run < options.runs; ++run) {
    const Clock::time_point begin = Clock::now();
    for (int i = 0; i < options.launches; ++i) emptyKernel<<<1, 1, 0, stream>>>();
    PROFILE_CHECK(cudaStreamSynchronize(stream));
    const double seconds = std::chrono::duration<double>(Clock::now() - begin).count();
    PROFILE_CHECK(cudaGetLastError());
    best = std::min(best, seconds / options.launches);
  }
  figures.launchS = best;
}

}  // namespace

DeviceFigures measureDevice(const DeviceMeasureOptions& options) {
  if (options.matmulSize < 16 || options.copyBytes < 4096 || options.runs < 1 || options.launches < 1)
    throw std::runtime_error("device measurement: matmul size >= 16, copy bytes >= 4096, runs and launches >= 1");
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess) throw std::runtime_error(std::string("no CUDA device: ") + cudaGetErrorString(status));
  if (devices == 0) throw std::runtime_error("no CUDA device");
  PROFILE_CHECK(cudaSetDevice(0));

  DeviceFigures figures;
  cudaDeviceProp properties;
  PROFILE_CHECK(cudaGetDeviceProperties(&properties, 0));
  figures.name = properties.name;
  size_t freeBytes = 0, totalBytes = 0;
  PROFILE_CHECK(cudaMemGetInfo(&freeBytes, &totalBytes));
  figures.memoryBytes = totalBytes;

  Stream stream;
  measureLaunch(options, stream.stream, figures);
  measureMatmuls(options, stream.stream, figures);
  measureCopies(options, stream.stream, figures);
  PROFILE_CHECK(cudaStreamSynchronize(stream.stream));
  return figures;
}

double whileLinksCopy(size_t bytes, const std::function<void()>& work) {
  if (bytes < 4096) throw std::runtime_error("link load: bytes >= 4096");
  PROFILE_CHECK(cudaSetDevice(0));
  PinnedBuffer hostIn(bytes), hostOut(bytes);
  DeviceBuffer deviceIn(bytes), deviceOut(bytes);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> moved{0};
  std::exception_ptr copyError;
  std::thread copier([&] {
    try {
      PROFILE_CHECK(cudaSetDevice(0));
      Stream up, down;
      while (!stop.load(std::memory_order_relaxed)) {
        PROFILE_CHECK(cudaMemcpyAsync(deviceIn.data, hostIn.data, bytes, cudaMemcpyHostToDevice, up.stream));
        PROFILE_CHECK(cudaMemcpyAsync(hostOut.data, deviceOut.data, bytes, cudaMemcpyDeviceToHost, down.stream));
        PROFILE_CHECK(cudaStreamSynchronize(up.stream));
        PROFILE_CHECK(cudaStreamSynchronize(down.stream));
        moved.fetch_add(2 * uint64_t(bytes), std::memory_order_relaxed);
      }
    } catch (...) {
      copyError = std::current_exception();
    }
  });
  std::exception_ptr workError;
  const auto begin = std::chrono::steady_clock::now();
  try {
    work();
  } catch (...) {
    workError = std::current_exception();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  const uint64_t during = moved.load();
  stop = true;
  copier.join();
  if (copyError) std::rethrow_exception(copyError);
  if (workError) std::rethrow_exception(workError);
  return seconds > 0 ? double(during) / seconds : 0.0;
}

}  // namespace megatrain::runtime::cuda
