//===- TensorData.h - reading ONNX TensorProto dtypes, dims and values -----===//
//
// Internal to the ONNX importer. Parameters never have their data read; only
// constants (Constant nodes, integer initializers used as data) and shape/axes
// arguments are, and those are small.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_FRONTEND_TENSORDATA_H
#define MEGATRAIN_FRONTEND_TENSORDATA_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "onnx/onnx.pb.h"

#include <string>
#include <vector>

namespace megatrain::onnx_import {

/// Constants larger than this many bytes are not kept as literals (docs/ops.md).
inline constexpr int64_t kMaxConstantBytes = 64 * 1024;

/// The ONNX name of a TensorProto.DataType value ("FLOAT", "INT32", ...).
std::string dtypeName(int32_t dtype);

/// The mt element type of a dtype as the importer keeps it: FLOAT -> f32,
/// DOUBLE -> f64, INT64 and INT32 -> i64 (int32 constants are widened). Null
/// for anything else.
mlir::Type elementTypeOf(mlir::MLIRContext &context, int32_t dtype);

/// True for FLOAT and DOUBLE.
bool isFloatDtype(int32_t dtype);
/// True for INT64 and INT32.
bool isIntegerDtype(int32_t dtype);

/// The tensor's dims.
std::vector<int64_t> dimsOf(const onnx::TensorProto &tensor);

/// The integer values of an INT64 or INT32 tensor, or an error text.
bool readIntegers(const onnx::TensorProto &tensor, std::vector<int64_t> &out,
                  std::string &error);

/// The value of a FLOAT, DOUBLE, INT64 or INT32 tensor as a dense attribute
/// of `elementTypeOf` (int32 widened to i64), or an error text. Refuses
/// external data and anything over kMaxConstantBytes.
mlir::DenseElementsAttr readDense(mlir::MLIRContext &context,
                                  const onnx::TensorProto &tensor, std::string &error);

} // namespace megatrain::onnx_import

#endif // MEGATRAIN_FRONTEND_TENSORDATA_H
