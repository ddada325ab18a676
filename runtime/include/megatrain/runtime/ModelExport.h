// ModelExport.h - writes trained parameters back out: into a copy of the ONNX model, or as safetensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "megatrain/plan/plan.pb.h"

namespace megatrain::runtime {

class Executor;
class OnnxWeights;

// One parameter's values as the runtime holds them: its host master.
struct ParameterValues {
  std::string name;              // the ONNX initializer (the PARAMETER's source)
  std::vector<int64_t> shape;
  plan::DType dtype = plan::F32; // F32 or F64, as the master is
  bool trainable = false;
  std::vector<std::byte> bytes;  // little-endian, row-major
};

// Every PARAMETER master of the executor's plan, in plan order.
std::vector<ParameterValues> readParameters(const Executor& executor);

// Where exportOnnx puts initializer data: `auto` moves it to an external file
// when the model's initializers hold more than the threshold (1 GiB) of data.
enum class ExternalData { Auto, Always, Never };
inline constexpr uint64_t kExternalDataThreshold = uint64_t{1} << 30;
inline constexpr uint64_t kExternalDataAlignment = 64;

// "auto" | "always" | "never"; Error otherwise.
ExternalData parseExternalData(const std::string& text);

struct OnnxExportResult {
  size_t replaced = 0;            // initializers that got trained values
  uint64_t initializerBytes = 0;  // initializer data in the source model
  std::string dataPath;           // the external data file, empty when inline
};

// Writes the model `source` was read from to `outPath` with the initializer of
// every trainable parameter replaced by its values, converted to the
// initializer's own data type (FLOAT, DOUBLE, FLOAT16 or BFLOAT16) with its
// name and dims; nothing else changes. With external data, the replaced
// initializers and those the source kept externally go to `<outPath>.data`
// (ONNX's convention: `location` relative to the model, `offset` 64-byte
// aligned, `length`); without, they are inline `raw_data`. Both files are
// written atomically, the data file first. Error (one line) if a parameter has
// no initializer of its shape or the model exceeds protobuf's 2 GiB inline.
OnnxExportResult exportOnnx(const OnnxWeights& source, const std::vector<ParameterValues>& parameters,
                            const std::string& outPath, ExternalData mode,
                            uint64_t threshold = kExternalDataThreshold);

}  // namespace megatrain::runtime
