// Safetensors.h - writes parameters in the safetensors format (Hugging Face's flat tensor file).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "megatrain/runtime/ModelExport.h"

namespace megatrain::runtime {

// Writes `tensors` to `path`, atomically: an 8-byte little-endian header
// length, a JSON header, then the tensors' bytes back to back. The header maps
// each name to {"dtype": "F32"|"F64", "shape": [...], "data_offsets": [begin,
// end]} (offsets relative to the end of the header), names sorted, plus
// "__metadata__" with `metadata` (string values); it is padded with spaces to
// a multiple of 8 bytes so the data stays aligned. Error on a duplicate name.
void writeSafetensors(const std::string& path, const std::vector<ParameterValues>& tensors,
                      const std::map<std::string, std::string>& metadata);

// The header text writeSafetensors would write, padding included (for tests).
std::string safetensorsHeader(const std::vector<ParameterValues>& tensors,
                              const std::map<std::string, std::string>& metadata);

}  // namespace megatrain::runtime
