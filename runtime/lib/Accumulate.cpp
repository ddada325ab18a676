// Accumulate.cpp - the host ACCUMULATE task: acc += addend, element by element.
#include "megatrain/runtime/Accumulate.h"

#include "megatrain/runtime/DType.h"
#include "megatrain/runtime/Error.h"

namespace megatrain::runtime {

namespace {

template <typename T>
void addInto(T* acc, const T* addend, size_t count) {
  for (size_t i = 0; i < count; ++i) acc[i] = static_cast<T>(acc[i] + addend[i]);
}

}  // namespace

void accumulate(plan::DType dtype, void* acc, const void* addend, size_t count) {
  switch (dtype) {
    case plan::F32:
      addInto(static_cast<float*>(acc), static_cast<const float*>(addend), count);
      return;
    case plan::F64:
      addInto(static_cast<double*>(acc), static_cast<const double*>(addend), count);
      return;
    default:
      throw Error(std::string("ACCUMULATE supports f32 and f64, not ") + dtypeName(dtype));
  }
}

}  // namespace megatrain::runtime
