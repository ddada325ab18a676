//===- FunctionInliner.cpp - inlines model-local ONNX functions -------------===//
#include "FunctionInliner.h"

#include "mlir/IR/Diagnostics.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

#include <deque>
#include <map>

using namespace mlir;

namespace megatrain::onnx_import {

/// Model-local functions calling functions deeper than this are refused.
static constexpr int kMaxInlineDepth = 32;

/// FunctionProto.attribute_proto (field 11, IR version 9): the defaults of
/// a function's attributes. The ONNX headers megatrain builds against
/// predate the field, so it is parsed from the message's unknown fields.
static std::deque<onnx::AttributeProto> attributeDefaults(const onnx::FunctionProto &f) {
  std::deque<onnx::AttributeProto> out;
  const std::string &unknown = f.unknown_fields();
  google::protobuf::io::ArrayInputStream raw(unknown.data(), (int)unknown.size());
  google::protobuf::io::CodedInputStream in(&raw);
  while (uint32_t tag = in.ReadTag()) {
    int field = tag >> 3, wire = tag & 7;
    if (field == 11 && wire == 2) {
      std::string bytes;
      uint32_t length;
      if (!in.ReadVarint32(&length) || !in.ReadString(&bytes, length))
        break;
      onnx::AttributeProto a;
      if (a.ParseFromString(bytes))
        out.push_back(std::move(a));
    } else if (!google::protobuf::internal::WireFormatLite::SkipField(&in, tag)) {
      break;
    }
  }
  return out;
}

namespace {
class FunctionInliner {
public:
  FunctionInliner(const onnx::ModelProto &model, const llvm::StringMap<int64_t> &opsets,
                  Location fileLoc, std::vector<FlatNode> &nodes)
      : model_(model), opsets_(opsets), fileLoc_(fileLoc), nodes_(nodes) {}

  LogicalResult inlineNode(const onnx::NodeProto &node, int64_t opset,
                           const std::string &function, const std::string &prefix,
                           int depth);

private:
  const onnx::ModelProto &model_;
  const llvm::StringMap<int64_t> &opsets_;
  Location fileLoc_;
  std::vector<FlatNode> &nodes_;
  /// Attribute defaults of the functions inlined so far, parsed once each.
  std::map<const onnx::FunctionProto *, std::deque<onnx::AttributeProto>>
      functionDefaults_;
};
} // namespace

/// A node whose (domain, op type) names a model-local function is replaced by
/// the function's body: formal inputs and outputs become the call's names,
/// the body's own names get the prefix "<call>/" (so two calls never share a
/// name), attributes referring to the call's (ref_attr_name) take its values
/// or the function's defaults. Calls inside the body are inlined in turn.
LogicalResult FunctionInliner::inlineNode(const onnx::NodeProto &node, int64_t opset,
                                          const std::string &function,
                                          const std::string &prefix, int depth) {
  const onnx::FunctionProto *callee = nullptr;
  for (const onnx::FunctionProto &f : model_.functions())
    if (f.name() == node.op_type() &&
        normalizeDomain(f.domain()) == normalizeDomain(node.domain()))
      callee = &f;
  if (!callee) {
    FlatNode &flat = nodes_.emplace_back();
    flat.node = node;
    flat.opset = opset;
    flat.function = function;
    return success();
  }
  if (depth >= kMaxInlineDepth)
    return emitError(fileLoc_) << "model-local function '" << callee->name()
                               << "' calls functions more than " << kMaxInlineDepth
                               << " deep (recursion?)";

  std::string call = prefix + (node.name().empty() ? node.op_type() : node.name()) + "/";
  llvm::StringMap<std::string> rename;
  for (int k = 0; k < callee->input_size(); ++k)
    rename[callee->input(k)] = k < node.input_size() ? node.input(k) : "";
  for (int k = 0; k < callee->output_size(); ++k)
    rename[callee->output(k)] = k < node.output_size() ? node.output(k) : "";
  auto renamed = [&](const std::string &name) -> std::string {
    if (name.empty())
      return name;
    auto it = rename.find(name);
    return it != rename.end() ? it->second : call + name;
  };
  llvm::StringMap<const onnx::AttributeProto *> given, defaults;
  for (const onnx::AttributeProto &a : node.attribute())
    given[a.name()] = &a;
  std::deque<onnx::AttributeProto> &defaultValues = functionDefaults_[callee];
  if (defaultValues.empty())
    defaultValues = attributeDefaults(*callee);
  for (const onnx::AttributeProto &a : defaultValues)
    defaults[a.name()] = &a;
  llvm::StringMap<int64_t> calleeOpsets;
  for (const onnx::OperatorSetIdProto &o : callee->opset_import())
    calleeOpsets[normalizeDomain(o.domain())] = o.version();

  for (const onnx::NodeProto &inner : callee->node()) {
    onnx::NodeProto copy = inner;
    copy.set_name(call + (inner.name().empty() ? inner.op_type() : inner.name()));
    for (int k = 0; k < copy.input_size(); ++k)
      copy.set_input(k, renamed(inner.input(k)));
    for (int k = 0; k < copy.output_size(); ++k)
      copy.set_output(k, renamed(inner.output(k)));
    copy.clear_attribute();
    for (const onnx::AttributeProto &a : inner.attribute()) {
      if (a.ref_attr_name().empty()) {
        *copy.add_attribute() = a;
        continue;
      }
      const onnx::AttributeProto *value = given.lookup(a.ref_attr_name());
      if (!value)
        value = defaults.lookup(a.ref_attr_name());
      if (!value)
        continue; // unset: the op's own default applies
      onnx::AttributeProto *added = copy.add_attribute();
      *added = *value;
      added->set_name(a.name());
    }
    llvm::StringRef domain = normalizeDomain(copy.domain());
    auto own = calleeOpsets.find(domain);
    int64_t innerOpset = own != calleeOpsets.end() ? own->second : opsets_.lookup(domain);
    if (failed(inlineNode(copy, innerOpset, callee->name(), call, depth + 1)))
      return failure();
  }
  return success();
}

LogicalResult inlineFunctions(const onnx::ModelProto &model,
                              const llvm::StringMap<int64_t> &opsets, Location fileLoc,
                              std::vector<FlatNode> &nodes) {
  FunctionInliner inliner(model, opsets, fileLoc, nodes);
  for (const onnx::NodeProto &node : model.graph().node())
    if (failed(inliner.inlineNode(node, opsets.lookup(normalizeDomain(node.domain())), "",
                                  "", 0)))
      return failure();
  return success();
}

} // namespace megatrain::onnx_import
