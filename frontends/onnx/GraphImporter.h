//===- GraphImporter.h - walks an ONNX graph and builds mt ops --------------===//
//
// Internal to the ONNX importer. GraphImporter owns the name -> value table
// of one graph; NodeImport is what an op importer (MathOps.cpp, ShapeOps.cpp,
// NormLossOps.cpp) sees of one node: its operands, attributes and results.
//
// A name stands for a run-time value (in the IR), a parameter (an mt.param
// made on first use), a value known at import time (a Constant node, an
// integer initializer, a buffer, or something the ConstantFolder computed
// from those and from shapes), or a sequence of values (SplitToSequence).
// Known values stay out of the IR until an op reads them as data: a mask
// built from Shape, Range and Where becomes one mt.constant, and position
// ids read only as Gather indices of a folded table leave nothing behind.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_FRONTEND_GRAPHIMPORTER_H
#define MEGATRAIN_FRONTEND_GRAPHIMPORTER_H

#include "ConstantFolder.h"
#include "FunctionInliner.h"
#include "InitializerRoles.h"
#include "TiedCopies.h"
#include "OnnxShapes.h"
#include "megatrain/Frontend/OnnxImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "onnx/onnx.pb.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <deque>
#include <memory>
#include <optional>

namespace megatrain::onnx_import {

/// What a name of the graph stands for.
struct GraphValue {
  /// Set once the value exists in the IR.
  mlir::Value value;
  /// The initializer or Constant-node tensor behind the name, if any. Owned
  /// by the ModelProto or by GraphImporter::synthesized_.
  const onnx::TensorProto *tensor = nullptr;
  /// For initializers: how it is imported. Constant nodes are Literals.
  InitializerRole role = InitializerRole::Literal;
  /// A value the ConstantFolder computed (tensor is then null).
  std::shared_ptr<const ConstTensor> folded;
  /// The elements of a sequence value (SplitToSequence, SequenceConstruct).
  std::shared_ptr<const std::vector<GraphValue>> sequence;
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
  /// Input `i` for a message: "input 1 ('name')", or "input 1 (not given)"
  /// when the node has no such input or leaves it empty.
  std::string inputLabel(int i) const;
  /// Input `i` as a tensor value (materializing parameters and constants).
  mlir::FailureOr<mlir::Value> operand(int i);
  /// Input `i`'s value if it is known at import time, else null.
  const ConstTensor *constant(int i);
  /// Input `i` read at import time as integers (Reshape shape, Reduce axes,
  /// Slice bounds); it must be known at import time.
  mlir::FailureOr<std::vector<int64_t>> constantIntegers(int i);
  /// Input `i` read at import time as one number (Pow's exponent).
  mlir::FailureOr<double> constantScalar(int i);
  /// The shape and element kind of input `i` without materializing it.
  mlir::LogicalResult inputType(int i, std::vector<int64_t> &shape,
                                std::optional<ConstKind> &kind);
  /// An mt.constant holding `value`, which the importer computed (limits,
  /// sharing and broadcasting as for folded values); `name` names it.
  mlir::FailureOr<mlir::Value> computedConstant(const ConstTensor &value,
                                                const std::string &name);
  /// Before computing a value of `value`'s kind and shape (no data yet): an
  /// error, with computedConstant's message, when it would pass the limit on
  /// folded values, so that nothing that size is ever built.
  mlir::LogicalResult checkComputedSize(const ConstTensor &value, const std::string &name);
  /// The elements of sequence input `i`.
  mlir::FailureOr<std::vector<GraphValue>> sequence(int i);
  /// `axis` of a rank-`rank` operand in [0, rank); an error when out of range.
  mlir::FailureOr<int64_t> normalizedAxis(int64_t axis, int64_t rank);

