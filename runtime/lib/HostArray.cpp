// HostArray.cpp - a typed, shaped array in host memory.
#include "megatrain/runtime/HostArray.h"

#include <utility>

namespace megatrain::runtime {

size_t elementSize(ElementType type) {
  switch (type) {
    case ElementType::F32:
    case ElementType::I32:
      return 4;
    case ElementType::F64:
    case ElementType::I64:
      return 8;
  }
  return 0;
}

const char* elementTypeName(ElementType type) {
  switch (type) {
    case ElementType::F32: return "float32";
    case ElementType::F64: return "float64";
    case ElementType::I32: return "int32";
    case ElementType::I64: return "int64";
  }
  return "unknown";
}

HostArray HostArray::zeros(ElementType type, std::vector<int64_t> shape) {
  HostArray array;
  array.type = type;
  array.shape = std::move(shape);
  array.bytes.assign(static_cast<size_t>(array.elements()) * elementSize(type), std::byte{0});
  return array;
}

int64_t HostArray::elements() const {
  int64_t count = 1;
  for (int64_t dim : shape) count *= dim;
  return count;
}

}  // namespace megatrain::runtime
