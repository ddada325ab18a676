//===- ViewAliases.cpp - mt-view-aliases: reshapes that are views, not copies ===//
//
// A reshape (ONNX Reshape, Flatten, Squeeze and Unsqueeze all import as
// mt.reshape) keeps every element at its row-major position, and so does a
// transpose that only moves dims of extent 1: the result's bytes are its
// input's. Emitted as a kernel, each is a full copy through device memory
// (about 40 ms of a 1.36B 16k-token step on the H200). This pass marks each
// such op `mt.alias`: mt-plan-memory then gives its result its base's bytes
// (the base's lifetime grows to the union of the group's) and plan emission
// writes a view tensor (Tensor.alias_of) and no step. docs/compiler.md
// ("Views") states the rules; in short:
//
//   1. Candidates: every mt.reshape, and every mt.transpose whose perm keeps
//      the dims of extent > 1 in increasing order.
//   2. The operand must be a device value: an op result other than an
//      mt.offload's (that one lives in the host staging pool). A view of a
//      view is fine: its base is the first value of the chain.
//   3. The result's byte size must equal the operand's (the dialect's
//      verifiers already promise it; checked, never assumed).
//
// Values are SSA: no op writes its operand, so no in-place writer can reach
// a base while its view lives; the plan verifier checks that on the plan.
// The pass runs after mt-tier: tiering decided on the step with copies,
// whose peak is no lower than the views' (a group holds its base's bytes
// once over the union of the lifetimes, where the copies held them twice
// over the overlap), so its budget still holds. An offload or a prefetch
// reads or defines a value like any op; a recomputed reshape is a view of
// the recomputed value.
//
//===----------------------------------------------------------------------===//
#include "megatrain/Passes/Passes.h"

#include "mlir/IR/Builders.h"

#include <optional>

namespace megatrain {
#define GEN_PASS_DEF_VIEWALIASES
#include "megatrain/Passes/Passes.h.inc"

namespace {

/// Whether `perm` moves only dims of extent 1 of `shape` (the input's).
bool keepsMemoryOrder(llvm::ArrayRef<int64_t> perm, llvm::ArrayRef<int64_t> shape) {
  int64_t previous = -1;
  for (int64_t dim : perm) {
    if (dim < 0 || dim >= static_cast<int64_t>(shape.size()))
      return false;
    if (shape[dim] == 1)
      continue;
    if (dim < previous)
      return false;
    previous = dim;
  }
  return true;
}

std::optional<uint64_t> bytesOf(mlir::Type type) {
  auto tensor = mlir::dyn_cast<mlir::RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape() || !tensor.getElementType().isIntOrFloat())
    return std::nullopt;
  return ((tensor.getElementType().getIntOrFloatBitWidth() + 7) / 8) *
         static_cast<uint64_t>(tensor.getNumElements());
}

/// Stages 1 to 3 for one op.
bool isView(mlir::Operation *op) {
  if (auto transpose = mlir::dyn_cast<mt::TransposeOp>(op)) {
    auto input = mlir::dyn_cast<mlir::RankedTensorType>(transpose.getX().getType());
    if (!input || !keepsMemoryOrder(transpose.getPerm(), input.getShape()))
      return false;
  } else if (!mlir::isa<mt::ReshapeOp>(op)) {
    return false;
  }
  mlir::Value operand = op->getOperand(0);
  mlir::Operation *def = operand.getDefiningOp();
  if (!def || mlir::isa<mt::OffloadOp>(def))
    return false;
  std::optional<uint64_t> in = bytesOf(operand.getType());
  std::optional<uint64_t> out = bytesOf(op->getResult(0).getType());
  return in && out && *in == *out;
}

struct ViewAliases : impl::ViewAliasesBase<ViewAliases> {
  using ViewAliasesBase::ViewAliasesBase;

  void runOnOperation() override {
    mlir::UnitAttr unit = mlir::UnitAttr::get(&getContext());
    getOperation().walk([&](mlir::Operation *op) {
      if (isView(op))
        op->setAttr(mt::attr::kAlias, unit);
      else
        op->removeAttr(mt::attr::kAlias);
    });
  }
};

} // namespace

} // namespace megatrain
