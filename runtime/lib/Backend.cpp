// Backend.cpp - the Backend hooks' default behaviour: wait for launched work, then run on the host.
#include "megatrain/runtime/Backend.h"

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/Accumulate.h"

namespace megatrain::runtime {

double scalarAsDouble(const std::byte* bytes, plan::DType dtype) {
  switch (dtype) {
    case plan::F32: { float v; std::memcpy(&v, bytes, 4); return v; }
    case plan::F64: { double v; std::memcpy(&v, bytes, 8); return v; }
    case plan::I64: { int64_t v; std::memcpy(&v, bytes, 8); return static_cast<double>(v); }
    case plan::I32: { int32_t v; std::memcpy(&v, bytes, 4); return v; }
    case plan::BF16: { uint16_t v; std::memcpy(&v, bytes, 2); return bf16ToFloat(v); }
    case plan::U8:
    case plan::BOOL: return static_cast<double>(static_cast<uint8_t>(bytes[0]));
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

void Backend::runAccumulate(const plan::Tensor& acc, const plan::Tensor& addend) {
  // hostData waits for the copy that filled the addend.
  std::byte* accBytes = hostData(acc);
  const std::byte* addendBytes = hostData(addend);
  accumulate(acc.dtype(), accBytes, addendBytes, static_cast<size_t>(elementCount(acc.shape())));
}

void Backend::zero(const plan::Tensor& tensor) {
  const std::vector<std::byte> zeros(tensor.buffer().size_bytes(), std::byte{0});
  write(tensor, zeros.data(), zeros.size());
}

void Backend::readLoss(const plan::Tensor& readout, double* loss) {
  synchronize();
  std::byte bytes[8] = {};
  const size_t size = readout.buffer().size_bytes();
  if (size > sizeof bytes) throw Error("loss readout '" + readout.name() + "' holds " + std::to_string(size) + " bytes");
  read(readout, bytes, size);
  *loss = scalarAsDouble(bytes, readout.dtype());
}

}  // namespace megatrain::runtime
