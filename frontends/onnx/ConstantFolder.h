//===- ConstantFolder.h - evaluates ONNX nodes on values known at import ---===//
//
// Internal to the ONNX importer. Exported LLM graphs compute their causal
// masks, position ids and rotary tables from shapes, constants and buffers
// (rotary_emb.inv_freq); none of that depends on the data fed at run time.
// The importer evaluates such nodes here, on int64/float/double/bool data,
// so the training graph holds only compute on activations and parameters.
// The shape arithmetic that the op importers share with the folder (Reshape
// targets, Slice bounds, broadcasting) lives here too, so both agree.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_FRONTEND_CONSTANTFOLDER_H
#define MEGATRAIN_FRONTEND_CONSTANTFOLDER_H

#include "mlir/IR/BuiltinAttributes.h"
#include "onnx/onnx.pb.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

namespace megatrain::onnx_import {

/// Element types the folder computes in. INT32 is widened to I64, as
/// everywhere in the importer.
enum class ConstKind { F32, F64, I64, Bool };

/// A value known at import time.
struct ConstTensor {
  ConstKind kind = ConstKind::F32;
  std::vector<int64_t> shape;
  /// F32 and F64 elements (F32 ones are always exactly representable as float).
  std::vector<double> f;
  /// I64 and Bool (0 or 1) elements.
  std::vector<int64_t> i;

  bool isFloat() const { return kind == ConstKind::F32 || kind == ConstKind::F64; }
  int64_t elements() const;
  /// Bytes as an mt.constant holds it (f32 4, f64 8, i64 8, i1 1 per element).
  int64_t bytes() const;
  /// Element k as a double / as an integer.
  double real(int64_t k) const { return isFloat() ? f[k] : (double)i[k]; }
  int64_t integer(int64_t k) const { return isFloat() ? (int64_t)f[k] : i[k]; }
};

/// Folded values larger than this are refused (elements, not bytes): import
/// time and memory stay bounded whatever the graph computes.
inline constexpr int64_t kMaxFoldElements = int64_t(1) << 26;

/// FLOAT, DOUBLE, INT64, INT32 and BOOL; nullopt for anything else.
std::optional<ConstKind> constKindOf(int32_t onnxDtype);
/// "f32", "f64", "i64", "bool".
const char *kindName(ConstKind kind);
/// The mt element type: f32, f64, i64, i1.
mlir::Type mlirTypeOf(mlir::MLIRContext &context, ConstKind kind);
/// The kind of an mt element type; nullopt for anything else.
std::optional<ConstKind> constKindOf(mlir::Type element);

/// Reads an inline TensorProto; false with `error` otherwise (external data,
/// unsupported dtype, malformed).
bool readConstTensor(const onnx::TensorProto &tensor, ConstTensor &out,
                     std::string &error);

/// The value as a dense attribute of mlirTypeOf(kind).
mlir::DenseElementsAttr toAttr(mlir::MLIRContext &context, const ConstTensor &value);

/// `value` with every dim along which it merely repeats itself reduced to 1:
/// broadcasting the result back to value.shape gives value. Returns false
/// when no dim repeats.
bool dropRepeatedDims(const ConstTensor &value, ConstTensor &reduced);

//===----------------------------------------------------------------------===//
// Shape arithmetic shared with the op importers
//===----------------------------------------------------------------------===//

/// numpy broadcast of two shapes; false when they do not broadcast.
bool broadcastShape(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b,
                    std::vector<int64_t> &out);

/// ONNX Reshape: 0 copies the input dim (unless allowzero), one -1 is inferred.
bool reshapeTarget(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> target,
                   bool allowZero, std::vector<int64_t> &out, std::string &error);

/// Unsqueeze: inserts size-1 dims at `axes` (of the output rank).
bool unsqueezeShape(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> axes,
                    std::vector<int64_t> &out, std::string &error);
/// Squeeze: drops `axes` (each of size 1), or every size-1 dim when empty.
bool squeezeShape(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> axes,
                  std::vector<int64_t> &out, std::string &error);

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

/// The elements of `value` that `dims` select (a strided view), as a tensor.
ConstTensor sliceConst(const ConstTensor &value, const std::vector<SliceDim> &dims);

/// Split sizes along a dim of size `dim`: the given sizes (which must sum to
/// it), or `parts` equal chunks of ceil(dim / parts) with a smaller last one.
bool splitSizes(int64_t dim, std::optional<std::vector<int64_t>> sizes, int64_t parts,
                std::vector<int64_t> &out, std::string &error);

//===----------------------------------------------------------------------===//
// Folding
//===----------------------------------------------------------------------===//

/// What the folder knows of one node input.
struct FoldInput {
  bool present = false;
  /// Null when only the input's type is known (a run-time value).
  const ConstTensor *value = nullptr;
  std::vector<int64_t> shape;
  std::optional<ConstKind> kind;
};

/// Whether the folder evaluates `opType` (default domain).
bool canFold(llvm::StringRef opType);
/// Whether input `i` of `opType` is read only for its type (Shape's input,
/// CastLike's target): such an input need not be known for the node to fold.
bool foldReadsTypeOnly(llvm::StringRef opType, int i);

/// Evaluates `node` (whose inputs the folder has, per foldReadsTypeOnly) into
/// one ConstTensor per output; false with `error` saying why not.
bool foldNode(const onnx::NodeProto &node, int64_t opset,
              llvm::ArrayRef<FoldInput> inputs, std::vector<ConstTensor> &outputs,
              std::string &error);

} // namespace megatrain::onnx_import

#endif // MEGATRAIN_FRONTEND_CONSTANTFOLDER_H
