//===- GraphImporter.h - walks an ONNX graph and builds mt ops --------------===//
//
// Internal to the ONNX importer. GraphImporter owns the name -> value table
// of one graph; NodeImport is what an op importer (MathOps.cpp, ShapeOps.cpp,
// NormLossOps.cpp) sees of one node: its operands, attributes and results.
//
// Names bound to initializers and Constant nodes stay lazy until an op reads
// them as data: an initializer read only as a Reshape shape or Reduce axes
// is folded at import time and never becomes an mt.param.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_FRONTEND_GRAPHIMPORTER_H
#define MEGATRAIN_FRONTEND_GRAPHIMPORTER_H

#include "megatrain/Frontend/OnnxImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "onnx/onnx.pb.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <deque>
#include <optional>
#include <regex>

namespace megatrain::onnx_import {

/// What a name of the graph stands for.
struct GraphValue {
  /// Set once the value exists in the IR.
  mlir::Value value;
  /// The initializer or Constant-node tensor behind the name, if any (its
  /// data can be read at import time). Owned by the ModelProto or by
  /// GraphImporter::synthesized.
  const onnx::TensorProto *tensor = nullptr;
  /// True for initializers (mt.param when floating point), false for
  /// Constant nodes (always mt.constant).
  bool isInitializer = false;
};

class GraphImporter;

/// One node being imported.
class NodeImport {
public:
  NodeImport(GraphImporter &graph, const onnx::NodeProto &node, int index, int64_t opset,
             mlir::Location loc);

  const onnx::NodeProto &node() const { return node_; }
  int64_t opset() const { return opset_; }
  mlir::Location loc() const { return loc_; }
  mlir::OpBuilder &builder();
  mlir::MLIRContext *context();

  /// An error about this node: "node 'n' (op T, domain 'd', opset N): ...".
  mlir::InFlightDiagnostic error();

  /// Whether optional input `i` is given (present and non-empty).
  bool hasInput(int i) const;
  /// Input `i` as a tensor value (materializing initializers/constants).
  mlir::FailureOr<mlir::Value> operand(int i);
  /// Input `i` read at import time as integers (Reshape shape, Reduce axes);
  /// it must be an initializer or a Constant node.
  mlir::FailureOr<std::vector<int64_t>> constantIntegers(int i);

  /// Whether output `i` exists and something reads it.
  bool outputUsed(int i) const;
  /// Binds output `i` to `value` (no-op when the output is absent).
  void setResult(int i, mlir::Value value);
  /// Binds output `i` to whatever input `j` is (Identity, no-op reshapes).
  void aliasResult(int i, int j);

  const onnx::AttributeProto *attribute(llvm::StringRef name) const;
  int64_t intAttr(llvm::StringRef name, int64_t fallback) const;
  double floatAttr(llvm::StringRef name, double fallback) const;
  std::string stringAttr(llvm::StringRef name, llvm::StringRef fallback) const;
  std::optional<std::vector<int64_t>> intsAttr(llvm::StringRef name) const;

private:
  GraphImporter &graph_;
  const onnx::NodeProto &node_;
  int index_;
  int64_t opset_;
  mlir::Location loc_;
};

using OpImportFn = mlir::LogicalResult (*)(NodeImport &);

/// Registers the op importers of each group (one function per source file).
void registerMathOps(llvm::StringMap<OpImportFn> &table);
void registerShapeOps(llvm::StringMap<OpImportFn> &table);
void registerNormLossOps(llvm::StringMap<OpImportFn> &table);

class GraphImporter {
public:
  GraphImporter(mlir::MLIRContext &context, const onnx::ModelProto &model,
                const std::string &path, const OnnxImportOptions &options);

  /// Builds the module; null after an error has been emitted.
  mlir::OwningOpRef<mlir::ModuleOp> run(llvm::StringRef sha256);

  /// The location of the model file, for model-level errors.
  mlir::Location fileLoc() const { return fileLoc_; }

private:
  friend class NodeImport;

  mlir::LogicalResult readOpsets();
  mlir::LogicalResult compileRegexes();
  mlir::LogicalResult importInputs();
  mlir::LogicalResult importNodes();
  mlir::LogicalResult importConstantNode(NodeImport &node);
  mlir::LogicalResult importOutputs(mlir::func::FuncOp func);
  bool isTrainable(const std::string &name) const;

  /// The IR value of `name`, creating its mt.param/mt.constant on first use.
  /// On failure `problem` says why, for the caller to report.
  mlir::FailureOr<mlir::Value> materialize(const std::string &name, std::string &problem);

  mlir::MLIRContext &context_;
  const onnx::ModelProto &model_;
  const onnx::GraphProto &graph_;
  std::string path_;
  const OnnxImportOptions &options_;
  mlir::Location fileLoc_;
  mlir::OpBuilder builder_;
  /// Where the next mt.param/mt.constant goes: after the inputs and earlier
  /// sources, so every source sits at the top of @main.
  mlir::OpBuilder sourceBuilder_;

  llvm::StringMap<int64_t> opsets_;
  llvm::StringMap<GraphValue> values_;
  /// The IR value of each initializer/constant tensor already materialized.
  llvm::DenseMap<const onnx::TensorProto *, mlir::Value> materialized_;
  /// The last source op (mt.input/param/constant) at the top of @main.
  mlir::Operation *lastSource_ = nullptr;
  /// Names that some node reads or that the graph outputs.
  llvm::StringSet<> used_;
  /// Tensors made from Constant attributes such as value_float.
  std::deque<onnx::TensorProto> synthesized_;
  std::optional<std::regex> trainableRe_, frozenRe_;
  llvm::StringMap<OpImportFn> importers_;
};

/// The shape of a ranked tensor value.
llvm::ArrayRef<int64_t> shapeOf(mlir::Value v);
/// The element type of a ranked tensor value.
mlir::Type elementOf(mlir::Value v);
/// "[2x3]" for diagnostics; "[]" for scalars.
std::string shapeStr(llvm::ArrayRef<int64_t> shape);

} // namespace megatrain::onnx_import

#endif // MEGATRAIN_FRONTEND_GRAPHIMPORTER_H
