// PointwiseJit.cpp - prepares and launches the compiled pointwise kernels: the signature of a step, NVRTC, the driver's module loader, the cache.
//
// The driver API's entry points come through cudaGetDriverEntryPointByVersion
// (as CudaBackendDisk.cpp gets cuStreamWaitValue32), so the binaries keep the
// static CUDA runtime and link no libcuda. A module is loaded into the
// current context once per device and source and never unloaded: the plans
// of one process share it, and a kernel costs a few KiB.
#include "PointwiseJit.h"

#include <cuda.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "EnvSetting.h"
#include "PointwiseSource.h"
#include "megatrain/plan/PointwiseProgram.h"

namespace megatrain::runtime::cuda {
namespace {

namespace pw = megatrain::pointwise;

// ---- the mode ----

std::mutex modeMutex;
bool modeChosen = false;
PointwiseMode chosenMode = PointwiseMode::Auto;

PointwiseMode modeFromEnvironment() {
  switch (envChoice("MEGATRAIN_POINTWISE", {"auto", "jit", "interp"})) {
    case 1: return PointwiseMode::Jit;
    case 2: return PointwiseMode::Interp;
    default: return PointwiseMode::Auto;
  }
}

// ---- the driver ----

using ModuleLoadData = CUresult (*)(CUmodule*, const void*);
using ModuleGetFunction = CUresult (*)(CUfunction*, CUmodule, const char*);
using LaunchKernel = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  CUstream, void**, void**);
using GetErrorName = CUresult (*)(CUresult, const char**);

struct Driver {
  ModuleLoadData moduleLoadData = nullptr;
  ModuleGetFunction moduleGetFunction = nullptr;
  LaunchKernel launchKernel = nullptr;
  GetErrorName getErrorName = nullptr;
};

template <typename F>
void entryPoint(const char* name, F& fn) {
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &entry, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || !entry) {
    (void)cudaGetLastError();
    throw Error(std::string("pointwise: the CUDA driver has no entry point ") + name);
  }
  fn = reinterpret_cast<F>(entry);
}

const Driver& driver() {
  static const Driver d = [] {
    Driver out;
    entryPoint("cuModuleLoadData", out.moduleLoadData);
    entryPoint("cuModuleGetFunction", out.moduleGetFunction);
    entryPoint("cuLaunchKernel", out.launchKernel);
    entryPoint("cuGetErrorName", out.getErrorName);
    return out;
  }();
  return d;
}

std::string resultName(CUresult result) {
  const char* name = nullptr;
  if (driver().getErrorName && driver().getErrorName(result, &name) == CUDA_SUCCESS && name) return name;
  return "CUresult " + std::to_string(static_cast<int>(result));
}

// ---- the cache: device and source -> function ----

std::mutex cacheMutex;
std::map<std::string, CUfunction> cache;
// Sources that failed, with why: not compiled again by the next step or plan.
std::map<std::string, std::string> failures;
bool noteGiven = false;

