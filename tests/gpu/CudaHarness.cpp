// CudaHarness.cpp - runs one-kernel plans on the CPU and CUDA backends and compares what they write.
#include "CudaHarness.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>

#include "CudaBackend.h"
#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/CpuBackend.h"

namespace megatrain::runtime::testing {

ScopedEnv::ScopedEnv(const char* name, const char* value) : name_(name) {
  if (const char* old = std::getenv(name)) old_ = old, had_ = true;
  if (value) setenv(name, value, 1);
  else unsetenv(name);
}

ScopedEnv::~ScopedEnv() {
  if (had_) setenv(name_, old_.c_str(), 1);
  else unsetenv(name_);
}

Backend& cudaBackend() {
  static const std::unique_ptr<Backend> backend = makeCudaBackend();
  return *backend;
}

uint32_t testSeed() {
  if (const char* fixed = std::getenv("MEGATRAIN_TEST_SEED")) return static_cast<uint32_t>(std::strtoul(fixed, nullptr, 10));
  return std::random_device{}();
}

std::string describe(const KernelCase& c) {
  std::ostringstream text;
  text << c.kernel << "(";
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    text << (i ? ", " : "") << "[";
    for (size_t d = 0; d < c.inputs[i].shape.size(); ++d) text << (d ? ", " : "") << c.inputs[i].shape[d];
    text << "] " << dtypeName(c.inputs[i].dtype);
  }
  text << ")";
  for (const plan::Attribute& a : c.attributes) {
    text << " " << a.name() << "=";
    switch (a.value_case()) {
      case plan::Attribute::kI: text << a.i(); break;
      case plan::Attribute::kF: text << a.f(); break;
      case plan::Attribute::kS: text << a.s(); break;
      case plan::Attribute::kInts:
        for (int k = 0; k < a.ints().values_size(); ++k) text << (k ? "," : "") << a.ints().values(k);
        break;
      default: break;
    }
  }
  return text.str();
}

plan::Plan oneKernelPlan(const KernelCase& c) {
  PlanBuilder builder;
  std::vector<uint32_t> in, out;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    in.push_back(builder.tensor("in" + std::to_string(i), c.inputs[i].shape, c.inputs[i].dtype, plan::ACTIVATION));
  for (size_t i = 0; i < c.outputs.size(); ++i)
    out.push_back(builder.tensor("out" + std::to_string(i), c.outputs[i].first, c.outputs[i].second, plan::ACTIVATION));
  builder.kernel(c.kernel, in, out, c.attributes);
  return builder.build();
}

std::vector<std::byte> encode(const HostTensor& tensor) {
  const size_t size = dtypeSize(tensor.dtype);
  std::vector<std::byte> bytes(tensor.values.size() * size);
  for (size_t i = 0; i < tensor.values.size(); ++i) {
    std::byte* at = bytes.data() + i * size;
    const double v = tensor.values[i];
    switch (tensor.dtype) {
      case plan::F32: { const float f = static_cast<float>(v); std::memcpy(at, &f, 4); break; }
      case plan::F64: std::memcpy(at, &v, 8); break;
      case plan::I64: { const int64_t n = static_cast<int64_t>(v); std::memcpy(at, &n, 8); break; }
      case plan::I32: { const int32_t n = static_cast<int32_t>(v); std::memcpy(at, &n, 4); break; }
      case plan::BOOL: *at = std::byte{v != 0 ? uint8_t{1} : uint8_t{0}}; break;
      case plan::BF16: { const uint16_t h = floatToBf16(static_cast<float>(v)); std::memcpy(at, &h, 2); break; }
      default: throw Error(std::string("encode: unsupported dtype ") + dtypeName(tensor.dtype));
    }
  }
  return bytes;
}

HostTensor decode(const std::vector<std::byte>& bytes, const std::vector<int64_t>& shape, plan::DType dtype) {
  HostTensor tensor{shape, dtype, {}};
  const size_t size = dtypeSize(dtype);
  tensor.values.resize(bytes.size() / size);
  for (size_t i = 0; i < tensor.values.size(); ++i) {
    const std::byte* at = bytes.data() + i * size;
    switch (dtype) {
      case plan::F32: { float f; std::memcpy(&f, at, 4); tensor.values[i] = f; break; }
      case plan::F64: std::memcpy(&tensor.values[i], at, 8); break;
      case plan::I64: { int64_t n; std::memcpy(&n, at, 8); tensor.values[i] = static_cast<double>(n); break; }
      case plan::I32: { int32_t n; std::memcpy(&n, at, 4); tensor.values[i] = n; break; }
      case plan::BOOL: tensor.values[i] = std::to_integer<uint8_t>(*at); break;
      case plan::BF16: { uint16_t h; std::memcpy(&h, at, 2); tensor.values[i] = bf16ToFloat(h); break; }
      default: throw Error(std::string("decode: unsupported dtype ") + dtypeName(dtype));
    }
  }
  return tensor;
}

