//===- FunctionInliner.cpp - inlines model-local ONNX functions -------------===//
//
// Two stages:
//   1. The call graph of the functions the graph reaches is walked once,
//      before anything is copied: a function that calls itself (directly or
//      through others) is an error naming the cycle; calls nesting deeper than
//      kMaxInlineDepth, or a graph that would grow past kMaxInlinedNodes
//      nodes and calls (a function calling another twice, a few dozen levels
//      deep, doubles the count per level, even when the last is empty), are
//      errors too. So a hostile file fails here, in time and memory linear in
//      its size.
//   2. Each call is replaced by its callee's body. The body's names get a
//      prefix "<function>.<n>/" with n counting calls, so names stay as long
//      as the file's own, however deep the calls nest. The bytes copied are
//      counted as they are copied: past kMaxInlinedBytes (256 MiB: a large Constant in
//      a body called many times) the import stops.
//
//===----------------------------------------------------------------------===//
#include "FunctionInliner.h"

#include "mlir/IR/Diagnostics.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>

using namespace mlir;

namespace megatrain::onnx_import {

/// Model-local functions calling functions deeper than this are refused.
static constexpr int kMaxInlineDepth = 32;
/// A graph whose calls would expand to more nodes than this, counting each
/// call as one, is refused: 12x the 5,128 nodes of the Llama-2-7B export
/// (tests/models/graphs), 3x a 126-layer model's. Inlining and importing take
/// a few microseconds a node, so a file under the limit still fails, if it
/// must, in a fraction of a second (fuzzed models of 2.1M and 1M nodes took
/// 6.5 s and 3.8 s; one of 4M calls of an empty function 39 s; at 2^18 nodes a
/// 2.5 KB file still took 5 s under ASan).
static constexpr int64_t kMaxInlinedNodes = 1 << 16;
/// Inlining stops with an error once the copied nodes pass this many bytes.
static constexpr uint64_t kMaxInlinedBytes = uint64_t{1} << 28;

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

  /// Stage 1: refuses recursion, nesting past kMaxInlineDepth and a result
  /// over kMaxInlinedNodes nodes and calls, before anything is copied.
  LogicalResult checkCallGraph();

  LogicalResult inlineNode(const onnx::NodeProto &node, int64_t opset,
                           const std::string &function, int depth);

private:
  /// The model-local function `node` calls, or null for a plain node.
  const onnx::FunctionProto *calleeOf(const onnx::NodeProto &node) const;
  /// The nodes and calls `f` expands to (saturating at kMaxInlinedNodes + 1) and the
  /// depth of its calls, memoized; `stack` holds the functions being walked.
  LogicalResult walk(const onnx::FunctionProto *f,
                     std::vector<const onnx::FunctionProto *> &stack);
  LogicalResult tooDeep(const onnx::FunctionProto *outer, const onnx::FunctionProto *inner);

  struct Expansion {
    int64_t nodes = 0;
    int depth = 0; // 1 for a body of plain nodes
  };
  std::map<const onnx::FunctionProto *, Expansion> expansions_;
  /// Calls inlined so far: the n of each body's prefix.
  int64_t calls_ = 0;
  /// Bytes of the nodes copied out of bodies so far.
  uint64_t copiedBytes_ = 0;

  const onnx::ModelProto &model_;
  const llvm::StringMap<int64_t> &opsets_;
  Location fileLoc_;
  std::vector<FlatNode> &nodes_;
  /// Attribute defaults of the functions inlined so far, parsed once each.
  std::map<const onnx::FunctionProto *, std::deque<onnx::AttributeProto>>
      functionDefaults_;
};
} // namespace

const onnx::FunctionProto *FunctionInliner::calleeOf(const onnx::NodeProto &node) const {
  const onnx::FunctionProto *callee = nullptr;
  for (const onnx::FunctionProto &f : model_.functions())
    if (f.name() == node.op_type() &&
        normalizeDomain(f.domain()) == normalizeDomain(node.domain()))
      callee = &f;
  return callee;
}

static int64_t saturatingAdd(int64_t a, int64_t b) {
  return std::min(a + b, kMaxInlinedNodes + 1); // both are at most the limit + 1
}

LogicalResult FunctionInliner::tooDeep(const onnx::FunctionProto *outer,
                                       const onnx::FunctionProto *inner) {
  return emitError(fileLoc_) << "model-local functions call each other more than "
                             << kMaxInlineDepth << " deep (from '" << outer->name()
                             << "' down to '" << inner->name() << "')";
}

