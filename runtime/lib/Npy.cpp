// Npy.cpp - reads and writes NumPy .npy files (v1/v2, little-endian, C order).
//
// The format: "\x93NUMPY", major, minor, a little-endian header length (2 bytes
// in v1, 4 in v2/v3), then a Python dict literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } padded with
// spaces to a multiple of 64 bytes and ending in '\n', then the raw data.
#include "megatrain/runtime/Npy.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>

#include "megatrain/plan/AtomicFile.h"
#include "megatrain/plan/Error.h"

namespace megatrain::runtime {
namespace {

const char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

// The text after `'key':` in the header dict, with leading spaces skipped.
std::string valueAfterKey(const std::string& header, const std::string& key,
                          const std::string& path) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) throw Error(path + ": .npy header has no '" + key + "'");
  at = header.find(':', at);
  if (at == std::string::npos) throw Error(path + ": malformed .npy header");
  ++at;
  while (at < header.size() && header[at] == ' ') ++at;
  return header.substr(at);
}

ElementType parseDescr(const std::string& header, const std::string& path) {
  std::string value = valueAfterKey(header, "descr", path);
  if (value.empty() || (value[0] != '\'' && value[0] != '"'))
    throw Error(path + ": malformed 'descr' in .npy header");
  size_t end = value.find(value[0], 1);
  if (end == std::string::npos) throw Error(path + ": malformed 'descr' in .npy header");
  std::string descr = value.substr(1, end - 1);
  if (descr == "<f4") return ElementType::F32;
  if (descr == "<f8") return ElementType::F64;
  if (descr == "<i4") return ElementType::I32;
  if (descr == "<i8") return ElementType::I64;
  throw Error(path + ": unsupported .npy dtype '" + descr +
              "' (supported: <f4, <f8, <i4, <i8)");
}

std::vector<int64_t> parseShape(const std::string& header, const std::string& path) {
  std::string value = valueAfterKey(header, "shape", path);
  size_t end = value.find(')');
  if (value.empty() || value[0] != '(' || end == std::string::npos)
    throw Error(path + ": malformed 'shape' in .npy header");
  std::vector<int64_t> shape;
  size_t at = 1;
  while (at < end) {
    while (at < end && (value[at] == ' ' || value[at] == ',')) ++at;
    if (at >= end) break;
    size_t digits = at;
    while (digits < end && value[digits] >= '0' && value[digits] <= '9') ++digits;
    if (digits == at) throw Error(path + ": malformed 'shape' in .npy header");
    // Digits only, so the one way to fail is a dim past int64: saturate and
    // let the reader's size check name it against the file.
    int64_t dim = 0;
    for (size_t k = at; k < digits; ++k)
      dim = dim > (INT64_MAX - 9) / 10 ? INT64_MAX : dim * 10 + (value[k] - '0');
    shape.push_back(dim);
    at = digits;
  }
  return shape;
}

}  // namespace

HostArray readNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open");
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (data.size() < kMagicSize + 4 || std::memcmp(data.data(), kMagic, kMagicSize) != 0)
    throw Error(path + ": not a .npy file");
  const auto major = static_cast<unsigned char>(data[6]);
  size_t headerLength = 0;
  size_t headerStart = 0;
  auto byte = [&](size_t i) { return static_cast<size_t>(static_cast<unsigned char>(data[i])); };
  if (major == 1) {
    headerLength = byte(8) | byte(9) << 8;
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (data.size() < 12) throw Error(path + ": truncated .npy header");
    headerLength = byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24;
    headerStart = 12;
  } else {
    throw Error(path + ": unsupported .npy version " + std::to_string(major));
  }
  if (data.size() < headerStart + headerLength) throw Error(path + ": truncated .npy header");
  const std::string header = data.substr(headerStart, headerLength);

  if (valueAfterKey(header, "fortran_order", path).rfind("False", 0) != 0)
    throw Error(path + ": Fortran-order arrays are not supported (save a C-order array)");
  HostArray array;
  array.type = parseDescr(header, path);
  array.shape = parseShape(header, path);

  // The shape's byte count, checked: its dims come from the file.
  size_t expected = elementSize(array.type);
  for (int64_t dim : array.shape) if (dim == 0) expected = 0;
  for (int64_t dim : array.shape) {
    if (expected == 0) break;
    if (static_cast<uint64_t>(dim) > SIZE_MAX / expected)
      throw Error(path + ": the .npy shape holds more bytes than memory can address");
    expected *= static_cast<size_t>(dim);
  }
  const size_t available = data.size() - headerStart - headerLength;
  if (available != expected)
    throw Error(path + ": expected " + std::to_string(expected) + " data bytes, found " +
                std::to_string(available));
  array.bytes.resize(expected);
  // An empty array's vector may have no storage: memcpy from or to null is
  // undefined even for zero bytes (found by tests/fuzz/fuzz_npy).
  if (expected != 0) std::memcpy(array.bytes.data(), data.data() + headerStart + headerLength, expected);
  return array;
}

void writeNpy(const std::string& path, const HostArray& array) {
  const char* descr = "";
  switch (array.type) {
    case ElementType::F32: descr = "<f4"; break;
    case ElementType::F64: descr = "<f8"; break;
    case ElementType::I32: descr = "<i4"; break;
    case ElementType::I64: descr = "<i8"; break;
  }
  // Python tuple syntax: "()", "(3,)", "(3, 4)".
  std::string shape = "(";
  for (size_t i = 0; i < array.shape.size(); ++i) {
    if (i) shape += ", ";
    shape += std::to_string(array.shape[i]);
  }
  shape += array.shape.size() == 1 ? ",)" : ")";
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad so that magic + version + length + header is a multiple of 64.
  const size_t unpadded = kMagicSize + 2 + 2 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  if (header.size() > 0xFFFF) throw Error(path + ": .npy header too long");

  // AtomicFile: a failed write or close is an error, and a device node
  // given as the path (/dev/null) is written, not replaced.
  AtomicFile out(path);
  out.write(kMagic, kMagicSize);
  const char version[2] = {1, 0};
  out.write(version, 2);
  const char length[2] = {static_cast<char>(header.size() & 0xFF),
                          static_cast<char>(header.size() >> 8)};
  out.write(length, 2);
  out.write(header.data(), header.size());
  out.write(array.bytes.data(), array.bytes.size());
  out.commit();
}

}  // namespace megatrain::runtime
