//===- OpCost.cpp - the roofline cost of kernels, copies and host tasks ---===//
#include "megatrain/Cost/OpCost.h"

#include <algorithm>

namespace megatrain {

uint64_t TensorShape::elements() const {
  uint64_t count = 1;
  for (int64_t dim : dims)
    count *= static_cast<uint64_t>(std::max<int64_t>(dim, 0));
  return count;
}

namespace {

int64_t attr(const KernelDesc &kernel, const char *name, int64_t fallback) {
  auto it = kernel.intAttrs.find(name);
  return it == kernel.intAttrs.end() ? fallback : it->second;
}

int64_t dimFromEnd(const TensorShape &shape, size_t fromEnd) {
  if (shape.dims.size() < fromEnd)
    return 1;
  return shape.dims[shape.dims.size() - fromEnd];
}

/// FLOPs of the matrix products a kernel performs; 0 for memory-bound ones.
double matmulFlops(const KernelDesc &kernel) {
  const std::string &name = kernel.kernel;
  if (name == "matmul" && kernel.inputs.size() == 2 && !kernel.outputs.empty()) {
    const TensorShape &a = kernel.inputs[0];
    int64_t k = attr(kernel, "transpose_a", 0) ? dimFromEnd(a, 2) : dimFromEnd(a, 1);
    return 2.0 * static_cast<double>(kernel.outputs[0].elements()) *
           static_cast<double>(k);
  }
  // Fused attention: q [B, Hq, S, D] against k, v [B, Hkv, S, D]: two
  // products of B*Hq*S*S*D multiply-adds each, half of them under a causal
  // mask. The backward does five such products (recomputing the scores).
  bool forward = name == "attention";
  bool backward = name == "attention_grad";
  if ((forward || backward) && !kernel.inputs.empty()) {
    const TensorShape &q = kernel.inputs[0];
    if (q.dims.size() != 4)
      return 0;
    double products = forward ? 2.0 : 5.0;
    double flops = products * 2.0 * static_cast<double>(q.elements()) *
                   static_cast<double>(q.dims[2]);
    if (attr(kernel, "causal", 1))
      flops *= 0.5;
    return flops;
  }
  return 0;
}

} // namespace

KernelCost estimateKernel(const KernelDesc &kernel, const DeviceProfile &profile,
                          Precision precision) {
  KernelCost cost;
  for (const TensorShape &input : kernel.inputs)
    cost.bytes += static_cast<double>(input.bytes());
  for (const TensorShape &output : kernel.outputs)
    cost.bytes += static_cast<double>(output.bytes());
  cost.flops = matmulFlops(kernel);
  double arithmetic = cost.flops / profile.matmulRate(precision);
  double memory = cost.bytes / profile.hbmBytesPerS;
  cost.seconds = std::max(arithmetic, memory) + profile.launchS;
  return cost;
}

Precision precisionNamed(const std::string &name, Precision fallback) {
  if (name == "tf32")
    return Precision::TF32;
  if (name == "bf16")
    return Precision::BF16;
  if (name == "fp32")
    return Precision::FP32;
  return fallback;
}

double transferSeconds(uint64_t bytes, Link link, const DeviceProfile &profile) {
  double rate = link == Link::HostToDevice ? profile.h2dBytesPerS : profile.d2hBytesPerS;
  return static_cast<double>(bytes) / rate + profile.launchS;
}

double hostAdamWSeconds(uint64_t parameters, const DeviceProfile &profile) {
  return static_cast<double>(parameters) / profile.hostAdamWParamsPerS;
}

double hostAccumulateSeconds(uint64_t elements, const DeviceProfile &profile) {
  // Read the accumulator and the addend, write the accumulator: 12 bytes.
  return static_cast<double>(elements) * 12.0 / profile.hostBytesPerS;
}

} // namespace megatrain
