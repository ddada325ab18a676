//===- GraphImporter.cpp - walks an ONNX graph and builds mt ops ------------===//
//
// Stages of GraphImporter::run:
//   1. opsets: the default domain must be at opset 13 to 23;
//   2. model-local functions are inlined into one flat node list
//      (FunctionInliner.cpp);
//   3. initializers are classified: parameter, buffer or literal (the
//      trainable rule of docs/frontends.md, InitializerRoles.cpp);
//   4. inputs: every graph input that is not an initializer becomes mt.input,
//      its symbolic dims bound by OnnxImportOptions::shapes (InputShapes.cpp);
//   5. nodes, in graph order (ONNX graphs are topologically sorted): a node
//      whose inputs are all known at import time is evaluated by the
//      ConstantFolder; any other is dispatched to its op importer, which
//      computes its static result shape; an op with neither is refused with
//      what to use instead (OpSuggestions.cpp);
//   6. outputs: returned from @main in graph order, each tagged with
//      mt.output_name;
//   7. the module is verified.
//
//===----------------------------------------------------------------------===//
#include "GraphImporter.h"
#include "InputShapes.h"
#include "OpSuggestions.h"
#include "OnnxShapes.h"
#include "TensorData.h"

#include "megatrain/Dialect/MtDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Verifier.h"

#include <cstdio>
#include <cstdlib>

using namespace mlir;