CUfunction compiled(const std::string& source) {
  int device = 0, major = 0, minor = 0;
  MT_CUDA_CHECK(cudaGetDevice(&device));
  MT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  MT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  const std::string key = std::to_string(device) + "\n" + source;
  std::lock_guard<std::mutex> lock(cacheMutex);
  auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  auto failed = failures.find(key);
  if (failed != failures.end()) throw Error(failed->second);
  try {
    const std::string cubin = compilePointwiseCubin(source, major, minor);
    MT_CUDA_CHECK(cudaFree(nullptr));  // the runtime's context is current before the driver loads into it
    CUmodule module = nullptr;
    CUresult result = driver().moduleLoadData(&module, cubin.data());
    if (result != CUDA_SUCCESS) throw Error("pointwise: cuModuleLoadData failed: " + resultName(result));
    CUfunction function = nullptr;
    result = driver().moduleGetFunction(&function, module, kPointwiseEntry);
    if (result != CUDA_SUCCESS) throw Error("pointwise: cuModuleGetFunction failed: " + resultName(result));
    cache.emplace(key, function);
    return function;
  } catch (const Error& e) {
    failures.emplace(key, e.what());
    throw;
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

PointwiseMode pointwiseMode() {
  std::lock_guard<std::mutex> lock(modeMutex);
  if (!modeChosen) chosenMode = modeFromEnvironment(), modeChosen = true;
  return chosenMode;
}

void setPointwiseMode(PointwiseMode mode) {
  std::lock_guard<std::mutex> lock(modeMutex);
  chosenMode = mode;
  modeChosen = true;
}

std::shared_ptr<const PointwiseJitLaunch> preparePointwiseJit(const Launch& launch, DType compute) {
  const PointwiseMode mode = pointwiseMode();
  if (mode == PointwiseMode::Interp) return nullptr;
  const Shape& shape = launch.out[0].shape;
  PointwiseSignature sig;
  sig.code = launch.attrs.getInts("code");
  sig.outputs = launch.attrs.getInts("outputs");
  sig.constants = launch.attrs.getFloats("constants");
  sig.compute = compute == DType::F64 ? DType::F64 : DType::F32;  // all-bf16 programs compute in f32, as the interpreter does
  sig.vectorized = true;
  for (int k = 0; k < launch.numIn; ++k) {
    sig.in.push_back(launch.in[k].dtype);
    sig.vectorized = sig.vectorized && launch.in[k].shape == shape && aligned16(launch.in[k].data);
  }
  for (int k = 0; k < launch.numOut; ++k) {
    sig.out.push_back(launch.out[k].dtype);
    sig.vectorized = sig.vectorized && aligned16(launch.out[k].data);
  }
  auto jit = std::make_shared<PointwiseJitLaunch>();
  try {
    jit->function = compiled(pointwiseSource(sig));
  } catch (const Error& e) {
    if (mode == PointwiseMode::Jit) throw;
    std::lock_guard<std::mutex> lock(cacheMutex);
    if (!noteGiven)
      std::fprintf(stderr,
                   "megatrain: note: pointwise step %lld runs the interpreter, the compiled path failed: %s\n"
                   "  (further failures are not reported; MEGATRAIN_POINTWISE=interp chooses the interpreter, "
                   "=jit makes this an error)\n",
                   static_cast<long long>(launch.step), e.what());
    noteGiven = true;
    return nullptr;
  }
  jit->vectorized = sig.vectorized;
  PointwiseJitParams& p = jit->params;
  const int64_t n = shape.elements();
  p.n = n;
  for (int k = 0; k < launch.numIn; ++k) p.in[k] = launch.in[k].data;
  for (int k = 0; k < launch.numOut; ++k) p.out[k] = launch.out[k].data;
  int64_t items = n;
  if (sig.vectorized) {
    items = n / pointwiseVectorWidth(sig);
  } else {
    StridedSpace<pw::kMaxOperands> space;
    space.rank = shape.rank;
    for (int d = 0; d < shape.rank; ++d) space.dims[d] = shape[d];
    for (int k = 0; k < launch.numIn; ++k) broadcastStrides(launch.in[k].shape, shape, space.strides[k]);
    coalesce(space);
    p.rank = space.rank;
    p.narrowBelow = space.narrowBelow;
    for (int d = 0; d < kMaxRank; ++d) p.dims[d] = space.dims[d];
    for (int k = 0; k < pw::kMaxOperands; ++k)
      for (int d = 0; d < kMaxRank; ++d) p.strides[k][d] = space.strides[k][d];
  }
  // Enough blocks to fill the device (8 of 256 threads an SM), never more than the items need.
  const int64_t needed = (items + kPointwiseJitThreads - 1) / kPointwiseJitThreads;
  jit->blocks = static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>(needed, static_cast<int64_t>(launch.device->smCount) * 8)));
  return jit;
}

void launchPointwiseJit(const Launch& launch, const PointwiseJitLaunch& jit) {
  if (jit.params.n == 0) return;
  void* args[] = {const_cast<PointwiseJitParams*>(&jit.params)};
  const CUresult result =
      driver().launchKernel(static_cast<CUfunction>(jit.function), jit.blocks, 1, 1, kPointwiseJitThreads, 1, 1, 0,
                            reinterpret_cast<CUstream>(launch.device->stream), args, nullptr);
  if (result != CUDA_SUCCESS) fail(launch, "the compiled kernel's launch failed: " + resultName(result));
}

}  // namespace megatrain::runtime::cuda
