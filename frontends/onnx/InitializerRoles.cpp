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

/// Finds the names read as weights: operands A and B of MatMul and Gemm, and
/// tables that Gather indexes with run-time indices, also through layout ops
/// (a Transpose of lm_head.weight feeding the logits MatMul). An unlisted
/// floating initializer read so is a copy of a parameter that the exporter
/// renamed or folded (val_93 = W^T, a tied embedding under its other name).
/// Whether indices are known at import time is decided as the folder will:
/// every unlisted initializer and Constant node is known, and so is the
/// output of a foldable node whose inputs are.
void InitializerRoles::findWeightOperands(const onnx::GraphProto &graph,
                                          llvm::ArrayRef<FlatNode> nodes) {
  llvm::StringSet<> known;
  for (const onnx::TensorProto &init : graph.initializer())
    if (!isFloatDtype(init.data_type()) || !listedParameters_->contains(init.name()))
      known.insert(init.name());
  for (const FlatNode &flat : nodes) {
    const onnx::NodeProto &node = flat.node;
    llvm::StringRef op = node.op_type();
    bool all = op == "Constant" || canFold(op) || op == "SplitToSequence" ||
               op == "SequenceAt" || op == "SequenceConstruct";
    for (int k = 0; all && k < node.input_size(); ++k)
      all = node.input(k).empty() || foldReadsTypeOnly(op, k) ||
            known.contains(node.input(k));
    if (all)
      for (const std::string &out : node.output())
        known.insert(out);
  }
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const onnx::NodeProto &node = it->node;
    llvm::StringRef op = node.op_type();
    if (op == "MatMul" || op == "Gemm") {
      for (int k = 0; k < std::min(2, node.input_size()); ++k)
        weightOperands_.insert(node.input(k));
    } else if (op == "Gather" && node.input_size() == 2 &&
               !known.contains(node.input(1))) {
      weightOperands_.insert(node.input(0));
    } else if (isLayoutOp(op) && node.input_size() > 0 && node.output_size() > 0 &&
               weightOperands_.contains(node.output(0))) {
      weightOperands_.insert(node.input(0));
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
  if (listedParameters_)
    findWeightOperands(model.graph(), nodes);
}

InitializerRole InitializerRoles::roleOf(const onnx::TensorProto &initializer) const {
  const std::string &name = initializer.name();
  if (!isFloatDtype(initializer.data_type()))
    return InitializerRole::Literal;
  if (!listedParameters_ || listedParameters_->contains(name) ||
      weightOperands_.contains(name) ||
      (trainableRe_ && std::regex_match(name, *trainableRe_)))
    return InitializerRole::Parameter;
  return InitializerRole::Buffer;
}

} // namespace megatrain::onnx_import
