// Safetensors.cpp - writes parameters in the safetensors format (Hugging Face's flat tensor file).
#include "megatrain/runtime/Safetensors.h"

#include <algorithm>
#include <cstdio>

#include "megatrain/plan/AtomicFile.h"
#include "megatrain/plan/Error.h"

namespace megatrain::runtime {
namespace {

// A JSON string literal; control characters as \u escapes.
std::string jsonString(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned>(c));
      out += escape;
    } else {
      out += c;  // UTF-8 passes through: names are UTF-8 in ONNX too
    }
  }
  return out + "\"";
}

std::vector<const ParameterValues*> sortedByName(const std::vector<ParameterValues>& tensors) {
  std::vector<const ParameterValues*> sorted;
  for (const ParameterValues& tensor : tensors) sorted.push_back(&tensor);
  std::sort(sorted.begin(), sorted.end(),
            [](const ParameterValues* a, const ParameterValues* b) { return a->name < b->name; });
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i]->name == sorted[i - 1]->name)
      throw Error("two tensors are named '" + sorted[i]->name + "'; safetensors names are unique");
  return sorted;
}

}  // namespace

std::string safetensorsDTypeName(plan::DType dtype, const std::string& what) {
  switch (dtype) {
    case plan::F32: return "F32";
    case plan::F64: return "F64";
    case plan::BF16: return "BF16";
    case plan::F16: return "F16";
    default:
      throw Error("tensor '" + what + "' is not f32, f64, bf16 or f16; safetensors export writes those only");
  }
}

std::string safetensorsHeader(const std::vector<SafetensorsEntry>& entries,
                              const std::map<std::string, std::string>& metadata) {
  std::string header = "{\"__metadata__\":{";
  bool first = true;
  for (const auto& [key, value] : metadata) {
    header += (first ? "" : ",") + jsonString(key) + ":" + jsonString(value);
    first = false;
  }
  header += "}";
  uint64_t offset = 0;
  for (const SafetensorsEntry& entry : entries) {
    header += "," + jsonString(entry.name) + ":{\"dtype\":\"" + entry.dtype + "\",\"shape\":[";
    for (size_t i = 0; i < entry.shape.size(); ++i)
      header += (i ? "," : "") + std::to_string(entry.shape[i]);
    const uint64_t end = offset + entry.bytes;
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]}";
    offset = end;
  }
  header += "}";
  // Spaces after the JSON are allowed; they keep the data 8-byte aligned.
  header.append((8 - header.size() % 8) % 8, ' ');
  return header;
}

std::string safetensorsHeader(const std::vector<ParameterValues>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsEntry> entries;
  for (const ParameterValues* tensor : sortedByName(tensors))
    entries.push_back({tensor->name, safetensorsDTypeName(tensor->dtype, tensor->name), tensor->shape,
                       tensor->bytes.size()});
  return safetensorsHeader(entries, metadata);
}

void writeSafetensors(const std::string& path, const std::vector<ParameterValues>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::string header = safetensorsHeader(tensors, metadata);
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(header.size() >> (8 * i));
  AtomicFile file(path);
  file.write(length, sizeof length);
  file.write(header.data(), header.size());
  // The host is little-endian (the runtime assumes it throughout), as the format is.
  for (const ParameterValues* tensor : sortedByName(tensors))
    file.write(tensor->bytes.data(), tensor->bytes.size());
  file.commit();
}

}  // namespace megatrain::runtime