namespace megatrain::onnx_import {

static constexpr int64_t kMinOpset = 13;
static constexpr int64_t kMaxOpset = 23;

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

Type elementOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

//===----------------------------------------------------------------------===//
// NodeImport
//===----------------------------------------------------------------------===//

NodeImport::NodeImport(GraphImporter &graph, const onnx::NodeProto &node, int index,
                       int64_t opset, Location loc)
    : graph_(graph), node_(node), index_(index), opset_(opset), loc_(loc) {}

OpBuilder &NodeImport::builder() { return graph_.builder_; }
MLIRContext *NodeImport::context() { return &graph_.context_; }

InFlightDiagnostic NodeImport::error() {
  std::string name = node_.name().empty() ? "#" + std::to_string(index_) : node_.name();
  InFlightDiagnostic diag = emitError(loc_);
  diag << "node '" << name << "' (op " << node_.op_type() << ", domain '"
       << normalizeDomain(node_.domain()) << "', opset ";
  if (opset_ > 0)
    diag << opset_;
  else
    diag << "unknown";
  diag << "): ";
  return diag;
}

bool NodeImport::hasInput(int i) const {
  return i < node_.input_size() && !node_.input(i).empty();
}

std::string NodeImport::inputLabel(int i) const {
  const std::string index = "input " + std::to_string(i);
  return hasInput(i) ? index + " ('" + node_.input(i) + "')" : index + " (not given)";
}

FailureOr<Value> NodeImport::operand(int i) {
  if (!hasInput(i)) {
    error() << "input " << i << " is required";
    return failure();
  }
  std::string problem;
  FailureOr<Value> value = graph_.materialize(node_.input(i), problem);
  if (failed(value))
    error() << problem;
  return value;
}

const ConstTensor *NodeImport::constant(int i) {
  if (!hasInput(i))
    return nullptr;
  auto it = graph_.values_.find(node_.input(i));
  if (it == graph_.values_.end())
    return nullptr;
  std::string problem;
  return graph_.constantOf(it->second, problem);
}

FailureOr<std::vector<int64_t>> NodeImport::constantIntegers(int i) {
  if (!hasInput(i)) {
    error() << "input " << i << " is required";
    return failure();
  }
  const std::string &name = node_.input(i);
  auto it = graph_.values_.find(name);
  std::string problem;
  const ConstTensor *value =
      it == graph_.values_.end() ? nullptr : graph_.constantOf(it->second, problem);
  if (!value) {
    InFlightDiagnostic diag = error();
    diag << "input " << i << " ('" << name << "') is read at import time, so it must "
         << "be computed only from initializers, Constant nodes and shapes";
    if (!problem.empty())
      diag << "; it " << problem;
    else
      diag << "; it depends on run-time values";
    return failure();
  }
  if (value->isFloat()) {
    error() << "input " << i << " ('" << name << "') has dtype " << kindName(value->kind)
            << ", expected INT64 or INT32";
    return failure();
  }
  return value->i;
}

FailureOr<double> NodeImport::constantScalar(int i) {
  const ConstTensor *value = constant(i);
  if (!value || value->elements() != 1) {
    error() << inputLabel(i) << " must be a scalar known at import time";
    return failure();
  }
  return value->real(0);
}

LogicalResult NodeImport::inputType(int i, std::vector<int64_t> &shape,
                                    std::optional<ConstKind> &kind) {
  if (!hasInput(i))
    return error() << "input " << i << " is required";
  auto it = graph_.values_.find(node_.input(i));
  if (it == graph_.values_.end())
    return error() << "input '" << node_.input(i) << "' is not defined";
  const GraphValue &entry = it->second;
  std::string problem;
  if (entry.sequence)
    return error() << "input " << i << " ('" << node_.input(i)
                   << "') is a sequence, not a tensor";
  if (const ConstTensor *value = graph_.constantOf(entry, problem)) {
    shape = value->shape;
    kind = value->kind;
  } else if (entry.value) {
    shape = shapeOf(entry.value).vec();
    kind = constKindOf(elementOf(entry.value));
  } else if (entry.tensor) {
    shape = dimsOf(*entry.tensor);
    kind = constKindOf(entry.tensor->data_type());
  } else {
    return error() << "input '" << node_.input(i) << "' has no value";
  }
  return success();
}

FailureOr<Value> NodeImport::computedConstant(const ConstTensor &value,
                                              const std::string &name) {
  std::string problem;
  FailureOr<Value> result =
      graph_.materializeConstant(value, name, /*folded=*/true, problem);
  if (failed(result))
    error() << problem;
  return result;
}

LogicalResult NodeImport::checkComputedSize(const ConstTensor &value, const std::string &name) {
  if (value.bytes() > kMaxFoldedBytes)
    return error() << "value '" << name << "' is " << value.bytes()
                   << " bytes; values folded at import time are limited to " << kMaxFoldedBytes
                   << " bytes";
  return success();
}

FailureOr<std::vector<GraphValue>> NodeImport::sequence(int i) {
  if (!hasInput(i)) {
    error() << "input " << i << " is required";
    return failure();
  }
  auto it = graph_.values_.find(node_.input(i));
  if (it == graph_.values_.end() || !it->second.sequence) {
    error() << "input " << i << " ('" << node_.input(i) << "') must be a sequence";
    return failure();
  }
  return *it->second.sequence;
}

FailureOr<int64_t> NodeImport::normalizedAxis(int64_t axis, int64_t rank) {
  std::string problem;
  if (!normalizeAxis(axis, rank, problem)) {
    error() << problem;
    return failure();
  }
  return axis;
}

bool NodeImport::outputUsed(int i) const {
  return i < node_.output_size() && !node_.output(i).empty() &&
         graph_.used_.contains(node_.output(i));
}

void NodeImport::setResult(int i, Value value) {
  if (i >= node_.output_size() || node_.output(i).empty())
    return;
  GraphValue entry;
  entry.value = value;
  graph_.values_[node_.output(i)] = entry;
}

void NodeImport::setFolded(int i, ConstTensor value) {
  if (i >= node_.output_size() || node_.output(i).empty())
    return;
  GraphValue entry;
  entry.folded = std::make_shared<const ConstTensor>(std::move(value));
  graph_.values_[node_.output(i)] = entry;
}

void NodeImport::setSequence(int i, std::vector<GraphValue> elements) {
  if (i >= node_.output_size() || node_.output(i).empty())
    return;
  GraphValue entry;
  entry.sequence = std::make_shared<const std::vector<GraphValue>>(std::move(elements));
  graph_.values_[node_.output(i)] = entry;
}

void NodeImport::bindResult(int i, GraphValue value) {
  if (i >= node_.output_size() || node_.output(i).empty())
    return;
  graph_.values_[node_.output(i)] = std::move(value);
}

FailureOr<GraphValue> NodeImport::input(int i) {
  if (!hasInput(i)) {
    error() << "input " << i << " is required";
    return failure();
  }
  return graph_.values_.lookup(node_.input(i));
}

LogicalResult NodeImport::aliasResult(int i, int j) {
  if (!hasInput(j))
    return error() << "input " << j << " is required";
  if (i >= node_.output_size() || node_.output(i).empty())
    return success();
  GraphValue entry = graph_.values_.lookup(node_.input(j));
  graph_.values_[node_.output(i)] = entry;
  return success();
}

const onnx::AttributeProto *NodeImport::attribute(llvm::StringRef name) const {
  for (const onnx::AttributeProto &attr : node_.attribute())
    if (attr.name() == name)
      return &attr;
  return nullptr;
}

int64_t NodeImport::intAttr(llvm::StringRef name, int64_t fallback) const {
  const onnx::AttributeProto *attr = attribute(name);
  return attr ? attr->i() : fallback;
}

/// ONNX float attributes are f32; they are widened to the double with the
/// shortest decimal that reads back as the same float (1e-5, not
/// 9.9999997473787516e-06), which is what the exporter meant.
static double widenFloat(float f) {
  char text[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, f);
    double d = std::strtod(text, nullptr);
    if (static_cast<float>(d) == f)
      return d;
  }
  return f;
}