std::vector<HostTensor> runCase(Backend& backend, const plan::Plan& plan, const KernelCase& c) {
  backend.prepare(plan);
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const std::vector<std::byte> bytes = encode(c.inputs[i]);
    backend.write(plan.tensors(static_cast<int>(i)), bytes.data(), bytes.size());
  }
  backend.launchKernel(0);
  backend.synchronize();
  std::vector<HostTensor> results;
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    const plan::Tensor& tensor = plan.tensors(static_cast<int>(c.inputs.size() + i));
    std::vector<std::byte> bytes(tensor.buffer().size_bytes());
    backend.read(tensor, bytes.data(), bytes.size());
    results.push_back(decode(bytes, c.outputs[i].first, c.outputs[i].second));
  }
  return results;
}

::testing::AssertionResult cudaMatchesCpu(const KernelCase& c, double tol) {
  const plan::Plan plan = oneKernelPlan(c);
  std::vector<HostTensor> cpu, gpu;
  try {
    CpuBackend reference;
    cpu = runCase(reference, plan, c);
  } catch (const Error& e) {
    return ::testing::AssertionFailure() << "the CPU backend failed: " << e.what();
  }
  try {
    gpu = runCase(cudaBackend(), plan, c);
  } catch (const Error& e) {
    return ::testing::AssertionFailure() << "the CUDA backend failed: " << e.what();
  }
  for (size_t o = 0; o < cpu.size(); ++o) {
    const plan::DType dtype = c.outputs[o].second;
    const std::vector<double>&expected = cpu[o].values, &actual = gpu[o].values;
    if (!isFloating(dtype)) {
      for (size_t i = 0; i < expected.size(); ++i)
        if (expected[i] != actual[i])
          return ::testing::AssertionFailure() << "output " << o << " element " << i << ": cuda " << actual[i]
                                               << ", cpu " << expected[i];
      continue;
    }
    const double rtol = tol > 0 ? tol : (dtype == plan::F32 ? 1e-5 : 1e-12);
    double scale = 0;
    for (double v : expected)
      if (std::isfinite(v)) scale = std::max(scale, std::abs(v));
    size_t bad = 0, first = 0;
    double worst = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      const double e = expected[i], a = actual[i];
      if (std::isnan(e) && std::isnan(a)) continue;
      const double error = std::abs(a - e);
      const double bound = rtol * (std::abs(e) + scale);
      if (!(error <= bound) && !(e == a)) {  // e == a: matching infinities
        if (bad++ == 0) first = i;
        worst = std::max(worst, error / (std::abs(e) + scale));
      }
    }
    if (bad)
      return ::testing::AssertionFailure()
             << "output " << o << ": " << bad << " of " << expected.size() << " elements differ beyond " << rtol
             << " x (|cpu| + " << scale << "); first at " << first << ": cuda " << actual[first] << ", cpu "
             << expected[first] << "; worst relative error " << worst;
  }
  return ::testing::AssertionSuccess();
}

std::string cudaError(const KernelCase& c) {
  try {
    runCase(cudaBackend(), oneKernelPlan(c), c);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<int64_t> matmulResult(const MatmulShape& s) {
  const size_t ra = s.a.size(), rb = s.b.size();
  const int64_t m = s.transA ? s.a[ra - 1] : s.a[ra - 2];
  const int64_t n = s.transB ? s.b[rb - 2] : s.b[rb - 1];
  const size_t batch = std::max(ra, rb) - 2;
  std::vector<int64_t> y;
  for (size_t i = 0; i < batch; ++i) {
    const int64_t da = i + ra - 2 >= batch ? s.a[i + ra - 2 - batch] : 1;
    const int64_t db = i + rb - 2 >= batch ? s.b[i + rb - 2 - batch] : 1;
    y.push_back(std::max(da, db));
  }
  y.push_back(m);
  y.push_back(n);
  return y;
}

}  // namespace megatrain::runtime::testing
