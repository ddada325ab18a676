//===- GraphImporter.cpp - walks an ONNX graph and builds mt ops ------------===//
//
// Stages of GraphImporter::run:
//   1. opsets: the default domain must be at opset 13 to 23;
//   2. inputs: every graph input that is not an initializer becomes mt.input,
//      its symbolic dims bound by OnnxImportOptions::shapes;
//   3. nodes, in graph order (ONNX graphs are topologically sorted): each is
//      dispatched to its op importer, which computes its static result shape;
//   4. outputs: returned from @main in graph order, each tagged with
//      mt.output_name;
//   5. the module is verified.
//
//===----------------------------------------------------------------------===//
#include "GraphImporter.h"
#include "TensorData.h"

#include "megatrain/Dialect/MtDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"

#include <cstdio>
#include <cstdlib>

using namespace mlir;

namespace megatrain::onnx_import {

static constexpr int64_t kMinOpset = 13;
static constexpr int64_t kMaxOpset = 23;
static constexpr llvm::StringLiteral kDefaultDomain = "ai.onnx";

static llvm::StringRef normalizeDomain(llvm::StringRef domain) {
  return domain.empty() ? llvm::StringRef(kDefaultDomain) : domain;
}

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

Type elementOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? "x" : "") + std::to_string(shape[i]);
  return out + "]";
}

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

