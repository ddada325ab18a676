// HostArray.h - a typed, shaped array in host memory (what .npy files hold).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace megatrain::runtime {

// The element types the runtime exchanges with users and tests.
enum class ElementType { F32, F64, I32, I64 };

size_t elementSize(ElementType type);

// "float32", "float64", "int32", "int64".
const char* elementTypeName(ElementType type);

// A row-major array: `bytes` holds elements() * elementSize(type) bytes.
struct HostArray {
  ElementType type = ElementType::F32;
  std::vector<int64_t> shape;  // empty for a scalar
  std::vector<std::byte> bytes;

  // A zero-filled array of the given type and shape.
  static HostArray zeros(ElementType type, std::vector<int64_t> shape);

  int64_t elements() const;

  template <typename T>
  T* data() { return reinterpret_cast<T*>(bytes.data()); }
  template <typename T>
  const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }
};

}  // namespace megatrain::runtime