double NodeImport::floatAttr(llvm::StringRef name, double fallback) const {
  const onnx::AttributeProto *attr = attribute(name);
  return attr ? widenFloat(attr->f()) : fallback;
}

std::string NodeImport::stringAttr(llvm::StringRef name, llvm::StringRef fallback) const {
  const onnx::AttributeProto *attr = attribute(name);
  return attr ? attr->s() : fallback.str();
}

std::optional<std::vector<int64_t>> NodeImport::intsAttr(llvm::StringRef name) const {
  const onnx::AttributeProto *attr = attribute(name);
  if (!attr)
    return std::nullopt;
  return std::vector<int64_t>(attr->ints().begin(), attr->ints().end());
}

//===----------------------------------------------------------------------===//
// GraphImporter: opsets and initializers
//===----------------------------------------------------------------------===//

GraphImporter::GraphImporter(MLIRContext &context, const onnx::ModelProto &model,
                             const std::string &path, const OnnxImportOptions &options)
    : context_(context), model_(model), graph_(model.graph()), path_(path),
      options_(options), fileLoc_(FileLineColLoc::get(&context, path, 0, 0)),
      builder_(&context), sourceBuilder_(&context) {
  registerMathOps(importers_);
  registerShapeOps(importers_);
  registerNormLossOps(importers_);
  registerAttentionOps(importers_);
}

LogicalResult GraphImporter::readOpsets() {
  for (const onnx::OperatorSetIdProto &opset : model_.opset_import())
    opsets_[normalizeDomain(opset.domain())] = opset.version();
  auto it = opsets_.find(kDefaultDomain);
  if (it != opsets_.end() && (it->second < kMinOpset || it->second > kMaxOpset))
    return emitError(fileLoc_) << "opset " << it->second
                               << " of domain 'ai.onnx' is not supported (" << kMinOpset
                               << " to " << kMaxOpset << ")";
  return success();
}

void GraphImporter::classifyInitializers() {
  roles_.classify(model_, nodes_);
  for (const onnx::TensorProto &init : graph_.initializer()) {
    GraphValue entry;
    entry.tensor = &init;
    entry.role = roles_.roleOf(init);
    values_[init.name()] = entry;
  }
  roles_.warnMergedInitializers(graph_, fileLoc_);
  transposedCopies_ = findTransposedCopies(
      graph_, path_, roles_.embeddingTables(), [&](const onnx::TensorProto &init) {
        return roles_.roleOf(init) == InitializerRole::Parameter;
      });
}

