//===- ConstTensor.h - values known at import time -------------------------===//
//
// Internal to the ONNX importer. A ConstTensor is what the ConstantFolder
// computes with and what the importer materializes as an mt.constant:
// int64, f32, f64 or bool elements held as int64 or double, so one fold
// serves every element type. f32 elements are kept exactly representable as
// float (roundTo after every op), as an f32 evaluation would hold them.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_FRONTEND_CONSTTENSOR_H
#define MEGATRAIN_FRONTEND_CONSTTENSOR_H

#include "OnnxShapes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "onnx/onnx.pb.h"

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

  /// A tensor of `kind` and `shape`, every element 0.
  static ConstTensor zeros(ConstKind kind, std::vector<int64_t> shape);

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

/// `x` as an element of `kind` holds it: rounded to float for F32.
inline double roundTo(ConstKind kind, double x) {
  return kind == ConstKind::F32 ? (double)(float)x : x;
}
/// A float truncated to int64; NaN becomes 0 and values beyond the int64
/// range saturate, where a plain C++ cast would be undefined.
int64_t floatToInt(double x);

/// Element `from` of `src` copied to element `to` of `dst` (same kind).
inline void copyElement(const ConstTensor &src, int64_t from, ConstTensor &dst,
                        int64_t to) {
  if (src.isFloat())
    dst.f[to] = src.f[from];
  else
    dst.i[to] = src.i[from];
}

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

/// The elements of `value` that `dims` select (a strided view), as a tensor.
ConstTensor sliceConst(const ConstTensor &value, const std::vector<SliceDim> &dims);

} // namespace megatrain::onnx_import

#endif // MEGATRAIN_FRONTEND_CONSTTENSOR_H
