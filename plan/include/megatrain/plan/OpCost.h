//===- OpCost.h - predicted time of one kernel, copy or host task ---------===//
//
// The cost model both the tiering pass (on IR ops) and the plan simulator (on
// plan steps) use, so they agree. It is a roofline: a kernel takes the larger
// of its arithmetic time (FLOPs over the matmul rate, for the kernels that
// are matrix products) and its memory time (bytes read + written over the
// device bandwidth), plus a launch cost. Copies take bytes over the link's
// bandwidth; a host AdamW task, parameters over the host update rate.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_COST_OPCOST_H
#define MEGATRAIN_COST_OPCOST_H

#include "megatrain/plan/DeviceProfile.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace megatrain {

struct TensorShape {
  std::vector<int64_t> dims;
  unsigned elementBytes = 4;
  uint64_t elements() const;
  uint64_t bytes() const { return elements() * elementBytes; }
};

/// A kernel as both the IR and the plan can describe it: its name (the
/// docs/ops.md kernel name, equal to the mt op name without "mt."), operand
/// and result shapes, and its integer attributes (transpose flags, causal).
struct KernelDesc {
  std::string kernel;
  std::vector<TensorShape> inputs;
  std::vector<TensorShape> outputs;
  std::map<std::string, int64_t> intAttrs;
  /// The profile's kernel_efficiency entry it is priced by, when not the
  /// kernel's own: a matmul_add adding a weight gradient's part into its
  /// accumulator in place is a weight-gradient product, "matmul".
  std::string family;
};

struct KernelCost {
  double flops = 0;  // arithmetic of matrix products (0 for the rest)
  double bytes = 0;  // device bytes read + written
  double seconds = 0;
};

KernelCost estimateKernel(const KernelDesc &kernel, const DeviceProfile &profile,
                          Precision precision = Precision::FP32);

/// The Precision a kernel's `precision` attribute names ("tf32", "bf16");
/// `fallback` for anything else (absent, "fp32").
Precision precisionNamed(const std::string &name, Precision fallback = Precision::FP32);

enum class Link { HostToDevice, DeviceToHost };

/// Seconds to move `bytes` over one link alone.
double transferSeconds(uint64_t bytes, Link link, const DeviceProfile &profile);

/// Seconds for the host to update `parameters` with AdamW.
double hostAdamWSeconds(uint64_t parameters, const DeviceProfile &profile);

/// Seconds for the host to add `elements` fp32 values into an accumulator.
double hostAccumulateSeconds(uint64_t elements, const DeviceProfile &profile);

/// Seconds for the fused device AdamW of `parameters` f32 parameters: read
/// master, gradient, m, v, write master, m, v (28 bytes), plus 2 bytes for
/// the bf16 compute copy when there is one, over HBM, plus a launch.
double deviceAdamWSeconds(uint64_t parameters, bool computeCopy, const DeviceProfile &profile);

/// Seconds for the device to add `elements` fp32 values into an accumulator.
double deviceAccumulateSeconds(uint64_t elements, const DeviceProfile &profile);

} // namespace megatrain

#endif // MEGATRAIN_COST_OPCOST_H