//===----------------------------------------------------------------------===//
// GraphImporter: inputs
//===----------------------------------------------------------------------===//

LogicalResult GraphImporter::importInputs() {
  std::vector<BoundInput> inputs;
  if (failed(bindInputShapes(context_, graph_, options_.shapes, fileLoc_, inputs)))
    return failure();
  for (const BoundInput &in : inputs) {
    auto op = builder_.create<mt::InputOp>(
        NameLoc::get(builder_.getStringAttr(in.name), fileLoc_),
        RankedTensorType::get(in.shape, in.element), builder_.getStringAttr(in.name));
    GraphValue entry;
    entry.value = op.getResult();
    values_[in.name] = entry;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// GraphImporter: known values and sources
//===----------------------------------------------------------------------===//

const ConstTensor *GraphImporter::constantOf(const GraphValue &entry,
                                             std::string &problem) {
  if (entry.folded)
    return entry.folded.get();
  if (!entry.tensor || entry.role == InitializerRole::Parameter)
    return nullptr;
  auto cached = read_.find(entry.tensor);
  if (cached != read_.end())
    return cached->second.get();
  auto value = std::make_shared<ConstTensor>();
  if (!readConstTensor(*entry.tensor, *value, problem))
    return nullptr;
  read_[entry.tensor] = value;
  return value.get();
}

OpBuilder &GraphImporter::sourceBuilder() {
  if (lastSource_)
    sourceBuilder_.setInsertionPointAfter(lastSource_);
  else
    sourceBuilder_.setInsertionPointToStart(builder_.getInsertionBlock());
  return sourceBuilder_;
}

FailureOr<Value> GraphImporter::materializeConstant(const ConstTensor &value,
                                                    const std::string &name, bool folded,
                                                    std::string &problem) {
  if (value.elements() == 0) {
    problem = "value '" + name + "' is empty (zero-sized tensors are not supported)";
    return failure();
  }
  // A folded mask [B, 1, T, T] repeats itself over B: keep [1, 1, T, T] and
  // broadcast it back, so the plan carries the bytes once.
  ConstTensor reduced;
  bool broadcast =
      folded && value.bytes() > kMaxLiteralBytes && dropRepeatedDims(value, reduced);
  const ConstTensor &stored = broadcast ? reduced : value;
  int64_t limit = folded ? kMaxFoldedBytes : kMaxLiteralBytes;
  if (stored.bytes() > limit) {
    problem = std::string(folded ? "value '" : "constant '") + name + "' is " +
              std::to_string(stored.bytes()) + " bytes; " +
              (folded ? "values folded at import time" : "constants") +
              " are limited to " + std::to_string(limit) + " bytes";
    return failure();
  }
  Location loc = NameLoc::get(builder_.getStringAttr(name), fileLoc_);
  DenseElementsAttr attr = toAttr(context_, stored);
  // Attributes are uniqued: a table every layer recomputes is one constant.
  Value &result = constants_[attr];
  if (!result) {
    Operation *op = sourceBuilder().create<mt::ConstantOp>(loc, attr.getType(), attr);
    lastSource_ = op;
    result = op->getResult(0);
  }
  if (broadcast)
    return builder_
        .create<mt::BroadcastToOp>(
            loc, RankedTensorType::get(value.shape, attr.getType().getElementType()),
            result)
        .getResult();
  return result;
}

FailureOr<Value> GraphImporter::materialize(const std::string &name,
                                            std::string &problem) {
  auto it = values_.find(name);
  if (it == values_.end()) {
    problem = "input '" + name +
              "' is not defined by a graph input, an initializer or an earlier node";
    return failure();
  }
  GraphValue &entry = it->second;
  if (entry.value)
    return entry.value;
  if (entry.sequence) {
    problem = "input '" + name + "' is a sequence; only SequenceAt and SequenceLength " +
              "read sequences";
    return failure();
  }
  const void *key =
      entry.folded ? (const void *)entry.folded.get() : (const void *)entry.tensor;
  if (!key) {
    problem = "input '" + name + "' has no value";
    return failure();
  }
  // One IR value per tensor, whichever alias (Identity) reads it first.
  auto cached = materialized_.find(key);
  if (cached != materialized_.end()) {
    entry.value = cached->second;
    return entry.value;
  }

  FailureOr<Value> result = failure();
  if (entry.folded) {
    result = materializeConstant(*entry.folded, name, /*folded=*/true, problem);
  } else {
    const onnx::TensorProto &tensor = *entry.tensor;
    std::string sourceName = tensor.name().empty() ? name : tensor.name();
    Location loc = NameLoc::get(builder_.getStringAttr(sourceName), fileLoc_);
    bool isInitializer = entry.role != InitializerRole::Literal ||
                         llvm::any_of(graph_.initializer(),
                                      [&](const auto &init) { return &init == &tensor; });
    const char *what = isInitializer ? "initializer '" : "constant '";
    // Parameters, and buffers too large for a literal or stored externally,
    // are loaded by the runtime like weights (buffers never train); their
    // data is not read.
    bool runtimeLoaded = entry.role == InitializerRole::Parameter;
    std::vector<int64_t> dims = dimsOf(tensor);
    if (!checkShapeLimits(dims, problem)) {
      problem = std::string(what) + sourceName + "' " + problem;
      return failure();
    }
    if (entry.role == InitializerRole::Buffer) {
      int64_t bytes = tensor.data_type() == onnx::TensorProto::DOUBLE ? 8 : 4;
      for (int64_t d : dims)
        bytes *= d; // checkShapeLimits: fits
      runtimeLoaded = tensor.data_location() == onnx::TensorProto::EXTERNAL ||
                      bytes > kMaxLiteralBytes;
    }
    std::string readProblem;
    const ConstTensor *value = runtimeLoaded ? nullptr : constantOf(entry, readProblem);
    auto copy = transposedCopies_.find(sourceName);
    if (copy != transposedCopies_.end()) {
      // W^T folded from a tied table: read as the table's transpose, so the
      // tie trains as one parameter.
      FailureOr<Value> table = materialize(copy->second, problem);
      if (failed(table))
        return failure();
      auto tableType = cast<RankedTensorType>(table->getType());
      result = builder_
                   .create<mt::TransposeOp>(
                       loc,
                       RankedTensorType::get({tableType.getDimSize(1), tableType.getDimSize(0)},
                                             tableType.getElementType()),
                       *table, builder_.getDenseI64ArrayAttr({1, 0}))
                   .getResult();
    } else if (runtimeLoaded) {
      for (int64_t d : tensor.dims())
        if (d <= 0) {
          problem = std::string(what) + sourceName + "' has a zero or negative dim";
          return failure();
        }
      auto type = RankedTensorType::get(dims,
                                        elementTypeOf(context_, tensor.data_type()));
      bool trainable =
          entry.role == InitializerRole::Parameter && roles_.isTrainable(sourceName);
      Operation *op = sourceBuilder().create<mt::ParamOp>(
          loc, type, sourceBuilder_.getStringAttr(sourceName),
          sourceBuilder_.getBoolAttr(trainable));
      lastSource_ = op;
      result = op->getResult(0);
    } else if (!value) {
      problem = std::string(what) + sourceName + "' " + readProblem;
      return failure();
    } else {
      result = materializeConstant(*value, sourceName, /*folded=*/false, problem);
    }
  }
  if (failed(result))
    return failure();
  entry.value = *result;
  materialized_[key] = *result;
  return entry.value;
}

LogicalResult GraphImporter::importConstantNode(NodeImport &node) {
  const onnx::NodeProto &proto = node.node();
  if (proto.attribute_size() != 1)
    return node.error() << "expects exactly one value attribute";
  const onnx::AttributeProto &attr = proto.attribute(0);
  const onnx::TensorProto *tensor = nullptr;
  if (attr.name() == "value") {
    tensor = &attr.t();
  } else if (attr.name() == "value_float" || attr.name() == "value_floats") {
    onnx::TensorProto &t = synthesized_.emplace_back();
    t.set_data_type(onnx::TensorProto::FLOAT);
    if (attr.name() == "value_float") {
      t.add_float_data(attr.f());
    } else {
      t.add_dims(attr.floats_size());
      for (float f : attr.floats())
        t.add_float_data(f);
    }
    tensor = &t;
  } else if (attr.name() == "value_int" || attr.name() == "value_ints") {
    onnx::TensorProto &t = synthesized_.emplace_back();
    t.set_data_type(onnx::TensorProto::INT64);
    if (attr.name() == "value_int") {
      t.add_int64_data(attr.i());
    } else {
      t.add_dims(attr.ints_size());
      for (int64_t i : attr.ints())
        t.add_int64_data(i);
    }
    tensor = &t;
  } else {
    return node.error() << "attribute '" << attr.name() << "' is not supported "
                        << "(value, value_float(s) or value_int(s))";
  }
  GraphValue entry;
  entry.tensor = tensor;
  entry.role = InitializerRole::Literal;
  if (proto.output_size() > 0 && !proto.output(0).empty())
    values_[proto.output(0)] = entry;
  return success();
}

//===----------------------------------------------------------------------===//
// GraphImporter: nodes
//===----------------------------------------------------------------------===//

/// Whether `entry` can be known at import time, without reading any data.
static bool knowable(const GraphValue &entry) {
  return entry.folded || (entry.tensor && entry.role != InitializerRole::Parameter);
}

LogicalResult GraphImporter::tryFold(NodeImport &node, bool &folded) {
  folded = false;
  const onnx::NodeProto &proto = node.node();
  if (!canFold(proto.op_type()))
    return success();
  // First without reading anything: a large buffer next to a run-time
  // operand is never read.
  for (int k = 0; k < proto.input_size(); ++k) {
    if (proto.input(k).empty())
      continue;
    const GraphValue &entry = values_[proto.input(k)];
    if (entry.sequence)
      return success();
    if (!knowable(entry) && !foldReadsTypeOnly(proto.op_type(), k))
      return success(); // a run-time input: the op importer's job
  }
  std::vector<FoldInput> inputs(proto.input_size());
  for (int k = 0; k < proto.input_size(); ++k) {
    if (proto.input(k).empty())
      continue;
    const GraphValue &entry = values_[proto.input(k)];
    FoldInput &in = inputs[k];
    in.present = true;
    std::string problem;
    if ((in.value = constantOf(entry, problem))) {
      in.shape = in.value->shape;
      in.kind = in.value->kind;
      continue;
    }
    if (!foldReadsTypeOnly(proto.op_type(), k))
      return success(); // unreadable (external data): a run-time value after all
    if (failed(node.inputType(k, in.shape, in.kind)))
      return failure();
  }
  std::vector<ConstTensor> outputs;
  std::string problem;
  if (!foldNode(proto, node.opset(), inputs, outputs, problem))
    return node.error() << problem;
  for (int k = 0; k < proto.output_size(); ++k)
    node.setFolded(k, std::move(outputs[k]));
  folded = true;
  return success();
}

LogicalResult GraphImporter::unsupported(NodeImport &node) {
  const onnx::NodeProto &proto = node.node();
  llvm::StringRef domain = normalizeDomain(proto.domain());
  if (domain == kDefaultDomain && canFold(proto.op_type())) {
    // Known to the folder but not as a run-time op: say which input is live.
    for (int k = 0; k < proto.input_size(); ++k) {
      if (proto.input(k).empty() || foldReadsTypeOnly(proto.op_type(), k))
        continue;
      std::string problem;
      if (!constantOf(values_[proto.input(k)], problem))
        return node.error() << "supported only on values known at import time "
                            << "(computed from initializers, Constant nodes and "
                            << "shapes), but input " << k << " ('" << proto.input(k)
                            << "') is computed at run time";
    }
  }
  InFlightDiagnostic diag = node.error();
  diag << "unsupported op";
  if (domain != kDefaultDomain)
    diag << " (only domain 'ai.onnx' is imported)";
  llvm::SmallVector<llvm::StringRef> supported;
  for (const auto &entry : importers_)
    supported.push_back(entry.getKey());
  diag << "; nearest supported: " << nearestSupported(proto.op_type(), supported);
  return diag;
}

LogicalResult GraphImporter::importNodes() {
  for (int i = 0; i < (int)nodes_.size(); ++i) {
    const onnx::NodeProto &proto = nodes_[i].node;
    llvm::StringRef domain = normalizeDomain(proto.domain());
    int64_t opset = nodes_[i].opset;
    std::string name = proto.name().empty() ? "#" + std::to_string(i) : proto.name();
    Location loc = NameLoc::get(builder_.getStringAttr(name), fileLoc_);
    NodeImport node(*this, proto, i, opset, loc);

    if (domain != kDefaultDomain)
      return unsupported(node);
    if (opset <= 0)
      return node.error() << "the model declares no opset for domain 'ai.onnx'";
    // Every op megatrain imports has a required first output; importers name
    // derived values after it.
    if (proto.output_size() == 0 || proto.output(0).empty())
      return node.error() << "output 0 is required";
    for (int j = 0; j < proto.input_size(); ++j)
      if (!proto.input(j).empty() && !values_.count(proto.input(j)))
        return node.error() << "input '" << proto.input(j)
                            << "' is not defined by a graph input, an "
                               "initializer or an earlier node";
    if (proto.op_type() == "Constant") {
      if (failed(importConstantNode(node)))
        return failure();
      continue;
    }
    bool folded;
    if (failed(tryFold(node, folded)))
      return failure();
    if (!folded) {
      auto importer = importers_.find(proto.op_type());
      if (importer == importers_.end())
        return unsupported(node);
      if (failed(importer->second(node)))
        return failure();
    }
    if (failed(checkResultShapes(node)))
      return failure();
    releaseDeadValues(proto);
  }
  return success();
}

/// Every result shape an op importer or the folder computed from the file
/// (a Reshape or Expand target, a Concat of many inputs) is checked once,
/// here, against what the passes and the runtime can hold.
LogicalResult GraphImporter::checkResultShapes(NodeImport &node) {
  const onnx::NodeProto &proto = node.node();
  for (int k = 0; k < proto.output_size(); ++k) {
    if (proto.output(k).empty())
      continue;
    auto it = values_.find(proto.output(k));
    if (it == values_.end())
      continue;
    std::vector<int64_t> shape;
    if (it->second.value) {
      auto type = dyn_cast<RankedTensorType>(it->second.value.getType());
      if (!type)
        continue;
      shape = type.getShape().vec();
    } else if (it->second.folded) {
      shape = it->second.folded->shape;
    } else {
      continue;
    }
    std::string problem;
    if (!checkShapeLimits(shape, problem))
      return node.error() << "output " << k << " ('" << proto.output(k) << "') "
                          << problem;
  }
  return success();
}

/// A folded value read for the last time is dropped: the intermediates of a
/// [B, 1, T, T] mask would otherwise all stay in memory until the end.
void GraphImporter::releaseDeadValues(const onnx::NodeProto &node) {
  for (const std::string &input : node.input()) {
    if (input.empty())
      continue;
    auto count = remainingUses_.find(input);
    if (count == remainingUses_.end() || --count->second > 0)
      continue;
    auto it = values_.find(input);
    if (it != values_.end() && it->second.folded && !it->second.value)
      it->second.folded.reset();
  }
}

//===----------------------------------------------------------------------===//
// GraphImporter: outputs and the driver
//===----------------------------------------------------------------------===//

LogicalResult GraphImporter::importOutputs(func::FuncOp func) {
  if (graph_.output_size() == 0)
    return emitError(fileLoc_) << "the graph has no outputs";
  SmallVector<Value> results;
  for (const onnx::ValueInfoProto &info : graph_.output()) {
    std::string problem;
    FailureOr<Value> value = materialize(info.name(), problem);
    if (failed(value))
      return emitError(fileLoc_) << "output '" << info.name() << "': " << problem;
    // A declared static shape must be the one computed; symbolic dims are
    // not checked.
    if (info.type().has_tensor_type() && info.type().tensor_type().has_shape()) {
      ArrayRef<int64_t> shape = shapeOf(*value);
      const auto &dims = info.type().tensor_type().shape().dim();
      bool ok = dims.size() == (int)shape.size();
      std::string declared = "[";
      for (int d = 0; d < dims.size(); ++d) {
        const auto &dim = dims.Get(d);
        declared += (d ? ", " : "") + (dim.has_dim_value()
                                           ? std::to_string(dim.dim_value())
                                           : (dim.dim_param().empty() ? std::string("?")
                                                                      : dim.dim_param()));
        if (ok && dim.has_dim_value() && dim.dim_value() > 0 &&
            dim.dim_value() != shape[d])
          ok = false;
      }
      declared += "]";
      if (!ok)
        return emitError(fileLoc_) << "output '" << info.name() << "' is declared "
                                   << declared << " but computes to " << shapeStr(shape);
    }
    results.push_back(*value);
  }
  builder_.create<func::ReturnOp>(fileLoc_, results);
  SmallVector<Type> types;
  for (Value v : results)
    types.push_back(v.getType());
  func.setFunctionType(builder_.getFunctionType({}, types));
  for (int i = 0; i < graph_.output_size(); ++i)
    func.setResultAttr(i, onnx_attr::kOutputName,
                       builder_.getStringAttr(graph_.output(i).name()));
  return success();
}

OwningOpRef<ModuleOp> GraphImporter::run(llvm::StringRef sha256) {
  context_.getOrLoadDialect<func::FuncDialect>();
  context_.getOrLoadDialect<mt::MtDialect>();
  if (failed(readOpsets()) || failed(roles_.compileRegexes(options_, fileLoc_)) ||
      failed(inlineFunctions(model_, opsets_, fileLoc_, nodes_)))
    return nullptr;

  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc_);
  (*module)->setAttr(onnx_attr::kSourceModel, builder_.getStringAttr(path_));
  (*module)->setAttr(onnx_attr::kSourceSha256, builder_.getStringAttr(sha256));
  builder_.setInsertionPointToEnd(module->getBody());
  auto func =
      builder_.create<func::FuncOp>(fileLoc_, "main", builder_.getFunctionType({}, {}));
  builder_.setInsertionPointToStart(func.addEntryBlock());

  for (const FlatNode &flat : nodes_)
    for (const std::string &input : flat.node.input()) {
      used_.insert(input);
      ++remainingUses_[input];
    }
  for (const onnx::ValueInfoProto &output : graph_.output()) {
    used_.insert(output.name());
    ++remainingUses_[output.name()]; // never released
  }
  classifyInitializers();

  if (failed(importInputs()))
    return nullptr;
  // Inputs come first; parameters and constants follow them at the top.
  if (!func.getBody().front().empty())
    lastSource_ = &func.getBody().front().back();
  if (failed(importNodes()) || failed(importOutputs(func)))
    return nullptr;

  if (failed(verify(*module))) {
    emitError(fileLoc_) << "the imported IR does not verify (an importer bug)";
    return nullptr;
  }
  return module;
}

} // namespace megatrain::onnx_import
