// fuzz_onnx_weights.cpp - libFuzzer target: bytes as an ONNX model and its external data file, read as weights.
//
// The input is split in two: a 4-byte little-endian length L, then L bytes of
// model (written as model.onnx) and the rest as the external data file
// (written as weights.bin, the name the seeds' initializers point at). Every
// initializer OnnxWeights indexes is then read as F32 and as F64 with its own
// shape, as megatrain-run reads --weights; a wrong shape is also tried once.
// megatrain::Error is the expected rejection; anything else crashes the run.
// An initializer of more than kMaxElements elements is skipped, so the target
// measures the reader and not the allocator.
#include <cstring>
#include <vector>

#include "FuzzFile.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/OnnxWeights.h"

namespace {
constexpr uint64_t kMaxElements = uint64_t{1} << 22;

// Elements of `shape`, or kMaxElements + 1 when negative dims or the product
// passes kMaxElements (the reader itself refuses such shapes against the data).
uint64_t boundedElements(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return kMaxElements + 1;
    if (d != 0 && n > kMaxElements / static_cast<uint64_t>(d)) return kMaxElements + 1;
    n *= static_cast<uint64_t>(d);
  }
  return n;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t modelBytes = 0;
  std::memcpy(&modelBytes, data, 4);
  data += 4;
  size -= 4;
  if (modelBytes > size) modelBytes = static_cast<uint32_t>(size);
  const std::string path = megatrain::fuzz::writeFuzzFile("model.onnx", data, modelBytes);
  (void)megatrain::fuzz::writeFuzzFile("weights.bin", data + modelBytes, size - modelBytes);
  namespace plan = megatrain::plan;
  try {
    megatrain::runtime::OnnxWeights weights(path);
    for (const std::string& name : weights.names()) {
      std::vector<int64_t> shape;
      try {
        shape = weights.shape(name);
      } catch (const megatrain::Error&) {
        continue;
      }
      const uint64_t elements = boundedElements(shape);
      if (elements > kMaxElements) continue;
      for (plan::DType dtype : {plan::F32, plan::F64}) {
        const size_t bytes = static_cast<size_t>(elements) * (dtype == plan::F32 ? 4 : 8);
        std::vector<unsigned char> out(bytes);
        try {
          weights.read(name, dtype, shape, out.data(), out.size());
        } catch (const megatrain::Error&) {
        }
      }
      // A shape other than the initializer's must be refused, not read past.
      std::vector<int64_t> other = shape;
      other.push_back(2);
      std::vector<unsigned char> out(static_cast<size_t>(elements) * 8);
      try {
        weights.read(name, plan::F32, other, out.data(), out.size());
      } catch (const megatrain::Error&) {
      }
    }
  } catch (const megatrain::Error&) {
  }
  return 0;
}