LogicalResult FunctionInliner::walk(const onnx::FunctionProto *f,
                                    std::vector<const onnx::FunctionProto *> &stack) {
  if (expansions_.count(f))
    return success();
  auto onStack = std::find(stack.begin(), stack.end(), f);
  if (onStack != stack.end()) {
    std::string cycle;
    for (auto it = onStack; it != stack.end(); ++it)
      cycle += (*it)->name() + " -> ";
    return emitError(fileLoc_) << "model-local function '" << f->name()
                               << "' calls itself: " << cycle << f->name();
  }
  if ((int)stack.size() >= kMaxInlineDepth)
    return tooDeep(stack.front(), f);
  stack.push_back(f);
  Expansion e;
  for (const onnx::NodeProto &node : f->node()) {
    const onnx::FunctionProto *callee = calleeOf(node);
    if (!callee) {
      e.nodes = saturatingAdd(e.nodes, 1);
      e.depth = std::max(e.depth, 1);
      continue;
    }
    if (failed(walk(callee, stack)))
      return failure();
    const Expansion &inner = expansions_[callee];
    // A callee walked before from a shallower caller: its depth is memoized.
    if ((int)stack.size() + inner.depth > kMaxInlineDepth)
      return tooDeep(stack.front(), callee);
    e.nodes = saturatingAdd(e.nodes, saturatingAdd(1, inner.nodes)); // the call, then its body
    e.depth = std::max(e.depth, inner.depth + 1);
  }
  stack.pop_back();
  expansions_[f] = e;
  return success();
}

LogicalResult FunctionInliner::checkCallGraph() {
  // A call must name one body: ONNX identifies a function by domain and name.
  std::set<std::pair<std::string, std::string>> defined;
  for (const onnx::FunctionProto &f : model_.functions())
    if (!defined.emplace(normalizeDomain(f.domain()).str(), f.name()).second)
      return emitError(fileLoc_) << "model-local function '" << f.name() << "' (domain '"
                                 << normalizeDomain(f.domain()) << "') is defined twice";
  int64_t total = 0;
  std::vector<const onnx::FunctionProto *> stack;
  for (const onnx::NodeProto &node : model_.graph().node()) {
    const onnx::FunctionProto *callee = calleeOf(node);
    if (!callee) {
      total = saturatingAdd(total, 1);
      continue;
    }
    if (failed(walk(callee, stack)))
      return failure();
    total = saturatingAdd(total, saturatingAdd(1, expansions_[callee].nodes));
  }
  if (total > kMaxInlinedNodes)
    return emitError(fileLoc_) << "inlining the model-local functions would give more "
                               << "than " << kMaxInlinedNodes << " nodes and calls";
  return success();
}

/// A node whose (domain, op type) names a model-local function is replaced by
/// the function's body: formal inputs and outputs become the call's names,
/// the body's own names get the prefix "<function>.<n>/" (so two calls never
/// share a name, and names do not grow with depth), attributes referring to the call's (ref_attr_name) take its values
/// or the function's defaults. Calls inside the body are inlined in turn.
LogicalResult FunctionInliner::inlineNode(const onnx::NodeProto &node, int64_t opset,
                                          const std::string &function, int depth) {
  const onnx::FunctionProto *callee = calleeOf(node);
  if (!callee) {
    FlatNode &flat = nodes_.emplace_back();
    flat.node = node;
    flat.opset = opset;
    flat.function = function;
    return success();
  }
  // checkCallGraph has bounded the depth; this guards the recursion itself.
  if (depth >= kMaxInlineDepth)
    return emitError(fileLoc_) << "model-local function '" << callee->name()
                               << "' calls functions more than " << kMaxInlineDepth
                               << " deep";

  std::string call = callee->name() + "." + std::to_string(calls_++) + "/";
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
    copiedBytes_ += copy.ByteSizeLong();
    if (copiedBytes_ > kMaxInlinedBytes)
      return emitError(fileLoc_) << "inlining the model-local functions would copy more "
                                 << "than " << kMaxInlinedBytes << " bytes of nodes";
    llvm::StringRef domain = normalizeDomain(copy.domain());
    auto own = calleeOpsets.find(domain);
    int64_t innerOpset = own != calleeOpsets.end() ? own->second : opsets_.lookup(domain);
    if (failed(inlineNode(copy, innerOpset, callee->name(), depth + 1)))
      return failure();
  }
  return success();
}

LogicalResult inlineFunctions(const onnx::ModelProto &model,
                              const llvm::StringMap<int64_t> &opsets, Location fileLoc,
                              std::vector<FlatNode> &nodes) {
  FunctionInliner inliner(model, opsets, fileLoc, nodes);
  if (failed(inliner.checkCallGraph()))
    return failure();
  for (const onnx::NodeProto &node : model.graph().node())
    if (failed(inliner.inlineNode(node, opsets.lookup(normalizeDomain(node.domain())), "",
                                  0)))
      return failure();
  return success();
}

} // namespace megatrain::onnx_import
