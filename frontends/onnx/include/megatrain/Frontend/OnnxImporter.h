//===- OnnxImporter.h - ONNX model to mt dialect --------------------------===//
#ifndef MEGATRAIN_FRONTEND_ONNXIMPORTER_H
#define MEGATRAIN_FRONTEND_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include "llvm/ADT/StringRef.h"

#include <map>
#include <string>
#include <vector>

namespace megatrain {

struct OnnxImportOptions {
  /// Bindings for inputs with symbolic dims: input name -> full static shape
  /// (`--shape input_ids=8x2048`).
  std::map<std::string, std::vector<int64_t>> shapes;
  /// Floating-point initializers are trainable by default (docs/frontends.md);
  /// names matching `frozen` are not; when `trainable` is set, only names
  /// matching it are (frozen wins). Empty means no override. ECMAScript
  /// regex, full match.
  std::string trainable;
  std::string frozen;
};

/// Attributes the importer sets (docs/frontends.md).
namespace onnx_attr {
/// String on the module: the model path as given.
inline constexpr llvm::StringLiteral kSourceModel = "mt.source_model";
/// String on the module: lowercase hex SHA-256 of the model file's bytes.
inline constexpr llvm::StringLiteral kSourceSha256 = "mt.source_sha256";
/// String on each result of @main: the ONNX graph output it returns.
inline constexpr llvm::StringLiteral kOutputName = "mt.output_name";
} // namespace onnx_attr

/// Lowercase hex SHA-256 of `bytes`, as in mt.source_sha256.
std::string sha256Hex(llvm::StringRef bytes);

/// Reads an ONNX model and builds a module holding `func.func @main`: one
/// `mt.input` per graph input, one `mt.param` per initializer used as data,
/// the graph's ops in mt form, and a return of the graph outputs (each result
/// carries `mt.output_name`). Initializer data is not copied into the IR.
/// Errors are reported through the context's diagnostic handler (one line,
/// naming node, op type, domain and opset) and give a null result.
mlir::OwningOpRef<mlir::ModuleOp>
importOnnxModel(mlir::MLIRContext &context, const std::string &path,
                const OnnxImportOptions &options);

} // namespace megatrain

#endif // MEGATRAIN_FRONTEND_ONNXIMPORTER_H
