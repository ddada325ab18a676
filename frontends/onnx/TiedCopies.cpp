//===- TiedCopies.cpp - transposed copies of tied weights -----------------===//
#include "TiedCopies.h"
#include "TensorData.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace megatrain::onnx_import {

/// The bytes of one element of a floating dtype, 0 for others.
static size_t elementBytes(int32_t dtype) {
  switch (dtype) {
  case onnx::TensorProto::FLOAT:
    return 4;
  case onnx::TensorProto::DOUBLE:
    return 8;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    return 2;
  default:
    return 0;
  }
}

/// The stored bytes of `tensor` (raw_data, inline or external); false when it
/// has none of those or they cannot be read.
static bool storedBytes(const onnx::TensorProto &tensor, const std::string &modelPath,
                        size_t expected, std::string &out) {
  if (tensor.data_location() != onnx::TensorProto::EXTERNAL) {
    if (!tensor.has_raw_data() || tensor.raw_data().size() != expected)
      return false;
    out = tensor.raw_data();
    return true;
  }
  std::string location;
  uint64_t offset = 0;
  for (const onnx::StringStringEntryProto &e : tensor.external_data()) {
    if (e.key() == "location")
      location = e.value();
    else if (e.key() == "offset")
      offset = std::strtoull(e.value().c_str(), nullptr, 10);
  }
  if (location.empty())
    return false;
  // Only files inside the model's directory (a relative path without `..`,
  // symlinks resolved), and only bytes the file holds: the comparison is an
  // optimization, so anything else is simply not a copy.
  namespace fs = std::filesystem;
  const fs::path relative(location);
  if (relative.is_absolute())
    return false;
  for (const fs::path &part : relative)
    if (part == "..")
      return false;
  std::error_code error;
  const fs::path directory = fs::weakly_canonical(
      fs::absolute(fs::path(modelPath), error).parent_path(), error);
  const fs::path file_path = fs::weakly_canonical(directory / relative, error);
  if (error)
    return false;
  if (std::mismatch(directory.begin(), directory.end(), file_path.begin(), file_path.end())
          .first != directory.end())
    return false;
  const uintmax_t fileBytes = fs::file_size(file_path, error);
  if (error || offset > fileBytes || expected > fileBytes - offset)
    return false;
  std::ifstream file(file_path, std::ios::binary);
  if (!file.seekg((std::streamoff)offset))
    return false;
  out.resize(expected);
  return (bool)file.read(out.data(), (std::streamsize)expected);
}

llvm::StringMap<std::string>
findTransposedCopies(const onnx::GraphProto &graph, const std::string &modelPath,
                     const llvm::StringSet<> &tables,
                     const std::function<bool(const onnx::TensorProto &)> &candidate) {
  llvm::StringMap<std::string> copies;
  for (const onnx::TensorProto &table : graph.initializer()) {
    size_t size = elementBytes(table.data_type());
    if (!tables.contains(table.name()) || table.dims_size() != 2 || !size ||
        table.dims(0) == table.dims(1))
      continue;
    const int64_t rows = table.dims(0), cols = table.dims(1);
    // Dims from the file: positive, and a byte count that does not wrap
    // (a wrapped count could match a short stored tensor and the loop below
    // would read past it).
    size_t bytes = 0;
    if (rows <= 0 || cols <= 0 ||
        __builtin_mul_overflow((size_t)rows, (size_t)cols, &bytes) ||
        __builtin_mul_overflow(bytes, size, &bytes))
      continue;
    std::string tableData;
    bool tableRead = false;
    for (const onnx::TensorProto &copy : graph.initializer()) {
      if (&copy == &table || copies.count(copy.name()) || !candidate(copy) ||
          copy.data_type() != table.data_type() || copy.dims_size() != 2 ||
          copy.dims(0) != cols || copy.dims(1) != rows)
        continue;
      if (!tableRead && !(tableRead = storedBytes(table, modelPath, bytes, tableData)))
        break;
      std::string copyData;
      if (!storedBytes(copy, modelPath, bytes, copyData))
        continue;
      // copy[c][r] == table[r][c], element by element (bytes: a NaN matches itself).
      bool same = true;
      for (int64_t c = 0; same && c < cols; ++c)
        for (int64_t r = 0; r < rows; ++r)
          if (std::memcmp(copyData.data() + ((size_t)c * rows + r) * size,
                          tableData.data() + ((size_t)r * cols + c) * size, size) != 0) {
            same = false;
            break;
          }
      if (same)
        copies[copy.name()] = table.name();
    }
  }
  return copies;
}

} // namespace megatrain::onnx_import