  /// Whether output `i` exists and something reads it.
  bool outputUsed(int i) const;
  /// Binds output `i` to `value` (no-op when the output is absent).
  void setResult(int i, mlir::Value value);
  /// Binds output `i` to a value known at import time.
  void setFolded(int i, ConstTensor value);
  /// Binds output `i` to a sequence.
  void setSequence(int i, std::vector<GraphValue> elements);
  /// Binds output `i` to what another name stands for (SequenceAt).
  void bindResult(int i, GraphValue value);
  /// What input `i` stands for (SequenceConstruct).
  mlir::FailureOr<GraphValue> input(int i);
  /// Binds output `i` to whatever input `j` is (Identity, no-op reshapes);
  /// an error when the node lacks input `j`.
  [[nodiscard]] mlir::LogicalResult aliasResult(int i, int j);

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
void registerAttentionOps(llvm::StringMap<OpImportFn> &table);

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
  void classifyInitializers();
  mlir::LogicalResult importInputs();
  mlir::LogicalResult importNodes();
  mlir::LogicalResult importConstantNode(NodeImport &node);
  /// Folds the node when every input it reads is known; sets `folded`.
  mlir::LogicalResult tryFold(NodeImport &node, bool &folded);
  mlir::LogicalResult unsupported(NodeImport &node);
  mlir::LogicalResult checkResultShapes(NodeImport &node);
  void releaseDeadValues(const onnx::NodeProto &node);
  mlir::LogicalResult importOutputs(mlir::func::FuncOp func);

  /// The value of `entry` if it is known at import time, else null (and
  /// `problem` says why when reading it failed).
  const ConstTensor *constantOf(const GraphValue &entry, std::string &problem);
  /// The IR value of `name`, creating its mt.param/mt.constant on first use.
  /// On failure `problem` says why, for the caller to report.
  mlir::FailureOr<mlir::Value> materialize(const std::string &name, std::string &problem);
  mlir::FailureOr<mlir::Value> materializeConstant(const ConstTensor &value,
                                                   const std::string &name, bool folded,
                                                   std::string &problem);
  mlir::OpBuilder &sourceBuilder();

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
  std::vector<FlatNode> nodes_;
  llvm::StringMap<GraphValue> values_;
  /// Each initializer's role, and which parameters train.
  InitializerRoles roles_;
  /// Initializers that hold the transpose of a tied table: copy -> table.
  llvm::StringMap<std::string> transposedCopies_;
  /// The IR value of each tensor (initializer, Constant node, folded value)
  /// already materialized, so aliases share one source op.
  llvm::DenseMap<const void *, mlir::Value> materialized_;
  /// The mt.constant of each literal already in the IR.
  llvm::DenseMap<mlir::Attribute, mlir::Value> constants_;
  /// Values of initializers and Constant nodes read so far.
  llvm::DenseMap<const onnx::TensorProto *, std::shared_ptr<ConstTensor>> read_;
  /// The last source op (mt.input/param/constant) at the top of @main.
  mlir::Operation *lastSource_ = nullptr;
  /// Names that some node reads or that the graph outputs.
  llvm::StringSet<> used_;
  /// Per name, the reads (node inputs, graph outputs) not yet imported.
  llvm::StringMap<int64_t> remainingUses_;
  /// Tensors made from Constant attributes such as value_float.
  std::deque<onnx::TensorProto> synthesized_;
  llvm::StringMap<OpImportFn> importers_;
};

/// The shape of a ranked tensor value.
llvm::ArrayRef<int64_t> shapeOf(mlir::Value v);
/// The element type of a ranked tensor value.
mlir::Type elementOf(mlir::Value v);

/// Literals from the model (Constant nodes, initializers) larger than this
/// are refused: a tensor that big is a weight and belongs in an initializer.
inline constexpr int64_t kMaxLiteralBytes = 64 * 1024;
/// Values the ConstantFolder computes may be larger (a [T, T] causal mask);
/// an mt.constant holds at most this many bytes of one (after dims that only
/// repeat are dropped and broadcast back).
inline constexpr int64_t kMaxFoldedBytes = 16 * 1024 * 1024;

} // namespace megatrain::onnx_import

#endif // MEGATRAIN_FRONTEND_GRAPHIMPORTER_H
