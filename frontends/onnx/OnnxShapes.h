//===- OnnxShapes.h - ONNX shape rules shared by the importers and folder --===//
//
// Internal to the ONNX importer. An op's result shape is computed here once,
// whether the op importer builds it at run time or the ConstantFolder
// evaluates it at import time, so the two can never disagree on a Reshape
// target, a clamped Slice bound or a Split. Numpy broadcasting is the
// dialect's mt::broadcastShapes: the verifier of every mt op checks against
// it, so both sides use that one rather than a copy.
//
// Each rule returns false with a message that completes "node ...: " and
// never guesses: a shape the spec forbids is an error.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_FRONTEND_SHAPERULES_H
#define MEGATRAIN_FRONTEND_SHAPERULES_H

#include "llvm/ADT/ArrayRef.h"

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace megatrain::onnx_import {

/// "[2x3]" for diagnostics; "[]" for scalars.
std::string shapeStr(llvm::ArrayRef<int64_t> shape);

/// The number of elements of `shape` (1 for a scalar); INT64_MAX when the
/// product overflows (shapes from a file may), so a size limit compared
/// against it still refuses.
int64_t numElements(llvm::ArrayRef<int64_t> shape);

/// The runtime's kernels index at most this many dims.
inline constexpr size_t kMaxRank = 8;
/// Whether a shape read from the file (an initializer's dims, a graph
/// input's, an op's result) is one the compiler can hold: rank at most
/// kMaxRank, no negative dim, and its size in bytes (8 per element, the
/// widest element) within int64. False with `error` saying which.
bool checkShapeLimits(llvm::ArrayRef<int64_t> shape, std::string &error);
/// Row-major strides of `shape`, in elements.
std::vector<int64_t> stridesOf(llvm::ArrayRef<int64_t> shape);

/// `axis` of a rank-`rank` operand moved into [0, rank); false when it is
/// outside [-rank, rank) (so every axis of a scalar is).
bool normalizeAxis(int64_t &axis, int64_t rank, std::string &error);

/// ONNX Reshape: 0 copies the input dim (unless allowzero), one -1 is inferred.
bool reshapeTarget(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> target,
                   bool allowZero, std::vector<int64_t> &out, std::string &error);

/// Unsqueeze: inserts size-1 dims at `axes` (of the output rank).
bool unsqueezeShape(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> axes,
                    std::vector<int64_t> &out, std::string &error);
/// Squeeze: drops `axes` (each of size 1), or every size-1 dim when empty.
bool squeezeShape(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> axes,
                  std::vector<int64_t> &out, std::string &error);
/// Flatten: [dims before axis, dims from axis] multiplied out; axis may be
/// the rank itself (everything in the first dim).
bool flattenShape(llvm::ArrayRef<int64_t> in, int64_t axis, std::vector<int64_t> &out,
                  std::string &error);

/// Transpose's permutation: `given`, or the dims reversed when absent; false
/// when it does not permute the `rank` dims.
bool transposePerm(int64_t rank, std::optional<std::vector<int64_t>> given,
                   std::vector<int64_t> &perm, std::string &error);
/// `shape` with its dims in the order `perm` lists them.
std::vector<int64_t> permuteShape(llvm::ArrayRef<int64_t> shape,
                                  llvm::ArrayRef<int64_t> perm);

/// Whether Concat may join `shape` to `first` along `axis`: one rank, every
/// other dim equal.
bool concatCompatible(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> first,
                      int64_t axis);

/// Gather along a normalized `axis`: data's dims with dim `axis` replaced by
/// the indices' dims.
std::vector<int64_t> gatherShape(llvm::ArrayRef<int64_t> data,
                                 llvm::ArrayRef<int64_t> indices, int64_t axis);

/// One dim of a normalized Slice: elements start, start+step, ... (count of
/// them); step may be negative.
struct SliceDim {
  int64_t start = 0, step = 1, count = 0;
};
/// ONNX Slice bounds (starts, ends, optional axes and steps) normalized per
/// dim of `shape`, clamped as the spec says.
bool sliceDims(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> starts,
               llvm::ArrayRef<int64_t> ends, std::optional<std::vector<int64_t>> axes,
               std::optional<std::vector<int64_t>> steps, std::vector<SliceDim> &out,
               std::string &error);

/// Split sizes along a dim of size `dim`: the given sizes (which must sum to
/// it), or `parts` equal chunks of ceil(dim / parts) with a smaller last one.
bool splitSizes(int64_t dim, std::optional<std::vector<int64_t>> sizes, int64_t parts,
                std::vector<int64_t> &out, std::string &error);
/// The slice of `shape` that each piece of a split along a normalized `axis`
/// into `sizes` covers, in order.
std::vector<std::vector<SliceDim>>
splitSlices(llvm::ArrayRef<int64_t> shape, int64_t axis, llvm::ArrayRef<int64_t> sizes);

/// Whether Trilu keeps the entry at (row, col) of each matrix: on or above
/// diagonal `k` when `upper`, on or below it otherwise.
inline bool triluKeeps(int64_t row, int64_t col, int64_t k, bool upper) {
  return upper ? col - row >= k : col - row <= k;
}

/// Walks the elements of `outShape` in order, tracking for each input shape
/// the offset of the element it reads under numpy broadcasting (no index
/// arrays: a [B, 1, T, T] mask is folded in place).
class BroadcastWalk {
public:
  BroadcastWalk(llvm::ArrayRef<int64_t> outShape,
                std::initializer_list<llvm::ArrayRef<int64_t>> inShapes);
  int64_t offset(size_t input) const { return offsets_[input]; }
  void next();

private:
  std::vector<int64_t> shape_, counter_, offsets_;
  std::vector<std::vector<int64_t>> strides_;
};

} // namespace megatrain::onnx_import

#endif // MEGATRAIN_FRONTEND_SHAPERULES_H
