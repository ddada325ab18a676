// Safetensors.h - writes parameters in the safetensors format (Hugging Face's flat tensor file).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "megatrain/runtime/ModelExport.h"

namespace megatrain::runtime {

// One tensor of a safetensors header as a writer describes it.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // "F32", "F64", "BF16", "F16"
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
};

// The header for `entries` with their data back to back in the order given
// (names must be unique; the caller sorts them if it wants them sorted),
// "__metadata__" first, padded with spaces to a multiple of 8 bytes.
std::string safetensorsHeader(const std::vector<SafetensorsEntry>& entries,
                              const std::map<std::string, std::string>& metadata);

// The safetensors dtype name of a plan dtype: F32, F64, BF16, F16; Error
// naming `what` for the others.
std::string safetensorsDTypeName(plan::DType dtype, const std::string& what);

// Writes `tensors` to `path`, atomically: an 8-byte little-endian header
// length, a JSON header, then the tensors' bytes back to back. The header maps
// each name to {"dtype": "F32"|"F64"|"BF16"|"F16", "shape": [...], "data_offsets": [begin,
// end]} (offsets relative to the end of the header), names sorted, plus
// "__metadata__" with `metadata` (string values); it is padded with spaces to
// a multiple of 8 bytes so the data stays aligned. Error on a duplicate name.
void writeSafetensors(const std::string& path, const std::vector<ParameterValues>& tensors,
                      const std::map<std::string, std::string>& metadata);

// The header text writeSafetensors would write, padding included (for tests).
std::string safetensorsHeader(const std::vector<ParameterValues>& tensors,
                              const std::map<std::string, std::string>& metadata);

}  // namespace megatrain::runtime