FailureOr<std::vector<int64_t>> NodeImport::constantIntegers(int i) {
  if (!hasInput(i)) {
    error() << "input " << i << " is required";
    return failure();
  }
  const std::string &name = node_.input(i);
  auto it = graph_.values_.find(name);
  if (it == graph_.values_.end() || !it->second.tensor) {
    error() << "input " << i << " ('" << name
            << "') must be an initializer or a Constant node: it is read at "
               "import time";
    return failure();
  }
  std::vector<int64_t> values;
  std::string problem;
  if (!readIntegers(*it->second.tensor, values, problem)) {
    error() << "input " << i << " ('" << name << "') " << problem;
    return failure();
  }
  return values;
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

void NodeImport::aliasResult(int i, int j) {
  if (i >= node_.output_size() || node_.output(i).empty())
    return;
  GraphValue entry = graph_.values_.lookup(node_.input(j));
  graph_.values_[node_.output(i)] = entry;
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
// GraphImporter
//===----------------------------------------------------------------------===//

GraphImporter::GraphImporter(MLIRContext &context, const onnx::ModelProto &model,
                             const std::string &path, const OnnxImportOptions &options)
    : context_(context), model_(model), graph_(model.graph()), path_(path),
      options_(options), fileLoc_(FileLineColLoc::get(&context, path, 0, 0)),
      builder_(&context), sourceBuilder_(&context) {
  registerMathOps(importers_);
  registerShapeOps(importers_);
  registerNormLossOps(importers_);
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

LogicalResult GraphImporter::compileRegexes() {
  auto compile = [&](const std::string &text, const char *what,
                     std::optional<std::regex> &out) -> LogicalResult {
    if (text.empty())
      return success();
    try {
      out.emplace(text, std::regex::ECMAScript);
    } catch (const std::regex_error &e) {
      return emitError(fileLoc_)
             << "invalid " << what << " regex '" << text << "': " << e.what();
    }
    return success();
  };
  if (failed(compile(options_.trainable, "trainable", trainableRe_)) ||
      failed(compile(options_.frozen, "frozen", frozenRe_)))
    return failure();
  return success();
}

bool GraphImporter::isTrainable(const std::string &name) const {
  if (frozenRe_ && std::regex_match(name, *frozenRe_))
    return false;
  if (trainableRe_)
    return std::regex_match(name, *trainableRe_);
  return true;
}

namespace {
/// One graph input's declared shape: a static size, or a symbol ("" when the
/// dim is unknown), per dim.
struct DeclaredDim {
  int64_t size = -1;
  std::string symbol;
  bool isStatic() const { return size > 0; }
};
} // namespace

static std::string dimText(const DeclaredDim &d) {
  if (d.isStatic())
    return std::to_string(d.size);
  return d.symbol.empty() ? "?" : d.symbol;
}

LogicalResult GraphImporter::importInputs() {
  llvm::StringSet<> initializerNames;
  for (const onnx::TensorProto &init : graph_.initializer())
    initializerNames.insert(init.name());

  struct Input {
    const onnx::ValueInfoProto *info;
    Type element;
    bool hasShape;
    std::vector<DeclaredDim> dims;
  };
  std::vector<Input> inputs;
  for (const onnx::ValueInfoProto &info : graph_.input()) {
    if (initializerNames.contains(info.name()))
      continue;
    if (!info.type().has_tensor_type())
      return emitError(fileLoc_) << "input '" << info.name() << "' is not a tensor";
    const onnx::TypeProto::Tensor &tensor = info.type().tensor_type();
    int32_t dtype = tensor.elem_type();
    Type element;
    if (dtype == onnx::TensorProto::FLOAT || dtype == onnx::TensorProto::DOUBLE ||
        dtype == onnx::TensorProto::INT64)
      element = elementTypeOf(context_, dtype);
    else
      return emitError(fileLoc_)
             << "input '" << info.name() << "' has unsupported dtype " << dtypeName(dtype)
             << " (inputs may be FLOAT, DOUBLE or INT64)";
    Input in{&info, element, tensor.has_shape(), {}};
    for (const onnx::TensorShapeProto::Dimension &d : tensor.shape().dim()) {
      DeclaredDim dim;
      if (d.has_dim_value() && d.dim_value() > 0)
        dim.size = d.dim_value();
      else if (d.has_dim_param())
        dim.symbol = d.dim_param();
      in.dims.push_back(dim);
    }
    inputs.push_back(std::move(in));
  }

  // Every binding must name an input and agree with its declared dims; the
  // sizes it gives symbols also bind other inputs that use the same symbols.
  llvm::StringMap<int64_t> symbols;
  llvm::StringMap<std::string> symbolSource;
  for (const auto &[name, shape] : options_.shapes) {
    auto it =
        llvm::find_if(inputs, [&](const Input &in) { return in.info->name() == name; });
    if (it == inputs.end()) {
      std::string names;
      for (const Input &in : inputs)
        names += (names.empty() ? "" : ", ") + in.info->name();
      return emitError(fileLoc_)
             << "--shape names '" << name << "', which is not an input of the "
             << "model (inputs: " << (names.empty() ? "none" : names) << ")";
    }
    std::string declared = "[";
    for (size_t i = 0; i < it->dims.size(); ++i)
      declared += (i ? ", " : "") + dimText(it->dims[i]);
    declared += "]";
    bool rankOk = !it->hasShape || it->dims.size() == shape.size();
    bool dimsOk = llvm::all_of(shape, [](int64_t d) { return d > 0; });
    for (size_t i = 0; rankOk && i < it->dims.size(); ++i)
      if (it->dims[i].isStatic() && it->dims[i].size != shape[i])
        dimsOk = false;
    if (!rankOk || !dimsOk)
      return emitError(fileLoc_)
             << "--shape " << name << "="
             << llvm::join(
                    llvm::map_range(shape, [](int64_t d) { return std::to_string(d); }),
                    "x")
             << " does not match input '" << name << "' declared " << declared;
    for (size_t i = 0; i < it->dims.size(); ++i) {
      const std::string &symbol = it->dims[i].symbol;
      if (it->dims[i].isStatic() || symbol.empty())
        continue;
      auto [sit, inserted] = symbols.try_emplace(symbol, shape[i]);
      if (!inserted && sit->second != shape[i])
        return emitError(fileLoc_) << "dim '" << symbol << "' is bound to " << sit->second
                                   << " by --shape " << symbolSource[symbol] << " and to "
                                   << shape[i] << " by --shape " << name;
      symbolSource.try_emplace(symbol, name);
    }
  }

  for (const Input &in : inputs) {
    const std::string &name = in.info->name();
    std::vector<int64_t> shape;
    auto bound = options_.shapes.find(name);
    if (bound != options_.shapes.end()) {
      shape = bound->second;
    } else {
      bool complete = in.hasShape;
      for (const DeclaredDim &d : in.dims) {
        if (d.isStatic())
          shape.push_back(d.size);
        else if (!d.symbol.empty() && symbols.count(d.symbol))
          shape.push_back(symbols.lookup(d.symbol));
        else
          complete = false;
      }
      if (!complete) {
        if (!in.hasShape)
          return emitError(fileLoc_)
                 << "input '" << name << "' has no declared shape; bind it with "
                 << "--shape " << name << "=DxD... (its full static shape)";
        std::string symbolic, pattern;
        for (const DeclaredDim &d : in.dims) {
          if (!d.isStatic())
            symbolic += (symbolic.empty() ? "" : ", ") + dimText(d);
          pattern += (pattern.empty() ? "" : "x") +
                     (d.isStatic() ? std::to_string(d.size) : std::string("D"));
        }
        return emitError(fileLoc_)
               << "input '" << name << "' has symbolic dims [" << symbolic
               << "]; bind them with --shape " << name << "=" << pattern;
      }
    }
    auto type = RankedTensorType::get(shape, in.element);
    auto op =
        builder_.create<mt::InputOp>(NameLoc::get(builder_.getStringAttr(name), fileLoc_),
                                     type, builder_.getStringAttr(name));
    GraphValue entry;
    entry.value = op.getResult();
    values_[name] = entry;
  }
  return success();
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
  if (!entry.tensor) {
    problem = "input '" + name + "' has no value";
    return failure();
  }
  const onnx::TensorProto &tensor = *entry.tensor;
  // One IR value per tensor, whichever alias (Identity) reads it first.
  auto cached = materialized_.find(&tensor);
  if (cached != materialized_.end()) {
    entry.value = cached->second;
    return entry.value;
  }

  Block *body = builder_.getInsertionBlock();
  if (lastSource_)
    sourceBuilder_.setInsertionPointAfter(lastSource_);
  else
    sourceBuilder_.setInsertionPointToStart(body);
  std::string sourceName = tensor.name().empty() ? name : tensor.name();
  Location loc = NameLoc::get(builder_.getStringAttr(sourceName), fileLoc_);
  const char *what = entry.isInitializer ? "initializer '" : "constant '";

  Operation *op;
  if (entry.isInitializer && isFloatDtype(tensor.data_type())) {
    for (int64_t d : tensor.dims())
      if (d <= 0) {
        problem = std::string(what) + sourceName + "' has a zero or negative dim";
        return failure();
      }
    auto type = RankedTensorType::get(dimsOf(tensor),
                                      elementTypeOf(context_, tensor.data_type()));
    op = sourceBuilder_.create<mt::ParamOp>(
        loc, type, sourceBuilder_.getStringAttr(sourceName),
        sourceBuilder_.getBoolAttr(isTrainable(sourceName)));
  } else {
    std::string error;
    DenseElementsAttr value = readDense(context_, tensor, error);
    if (!value) {
      problem = std::string(what) + sourceName + "' " + error;
      return failure();
    }
    op = sourceBuilder_.create<mt::ConstantOp>(loc, value.getType(), value);
  }
  lastSource_ = op;
  entry.value = op->getResult(0);
  materialized_[&tensor] = entry.value;
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
  entry.isInitializer = false;
  if (proto.output_size() > 0 && !proto.output(0).empty())
    values_[proto.output(0)] = entry;
  return success();
}

LogicalResult GraphImporter::importNodes() {
  for (int i = 0; i < graph_.node_size(); ++i) {
    const onnx::NodeProto &proto = graph_.node(i);
    llvm::StringRef domain = normalizeDomain(proto.domain());
    int64_t opset = opsets_.lookup(domain);
    std::string name = proto.name().empty() ? "#" + std::to_string(i) : proto.name();
    Location loc = NameLoc::get(builder_.getStringAttr(name), fileLoc_);
    NodeImport node(*this, proto, i, opset, loc);

    if (domain != kDefaultDomain)
      return node.error() << "unsupported op";
    if (opset <= 0)
      return node.error() << "the model declares no opset for domain 'ai.onnx'";
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
    auto importer = importers_.find(proto.op_type());
    if (importer == importers_.end())
      return node.error() << "unsupported op";
    if (failed(importer->second(node)))
      return failure();
  }
  return success();
}

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
  if (failed(readOpsets()) || failed(compileRegexes()))
    return nullptr;

  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc_);
  (*module)->setAttr(onnx_attr::kSourceModel, builder_.getStringAttr(path_));
  (*module)->setAttr(onnx_attr::kSourceSha256, builder_.getStringAttr(sha256));
  builder_.setInsertionPointToEnd(module->getBody());
  auto func =
      builder_.create<func::FuncOp>(fileLoc_, "main", builder_.getFunctionType({}, {}));
  builder_.setInsertionPointToStart(func.addEntryBlock());

  for (const onnx::NodeProto &node : graph_.node())
    for (const std::string &input : node.input())
      used_.insert(input);
  for (const onnx::ValueInfoProto &output : graph_.output())
    used_.insert(output.name());
  for (const onnx::TensorProto &init : graph_.initializer()) {
    GraphValue entry;
    entry.tensor = &init;
    entry.isInitializer = true;
    values_[init.name()] = entry;
  }

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
