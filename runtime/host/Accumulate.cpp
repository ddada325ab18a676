// Accumulate.cpp - the host ACCUMULATE task: acc += addend, element by element.
//
// Each element's sum is independent of every other, so large tensors are split into
// contiguous chunks over the host thread pool (HostThreads.h): the bits do not depend on
// the split. A 65M-element gradient (a 32000 x 2048 embedding) takes one pass over 768 MB.
#include "megatrain/runtime/Accumulate.h"

#include <algorithm>

#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/HostThreads.h"

namespace megatrain::runtime {

namespace {

// Below this many elements one thread does it all (the pool's hand-off costs more).
constexpr size_t kParallelMin = size_t(64) << 10;

template <typename T>
void addRange(T* acc, const T* addend, size_t count) {
  for (size_t i = 0; i < count; ++i) acc[i] = static_cast<T>(acc[i] + addend[i]);
}

template <typename T>
void addInto(T* acc, const T* addend, size_t count) {
  const unsigned chunks =
      count < kParallelMin ? 1u : static_cast<unsigned>(std::min<size_t>(hostThreadCount(), count / (kParallelMin / 2)));
  if (chunks <= 1) return addRange(acc, addend, count);
  hostParallelRanges(count, chunks, [&](size_t begin, size_t end) {
    addRange(acc + begin, addend + begin, end - begin);
  });
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
