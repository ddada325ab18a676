// ColumnSums.cuh - rows of a normalization and the grid of its per-column weight sums.
//
// layer_norm.cu and rms_norm.cu normalize [rows, d] row by row, and their
// gradients sum over rows per column (dgamma, dbeta, dweight). Those sums run
// in blocks of kColumns columns x kColumnLanes row walkers, split over rows
// into `splits` partial sums when the columns alone cannot fill the device.
#pragma once

#include <algorithm>
#include <cstdint>

#include "DeviceMath.cuh"

namespace megatrain::runtime::cuda {

constexpr int kColumns = 32;                       // columns per block of the column sums
constexpr int kColumnLanes = kThreads / kColumns;  // rows walked at once per column

// The column-sum grid of a normalization gradient.
struct ColumnSplit {
  unsigned blocks, splits;
  int64_t chunk;  // rows per split
};

inline ColumnSplit planColumns(const Launch& launch, const NormRows& r) {
  ColumnSplit c;
  c.blocks = static_cast<unsigned>(std::max<int64_t>(1, (r.d + kColumns - 1) / kColumns));
  const int64_t target = static_cast<int64_t>(launch.device->smCount) * 8;
  int64_t splits = 1;
  if (static_cast<int64_t>(c.blocks) * 2 < target) {
    const int64_t byWork = (r.rows + kColumnLanes * 16 - 1) / (kColumnLanes * 16);
    splits = std::max<int64_t>(1, std::min<int64_t>({(target + c.blocks - 1) / c.blocks, byWork, 65535}));
  }
  c.chunk = std::max<int64_t>(1, (r.rows + splits - 1) / splits);
  c.splits = static_cast<unsigned>(std::max<int64_t>(1, (r.rows + c.chunk - 1) / c.chunk));
  return c;
}

}  // namespace megatrain::runtime::cuda
