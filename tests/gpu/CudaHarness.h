// CudaHarness.h - runs one-kernel plans on the CPU and CUDA backends and compares what they write.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "TestUtil.h"
#include "megatrain/runtime/Backend.h"

namespace megatrain::runtime::testing {

// Sets an environment variable for the life of the object (value nullptr: unset it), then
// puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value);
  ScopedEnv(const char* name, const std::string& value) : ScopedEnv(name, value.c_str()) {}
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// The CUDA backend the tests of one binary share (it holds a stream, a cuBLAS
// handle and its workspace); each case prepares it again for its own plan.
Backend& cudaBackend();

// The seed of a test's random inputs: MEGATRAIN_TEST_SEED if set (to replay a
// failure), otherwise fresh on every run.
uint32_t testSeed();

// One kernel step and its operands; inputs are written, outputs compared.
struct KernelCase {
  std::string kernel;
  std::vector<HostTensor> inputs;
  std::vector<OutputSpec> outputs;
  std::vector<plan::Attribute> attributes;
};

// "matmul([4, 5] f32, [5, 3] f32) transpose_a=1".
std::string describe(const KernelCase& c);

// The case as a plan: every operand an ACTIVATION in the device pool, inputs
// first, and one Kernel step.
plan::Plan oneKernelPlan(const KernelCase& c);

// A tensor's bytes as the plan lays them out, and back.
std::vector<std::byte> encode(const HostTensor& tensor);
HostTensor decode(const std::vector<std::byte>& bytes, const std::vector<int64_t>& shape, plan::DType dtype);

// Prepares `backend` for `plan`, writes the case's inputs, runs step 0,
// synchronizes and reads every output.
std::vector<HostTensor> runCase(Backend& backend, const plan::Plan& plan, const KernelCase& c);

// Runs the case on a fresh CpuBackend and on cudaBackend(). Floating outputs
// agree when every element is within tol * (|cpu| + max |cpu| of that output)
// (NaN matches NaN); integer outputs must be equal. tol 0 picks 1e-5 for f32
// and 1e-12 for f64.
::testing::AssertionResult cudaMatchesCpu(const KernelCase& c, double tol = 0);

// A matmul's operand shapes and transpose flags, and the shape of its result:
// the broadcast batch dims, then m and n.
struct MatmulShape {
  std::vector<int64_t> a, b;
  bool transA, transB;
};
std::vector<int64_t> matmulResult(const MatmulShape& s);

// The Error message the CUDA backend gives for the case (at prepare, launch or
// the synchronize after it), or "" if it runs cleanly.
std::string cudaError(const KernelCase& c);

}  // namespace megatrain::runtime::testing
