//===- InitializerRoles.h - which ONNX initializers are parameters ---------===//
//
// Internal to the ONNX importer. The trainable rule of docs/frontends.md:
// an initializer is a parameter (mt.param, trained unless excluded), a
// buffer (a floating initializer the model does not list: folded where it
// can be, never trained) or a literal (integers and bools). Exported graphs
// hold parameters under names the exporter made up (val_93 = W^T), so the
// model's own parameter list is not enough: what is read as a weight counts.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_FRONTEND_INITIALIZERROLES_H
#define MEGATRAIN_FRONTEND_INITIALIZERROLES_H

#include "FunctionInliner.h"
#include "megatrain/Frontend/OnnxImporter.h"

#include "mlir/IR/Location.h"
#include "mlir/Support/LogicalResult.h"
#include "onnx/onnx.pb.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringSet.h"

#include <optional>
#include <regex>
#include <string>

namespace megatrain::onnx_import {

/// How an initializer is imported (docs/frontends.md, "Trainable rule").
enum class InitializerRole {
  /// An mt.param: listed in megatrain.parameters, a folded copy of one, or
  /// any floating initializer when the model lists none.
  Parameter,
  /// A floating initializer the model does not list (rotary_emb.inv_freq, a
  /// folded mask): read at import time when something folds it, else an
  /// mt.constant (small) or a frozen mt.param (large or external).
  Buffer,
  /// An integer or bool initializer: always a value known at import time.
  Literal,
};

/// The trainable rule for one model and one set of import options.
class InitializerRoles {
public:
  /// Compiles OnnxImportOptions::trainable and frozen; a bad regex is an
  /// error at `fileLoc`.
  mlir::LogicalResult compileRegexes(const OnnxImportOptions &options,
                                     mlir::Location fileLoc);
  /// Reads the model's parameter list (metadata megatrain.parameters) and,
  /// when it has one, which names `nodes` read as weights.
  void classify(const onnx::ModelProto &model, llvm::ArrayRef<FlatNode> nodes);

  /// The role of an initializer of the model classify() read.
  InitializerRole roleOf(const onnx::TensorProto &initializer) const;
  /// Whether parameter `name` trains (--trainable, --frozen).
  bool isTrainable(const std::string &name) const;

private:
  void findWeightOperands(const onnx::GraphProto &graph, llvm::ArrayRef<FlatNode> nodes);

  /// Parameter names from the metadata key megatrain.parameters, if present.
  std::optional<llvm::StringSet<>> listedParameters_;
  /// Names read as weights (findWeightOperands).
  llvm::StringSet<> weightOperands_;
  std::optional<std::regex> trainableRe_, frozenRe_;
};

} // namespace megatrain::onnx_import

#endif // MEGATRAIN_FRONTEND_INITIALIZERROLES_H
