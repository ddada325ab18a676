//===- InitializerRoles.cpp - which ONNX initializers are parameters -------===//
#include "InitializerRoles.h"
#include "ConstantFolder.h"
#include "TensorData.h"

#include "mlir/IR/Diagnostics.h"

#include <algorithm>

using namespace mlir;

namespace megatrain::onnx_import {

/// The metadata key that lists a model's parameters (frontends/python/export_hf.py).
static constexpr llvm::StringLiteral kParametersKey = "megatrain.parameters";

LogicalResult InitializerRoles::compileRegexes(const OnnxImportOptions &options,
                                               Location fileLoc) {
  auto compile = [&](const std::string &text, const char *what,
                     std::optional<std::regex> &out) -> LogicalResult {
    if (text.empty())
      return success();
    try {
      out.emplace(text, std::regex::ECMAScript);
    } catch (const std::regex_error &e) {
      return emitError(fileLoc)
             << "invalid " << what << " regex '" << text << "': " << e.what();
    }
    return success();
  };
  if (failed(compile(options.trainable, "trainable", trainableRe_)) ||
      failed(compile(options.frozen, "frozen", frozenRe_)))
    return failure();
  return success();
}

bool InitializerRoles::isTrainable(const std::string &name) const {
  if (frozenRe_ && std::regex_match(name, *frozenRe_))
    return false;
  if (trainableRe_)
    return std::regex_match(name, *trainableRe_);
  return true;
}

/// Ops that only move or retype data: a weight read through them is still
/// read as a weight.
static bool isLayoutOp(llvm::StringRef op) {
  return op == "Transpose" || op == "Reshape" || op == "Identity" || op == "Cast" ||
         op == "CastLike" || op == "Unsqueeze" || op == "Squeeze" || op == "Flatten";
}

/// Whether initializer `init` has the shape of a per-channel vector: more
/// than one element, all along one dim ([64], [1, 1, 64]). Norm scales and
/// biases have it; scalars, masks and rotary tables do not.
static bool isChannelVector(const onnx::TensorProto &init) {
  // With one dim other than 1, that dim is the element count: no product
  // (a hostile model's dims would overflow it).
  int64_t wide = 0, wideDim = 1;
  for (int64_t d : init.dims()) {
    if (d != 1) {
      ++wide;
      wideDim = d;
    }
  }
  return wide == 1 && wideDim > 1;
}

/// Whether `name` is named like a module parameter: `weight`, `bias`, or a
/// dotted path ending in one of them (model.norm.weight).
static bool isParameterName(llvm::StringRef name) {
  llvm::StringRef last = name.rsplit('.').second.empty() ? name : name.rsplit('.').second;
  return last == "weight" || last == "bias";
}

/// Finds the names read as weights. A node reads weights only when one of
/// its inputs is a run-time value (computed from a graph input); one whose
/// inputs are all initializers or constants folds instead. Such a node reads
/// as weights: operands A and B of MatMul and Gemm, the table of a Gather,
/// a table added to a Gather's output (a position embedding the optimizer
/// gathered at known positions and folded into an anonymous initializer),
/// and (channelOperands_) Gemm's C, LayerNormalization's scale and bias,
/// RMSNormalization's scale, and the known operands of Mul, Add and Sub.
/// Reads go through layout ops (a Transpose of lm_head.weight feeding the
/// logits MatMul). An initializer so read is a parameter or a copy of one
/// that the exporter renamed or folded (val_93 = W^T, a tied embedding under
/// its other name, two norm scales of ones merged into one).
void InitializerRoles::findWeightOperands(const onnx::GraphProto &graph,
                                          llvm::ArrayRef<FlatNode> nodes) {
  // embeddings: the outputs of run-time Gathers (token embedding lookups).
  llvm::StringSet<> initializers, runtime, embeddings;
  for (const onnx::TensorProto &init : graph.initializer())
    initializers.insert(init.name());
  for (const onnx::ValueInfoProto &input : graph.input())
    if (!initializers.contains(input.name()))
      runtime.insert(input.name());
  std::vector<bool> active(nodes.size(), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const onnx::NodeProto &node = nodes[i].node;
    for (int k = 0; k < node.input_size() && !active[i]; ++k)
      active[i] = !node.input(k).empty() && !foldReadsTypeOnly(node.op_type(), k) &&
                  runtime.contains(node.input(k));
    if (active[i])
      for (const std::string &out : node.output())
        runtime.insert(out);
    if (active[i] && node.op_type() == "Gather" && node.input_size() == 2 &&
        runtime.contains(node.input(1)) && node.output_size() == 1)
      embeddings.insert(node.output(0));
  }
  auto readChannel = [&](const onnx::NodeProto &node, int k, const std::string &reader) {
    if (k < node.input_size() && !node.input(k).empty() &&
        !runtime.contains(node.input(k)))
      channelOperands_[node.input(k)].push_back(reader);
  };
  for (size_t i = nodes.size(); i-- > 0;) {
    const onnx::NodeProto &node = nodes[i].node;
    llvm::StringRef op = node.op_type();
    std::string reader = node.name().empty() ? "#" + std::to_string(i) : node.name();
    if (isLayoutOp(op)) {
      if (node.input_size() == 0 || node.output_size() == 0)
        continue;
      if (weightOperands_.contains(node.output(0)))
        weightOperands_.insert(node.input(0));
      auto it = channelOperands_.find(node.output(0));
      if (it != channelOperands_.end()) {
        llvm::SmallVector<std::string, 2> readers = it->second;
        auto &into = channelOperands_[node.input(0)];
        into.append(readers.begin(), readers.end());
      }
      continue;
    }
    if (!active[i])
      continue;
    if (op == "MatMul" || op == "Gemm") {
      for (int k = 0; k < std::min(2, node.input_size()); ++k)
        weightOperands_.insert(node.input(k));
      if (op == "Gemm")
        readChannel(node, 2, reader);
    } else if (op == "Gather" && node.input_size() == 2 &&
               runtime.contains(node.input(1))) {
      weightOperands_.insert(node.input(0));
      embeddingTables_.insert(node.input(0));
    } else if (op == "LayerNormalization") {
      readChannel(node, 1, reader);
      readChannel(node, 2, reader);
    } else if (op == "RMSNormalization" || op == "SimplifiedLayerNormalization") {
      readChannel(node, 1, reader);
    } else if (op == "Mul" || op == "Add" || op == "Sub") {
      readChannel(node, 0, reader);
      readChannel(node, 1, reader);
      // A table added to an embedding lookup is a position embedding, which
      // the optimizer gathered at the (known) positions and folded.
      for (int k = 0; op == "Add" && k < 2 && node.input_size() == 2; ++k)
        if (embeddings.contains(node.input(1 - k)) && !runtime.contains(node.input(k)))
          weightOperands_.insert(node.input(k));
    }
  }
}

void InitializerRoles::classify(const onnx::ModelProto &model,
                                llvm::ArrayRef<FlatNode> nodes) {
  for (const onnx::StringStringEntryProto &prop : model.metadata_props()) {
    if (prop.key() != kParametersKey)
      continue;
    listedParameters_.emplace();
    llvm::SmallVector<llvm::StringRef> names;
    llvm::StringRef(prop.value()).split(names, ',', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef name : names)
      listedParameters_->insert(name.trim());
  }
  findWeightOperands(model.graph(), nodes);
}

InitializerRole InitializerRoles::roleOf(const onnx::TensorProto &initializer) const {
  const std::string &name = initializer.name();
  if (!isFloatDtype(initializer.data_type()))
    return InitializerRole::Literal;
  if ((listedParameters_ && listedParameters_->contains(name)) ||
      (!listedParameters_ && isParameterName(name)) || weightOperands_.contains(name) ||
      (channelOperands_.contains(name) && isChannelVector(initializer)) ||
      (trainableRe_ && std::regex_match(name, *trainableRe_)))
    return InitializerRole::Parameter;
  return InitializerRole::Buffer;
}

void InitializerRoles::warnMergedInitializers(const onnx::GraphProto &graph,
                                              Location fileLoc) const {
  for (const onnx::TensorProto &init : graph.initializer()) {
    auto it = channelOperands_.find(init.name());
    if (it == channelOperands_.end() || it->second.size() < 2 ||
        roleOf(init) != InitializerRole::Parameter || !isTrainable(init.name()))
      continue;
    llvm::SmallVector<std::string, 2> readers = it->second;
    std::reverse(readers.begin(), readers.end()); // graph order
    std::string shown;
    for (size_t k = 0; k < readers.size() && k < 4; ++k)
      shown += (k ? ", " : "") + readers[k];
    if (readers.size() > 4)
      shown += ", ...";
    emitWarning(fileLoc)
        << "initializer '" << init.name() << "' is the scale or bias of " << readers.size()
        << " nodes (" << shown
        << "): the exporter's optimizer merged initializers that were equal at export "
           "time, so they train as one parameter; export with optimize=False "
           "(torch.onnx.export(..., dynamo=True, optimize=False)) or with "
           "frontends/python/export_hf.py to train them separately";
  }
}

} // namespace megatrain::onnx_import
