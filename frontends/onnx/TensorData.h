//===- TensorData.h - reading ONNX TensorProto dtypes, dims and values -----===//
//
// Internal to the ONNX importer. Parameters never have their data read; only
// values known at import time are (ConstantFolder.h reads those).
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

/// The ONNX name of a TensorProto.DataType value ("FLOAT", "INT32", ...).
std::string dtypeName(int32_t dtype);

/// The mt element type of a dtype as the importer keeps it: FLOAT, FLOAT16
/// and BFLOAT16 -> f32 (16-bit weights train from fp32 masters), DOUBLE -> f64, INT64 and INT32 -> i64 (int32 constants are widened). Null
/// for anything else.
mlir::Type elementTypeOf(mlir::MLIRContext &context, int32_t dtype);

/// True for FLOAT, DOUBLE, FLOAT16 and BFLOAT16.
bool isFloatDtype(int32_t dtype);
/// True for FLOAT16 and BFLOAT16, which the importer widens to f32.
bool isHalfDtype(int32_t dtype);
/// The value of one FLOAT16 or BFLOAT16 element given as its bits (exact).
float halfBitsToFloat(int32_t dtype, uint16_t bits);
/// True for INT64 and INT32.
bool isIntegerDtype(int32_t dtype);

/// The tensor's dims.
std::vector<int64_t> dimsOf(const onnx::TensorProto &tensor);

/// The integer values of an INT64 or INT32 tensor, or an error text.
bool readIntegers(const onnx::TensorProto &tensor, std::vector<int64_t> &out,
                  std::string &error);

/// The values of a FLOAT, DOUBLE, FLOAT16 or BFLOAT16 tensor, or an error text.
bool readReals(const onnx::TensorProto &tensor, std::vector<double> &out,
               std::string &error);

} // namespace megatrain::onnx_import

#endif // MEGATRAIN_FRONTEND_TENSORDATA_H
