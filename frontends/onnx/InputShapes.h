//===- InputShapes.h - static shapes of ONNX graph inputs (--shape) --------===//
//
// Internal to the ONNX importer. Every shape in the IR is static, but exports
// declare their inputs with symbolic dims ([batch, seq]); the user binds them
// with OnnxImportOptions::shapes (megatrain-compile --shape). A binding
// names an input's full shape and also binds the dim symbols it covers for
// every other input, so one --shape usually suffices. When a shape is still
// missing, the error spells out the --shape to give.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_FRONTEND_INPUTSHAPES_H
#define MEGATRAIN_FRONTEND_INPUTSHAPES_H

#include "mlir/IR/Location.h"
#include "mlir/IR/Types.h"
#include "mlir/Support/LogicalResult.h"
#include "onnx/onnx.pb.h"

#include <map>
#include <string>
#include <vector>

namespace megatrain::onnx_import {

/// A graph input as its mt.input declares it.
struct BoundInput {
  std::string name;
  /// f32, f64 or i64.
  mlir::Type element;
  /// Static, every dim positive.
  std::vector<int64_t> shape;
};

/// The graph inputs that are not initializers, in graph order, with their
/// static shapes: as declared where static, else from `shapes` (input name
/// -> full shape) and the dim symbols those bind. An error at `fileLoc` for
/// an unsupported dtype, a binding that names no input or disagrees with
/// the declaration or with another binding, and a shape left unknown.
mlir::LogicalResult
bindInputShapes(mlir::MLIRContext &context, const onnx::GraphProto &graph,
                const std::map<std::string, std::vector<int64_t>> &shapes,
                mlir::Location fileLoc, std::vector<BoundInput> &inputs);

} // namespace megatrain::onnx_import

#endif // MEGATRAIN_FRONTEND_INPUTSHAPES_H
