// Npy.h - reads and writes NumPy .npy files (v1/v2, little-endian, C order).
#pragma once

#include <string>

#include "megatrain/runtime/HostArray.h"

namespace megatrain::runtime {

// Reads an array of dtype <f4, <f8, <i4 or <i8; anything else (Fortran order,
// big-endian, other dtypes, a truncated file) is an Error naming the file.
HostArray readNpy(const std::string& path);

// Writes a version 1.0 .npy file.
void writeNpy(const std::string& path, const HostArray& array);

}  // namespace megatrain::runtime
