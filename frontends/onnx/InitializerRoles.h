//===- InitializerRoles.h - which ONNX initializers are parameters ---------===//
//
// Internal to the ONNX importer. The trainable rule of docs/frontends.md:
// an initializer is a parameter (mt.param, trained unless excluded), a
// buffer (a floating initializer that is not a parameter: folded where it
// can be, never trained) or a literal (integers and bools). Exported graphs
// hold parameters under names the exporter made up (val_93 = W^T), so the
// model's own parameter list is not enough: what is read as a weight counts,
// and without the list, so do names like module parameters (*.weight).
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
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <optional>
#include <regex>
#include <string>

namespace megatrain::onnx_import {

/// How an initializer is imported (docs/frontends.md, "Trainable rule").
enum class InitializerRole {
  /// An mt.param: listed in megatrain.parameters, read as a weight (a
  /// folded copy of a parameter), or, when the model lists none, named like
  /// a module parameter.
  Parameter,
  /// Any other floating initializer (rotary_emb.inv_freq, a folded mask, a
  /// scalar the exporter lifted): read at import time when something folds
  /// it, else an mt.constant (small) or a frozen mt.param (large or external).
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
  /// Reads the model's parameter list (metadata megatrain.parameters), if
  /// any, and which names `nodes` read as weights.
  void classify(const onnx::ModelProto &model, llvm::ArrayRef<FlatNode> nodes);
  /// Warns at `fileLoc` about each trainable parameter that several nodes
  /// read as a norm scale or a bias: initializers the exporter's optimizer
  /// merged because they were equal at export time, which train as one.
  void warnMergedInitializers(const onnx::GraphProto &graph,
                              mlir::Location fileLoc) const;

  /// The role of an initializer of the model classify() read.
  InitializerRole roleOf(const onnx::TensorProto &initializer) const;
  /// The tables that Gathers with run-time indices read (embeddings).
  const llvm::StringSet<> &embeddingTables() const { return embeddingTables_; }
  /// Whether parameter `name` trains (--trainable, --frozen).
  bool isTrainable(const std::string &name) const;

private:
  void findWeightOperands(const onnx::GraphProto &graph, llvm::ArrayRef<FlatNode> nodes);

  /// Parameter names from the metadata key megatrain.parameters, if present.
  std::optional<llvm::StringSet<>> listedParameters_;
  /// Names read as weights: matmul and gemm operands, embedding tables
  /// (findWeightOperands).
  llvm::StringSet<> weightOperands_;
  /// Initializers read directly as the table of a run-time Gather.
  llvm::StringSet<> embeddingTables_;
  /// Names read as a norm's scale or bias (LayerNormalization inputs 1 and
  /// 2), or multiplied with or added to a run-time value (a decomposed
  /// norm's scale, a bias added to a matmul's output), with the nodes that
  /// read each. Only per-channel vectors among them are parameters.
  llvm::StringMap<llvm::SmallVector<std::string, 2>> channelOperands_;
  std::optional<std::regex> trainableRe_, frozenRe_;
};

} // namespace megatrain::onnx_import

#endif // MEGATRAIN_FRONTEND_INITIALIZERROLES_H
