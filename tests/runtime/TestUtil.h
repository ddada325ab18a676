// TestUtil.h - helpers for the runtime tests: host tensors, a one-kernel harness, a plan builder.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "megatrain/plan/plan.pb.h"

namespace megatrain::runtime::testing {

plan::Attribute intAttr(const std::string& name, int64_t value);
plan::Attribute floatAttr(const std::string& name, double value);
plan::Attribute intsAttr(const std::string& name, const std::vector<int64_t>& values);
plan::Attribute floatsAttr(const std::string& name, const std::vector<double>& values);
plan::Attribute stringAttr(const std::string& name, const std::string& value);

// A tensor on the test's side: values as doubles whatever the dtype.
struct HostTensor {
  std::vector<int64_t> shape;
  plan::DType dtype = plan::F64;
  std::vector<double> values;

  int64_t elements() const;
};

// Uniform values in [lo, hi), rounded to the dtype so that a reference sees
// exactly what the kernel sees.
HostTensor randomTensor(const std::vector<int64_t>& shape, plan::DType dtype, std::mt19937& rng,
                        double lo = -1.0, double hi = 1.0);
HostTensor intTensor(const std::vector<int64_t>& shape, const std::vector<int64_t>& values);

// Relative-and-absolute tolerance for results of dtype (f32 or f64).
double tolerance(plan::DType dtype);

// Every element within tol * (1 + |expected|); names the first mismatch.
void expectAllNear(const std::vector<double>& actual, const std::vector<double>& expected,
                   double tol);

// Bitwise equality of values read back as doubles (each f32, bf16 or f64
// value is one double exactly; NaN equals NaN of the same bits); names the
// first mismatch.
void expectSameBits(const std::vector<double>& actual, const std::vector<double>& expected,
                    const std::string& what);

// Row-major strides of a shape.
std::vector<int64_t> stridesOf(const std::vector<int64_t>& shape);

using OutputSpec = std::pair<std::vector<int64_t>, plan::DType>;

// Runs one kernel on a fresh CpuBackend (all operands in one device pool) and
// returns its outputs.
std::vector<HostTensor> runKernel(const std::string& kernel, const std::vector<HostTensor>& inputs,
                                  const std::vector<OutputSpec>& outputs,
                                  const std::vector<plan::Attribute>& attributes = {});

// Same, expecting the kernel to throw Error; returns its message ("" if none).
std::string kernelError(const std::string& kernel, const std::vector<HostTensor>& inputs,
                        const std::vector<OutputSpec>& outputs,
                        const std::vector<plan::Attribute>& attributes = {});

// validatePlan's message for `plan` on a CpuBackend (file name "t.plan"), "" if it passes.
std::string planValidationError(const plan::Plan& plan);

// Builds small plans by hand: pool 0 "device" (DEVICE) and pool 1 "host"
// (HOST_PINNED), streams compute/h2d/d2h/host. Tensors are placed one after
// another, 64-byte aligned, in the pool their role belongs to.
class PlanBuilder {
 public:
  PlanBuilder();

  uint32_t tensor(const std::string& name, const std::vector<int64_t>& shape, plan::DType dtype,
                  plan::Role role);
  uint32_t kernel(const std::string& name, const std::vector<uint32_t>& inputs,
                  const std::vector<uint32_t>& outputs,
                  const std::vector<plan::Attribute>& attributes = {});
  uint32_t copy(uint32_t src, uint32_t dst, const std::string& stream);
  uint32_t record(const std::string& event, const std::string& stream);
  uint32_t wait(const std::string& event, const std::string& stream);
  uint32_t adamw(uint32_t param, uint32_t grad, uint32_t m, uint32_t v);
  uint32_t readLoss(uint32_t readout);
  // The usual loss readout, six steps: record loss_ready on compute, wait for
  // it on d2h, copy loss -> readout there, record readout_ready, wait for it
  // on host, READ_LOSS. Returns the READ_LOSS step.
  uint32_t readLossThroughD2h(uint32_t loss, uint32_t readout);

  // Sets last_use_step of every device tensor but the CONSTANTs to the last
  // step that reads or writes it, sizes the pools, and returns the plan.
  plan::Plan build();

  plan::Plan& plan() { return plan_; }

 private:
  plan::Step& addStep(const std::string& stream);

  plan::Plan plan_;
  uint64_t used_[2] = {0, 0};
};

// A fresh empty directory under the system temp dir, removed when the test binary exits.
std::string makeTempDir();

}  // namespace megatrain::runtime::testing
