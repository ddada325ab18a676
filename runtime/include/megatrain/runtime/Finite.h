// Finite.h - finds the first NaN or infinity in a tensor's bytes, for the checks on loaded and saved weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "megatrain/plan/plan.pb.h"

namespace megatrain::runtime {

// The flat index of the first element of `count` elements of `dtype` at
// `bytes` that is NaN or infinite; -1 if every one is finite or the dtype
// is not floating (integers and bools are always finite).
int64_t firstNonFinite(const void* bytes, size_t count, plan::DType dtype);

// "nan" or "inf" or "-inf": the value at `index`, as a message names it.
std::string nonFiniteValueName(const void* bytes, int64_t index, plan::DType dtype);

}  // namespace megatrain::runtime
