// AttentionBf16.cpp - f32 copies of a bf16 attention step's operands for the f32 paths (AttentionBf16.h).
#include "AttentionBf16.h"

namespace megatrain::runtime::cuda {
namespace {

constexpr size_t kAlign = 256;
size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

size_t f32Bytes(const Operand& operand) { return aligned(static_cast<size_t>(operand.shape.elements()) * 4); }

}  // namespace

Launch widenedView(const Launch& launch) {
  Launch view = launch;
  for (int i = 0; i < launch.numIn; ++i)
    if (view.in[i].dtype == DType::BF16) view.in[i].dtype = DType::F32;
  for (int i = 0; i < launch.numOut; ++i)
    if (view.out[i].dtype == DType::BF16) view.out[i].dtype = DType::F32;
  return view;
}

size_t widenedCopyBytes(const Launch& launch) {
  size_t bytes = 0;
  for (int i = 0; i < launch.numIn; ++i)
    if (launch.in[i].dtype == DType::BF16) bytes += f32Bytes(launch.in[i]);
  for (int i = 0; i < launch.numOut; ++i)
    if (launch.out[i].dtype == DType::BF16) bytes += f32Bytes(launch.out[i]);
  return bytes;
}

void runWidened(const Launch& launch, void (*run)(const Launch&)) {
  const size_t copies = widenedCopyBytes(launch);
  if (copies > launch.device->scratchBytes) fail(launch, "scratch too small (prepare sized it for another shape)");
  Launch inner = widenedView(launch);
  DeviceContext device = *launch.device;
  char* base = static_cast<char*>(device.scratch);
  size_t at = 0;
  for (int i = 0; i < launch.numIn; ++i) {
    const Operand& operand = launch.in[i];
    if (operand.dtype != DType::BF16) continue;
    float* copy = reinterpret_cast<float*>(base + at);
    at += f32Bytes(operand);
    convertBf16ToF32(launch, operand.as<const uint16_t>(), copy, operand.shape.elements());
    inner.in[i].data = copy;
  }
  for (int i = 0; i < launch.numOut; ++i) {
    if (launch.out[i].dtype != DType::BF16) continue;
    inner.out[i].data = base + at;
    at += f32Bytes(launch.out[i]);
  }
  device.scratch = base + at;
  device.scratchBytes -= at;
  inner.device = &device;
  run(inner);
  for (int i = 0; i < launch.numOut; ++i) {
    const Operand& operand = launch.out[i];
    if (operand.dtype == DType::BF16)
      convertF32ToBf16(launch, inner.out[i].as<const float>(), operand.as<uint16_t>(), operand.shape.elements());
  }
}

}  // namespace megatrain::runtime::cuda
