//===- FunctionInliner.h - inlines model-local ONNX functions ---------------===//
//
// Internal to the ONNX importer. torch.onnx.export writes some modules as
// model-local functions (ModelProto.functions); the importer sees none of
// them: every call is replaced by the function's body before any node is
// imported, so the op importers and the folder only ever meet plain nodes.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_FRONTEND_FUNCTIONINLINER_H
#define MEGATRAIN_FRONTEND_FUNCTIONINLINER_H

#include "mlir/IR/Location.h"
#include "mlir/Support/LogicalResult.h"
#include "onnx/onnx.pb.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace megatrain::onnx_import {

/// The default domain's name; ONNX also spells it "".
inline constexpr llvm::StringLiteral kDefaultDomain = "ai.onnx";
/// `domain` with "" spelled kDefaultDomain, so that both spellings match.
inline llvm::StringRef normalizeDomain(llvm::StringRef domain) {
  return domain.empty() ? llvm::StringRef(kDefaultDomain) : domain;
}

/// One node to import: a graph node, or a node of an inlined model-local
/// function with its names made unique.
struct FlatNode {
  onnx::NodeProto node;
  int64_t opset = 0;
  /// The function the node was inlined from ("" for graph nodes).
  std::string function;
};

/// The graph's nodes in order, every call of a model-local function replaced
/// by the function's body (docs/frontends.md, "Model-local functions and
/// sequences"). `opsets` maps each normalized domain to the model's opset.
/// An error at `fileLoc` when calls nest too deep.
mlir::LogicalResult inlineFunctions(const onnx::ModelProto &model,
                                    const llvm::StringMap<int64_t> &opsets,
                                    mlir::Location fileLoc, std::vector<FlatNode> &nodes);

} // namespace megatrain::onnx_import

#endif // MEGATRAIN_FRONTEND_FUNCTIONINLINER_H
