// fuzz_safetensors.cpp - libFuzzer target: bytes as a .safetensors file through SafetensorsWeights (runtime/lib/SafetensorsReader.cpp).
// Opens the file, then reads every tensor as f32 and f64 with its stored shape.
// megatrain::Error is an expected rejection; anything else crashes the run.
#include <vector>

#include "FuzzFile.h"
#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/SafetensorsReader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = megatrain::fuzz::writeFuzzFile("input.safetensors", data, size);
  try {
    const megatrain::runtime::SafetensorsWeights weights(path);
    for (const auto& [name, tensor] : weights.tensors()) {
      // The header was checked against the file's size, so a tensor holds
      // at most `size` bytes; its f64 copy at most 8x that.
      const size_t elementBytes = megatrain::runtime::safetensorsDTypeSize(tensor.dtype);
      const size_t count = elementBytes ? (tensor.end - tensor.begin) / elementBytes : 0;
      std::vector<double> out(count);
      for (const auto dtype : {megatrain::plan::F32, megatrain::plan::F64}) {
        try {
          weights.read(name, dtype, tensor.shape, out.data(), count * megatrain::dtypeSize(dtype));
        } catch (const megatrain::Error&) {
        }
      }
    }
  } catch (const megatrain::Error&) {
  }
  return 0;
}
