//===- FuseRotary.cpp - mt-fuse-rotary: rotate-half rotary embedding as one op ===//
//
// torch.onnx.export writes Hugging Face's apply_rotary_pos_emb as
//
//   %a  = mt.mul %x, %cos
//   %x1 = mt.slice %x [..., 0:D/2]      %x2 = mt.slice %x [..., D/2:D]
//   %n  = mt.neg %x2
//   %r  = mt.concat %n, %x1 {axis = last}
//   %b  = mt.mul %r, %sin
//   %y  = mt.add %a, %b
//
// (operands of the muls and the add in either order). When cos and sin are
// constants (the importer folds them: they depend only on positions), keep
// x's last dim and broadcast to x, and every intermediate has no other user,
// the group becomes `%y = mt.rotary %x, %cos, %sin`.
//
//===----------------------------------------------------------------------===//
#include "megatrain/Passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace megatrain {
#define GEN_PASS_DEF_FUSEROTARY
#include "megatrain/Passes/Passes.h.inc"

namespace {

using mlir::Value;

llvm::ArrayRef<int64_t> shapeOf(Value v) {
  return mlir::cast<mlir::RankedTensorType>(v.getType()).getShape();
}

bool isConstant(Value v) { return v.getDefiningOp<mt::ConstantOp>() != nullptr; }

/// A mul of `x`-typed tensor and a constant: (tensor, constant).
std::optional<std::pair<Value, Value>> mulByConstant(Value v) {
  auto mul = v.getDefiningOp<mt::MulOp>();
  if (!mul || !v.hasOneUse())
    return std::nullopt;
  if (isConstant(mul.getRhs()) && mul.getLhs().getType() == v.getType())
    return std::make_pair(mul.getLhs(), mul.getRhs());
  if (isConstant(mul.getLhs()) && mul.getRhs().getType() == v.getType())
    return std::make_pair(mul.getRhs(), mul.getLhs());
  return std::nullopt;
}

/// True if `v` is `x` sliced along its last dim to [begin, end), steps 1,
/// every other dim whole, and read only once.
bool isHalf(Value v, Value x, int64_t begin, int64_t end) {
  auto slice = v.getDefiningOp<mt::SliceOp>();
  if (!slice || slice.getX() != x || !v.hasOneUse())
    return false;
  llvm::ArrayRef<int64_t> shape = shapeOf(x);
  size_t last = shape.size() - 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t b = d == last ? begin : 0, e = d == last ? end : shape[d];
    if (slice.getStarts()[d] != b || slice.getEnds()[d] != e || slice.getSteps()[d] != 1)
      return false;
  }
  return true;
}

/// True if `table` can be rotary's cos or sin for `x`.
bool fitsTable(Value table, Value x) {
  llvm::ArrayRef<int64_t> t = shapeOf(table), s = shapeOf(x);
  auto joint = mt::broadcastShapes(t, s);
  return !t.empty() && t.back() == s.back() && succeeded(joint) &&
         llvm::ArrayRef<int64_t>(*joint) == s &&
         mlir::cast<mlir::RankedTensorType>(table.getType()).getElementType() ==
             mlir::cast<mlir::RankedTensorType>(x.getType()).getElementType();
}

/// Matches `add` as x * cos + rotate_half(x) * sin; rewrites it on success.
bool fuse(mt::AddOp add) {
  for (int order = 0; order < 2; ++order) {
    Value direct = order ? add.getRhs() : add.getLhs();
    Value rotated = order ? add.getLhs() : add.getRhs();
    auto cosTerm = mulByConstant(direct), sinTerm = mulByConstant(rotated);
    if (!cosTerm || !sinTerm)
      continue;
    auto [x, cos] = *cosTerm;
    auto [r, sin] = *sinTerm;
    llvm::ArrayRef<int64_t> shape = shapeOf(x);
    if (shape.empty() || shape.back() % 2 != 0 || add.getResult().getType() != x.getType() ||
        !fitsTable(cos, x) || !fitsTable(sin, x))
      continue;
    auto concat = r.getDefiningOp<mt::ConcatOp>();
    if (!concat || !r.hasOneUse() || concat.getInputs().size() != 2 ||
        (int64_t)concat.getAxis() != (int64_t)shape.size() - 1)
      continue;
    Value negated = concat.getInputs()[0], low = concat.getInputs()[1];
    auto neg = negated.getDefiningOp<mt::NegOp>();
    int64_t half = shape.back() / 2;
    if (!neg || !negated.hasOneUse() || !isHalf(neg.getX(), x, half, shape.back()) ||
        !isHalf(low, x, 0, half))
      continue;

    mlir::OpBuilder b(add);
    auto fused = b.create<mt::RotaryOp>(add.getLoc(), x.getType(), x, cos, sin,
                                        /*bshd=*/mlir::BoolAttr());
    add.getResult().replaceAllUsesWith(fused.getResult());
    mlir::Operation *highSlice = neg.getX().getDefiningOp();
    mlir::Operation *lowSlice = low.getDefiningOp();
    mlir::Operation *cosMul = direct.getDefiningOp(), *sinMul = rotated.getDefiningOp();
    // Users before the values they read.
    add.erase();
    cosMul->erase();
    sinMul->erase();
    concat.erase();
    neg.erase();
    highSlice->erase();
    lowSlice->erase();
    return true;
  }
  return false;
}

struct FuseRotary : impl::FuseRotaryBase<FuseRotary> {
  void runOnOperation() override {
    llvm::SmallVector<mt::AddOp> anchors;
    getOperation().walk([&](mt::AddOp op) { anchors.push_back(op); });
    for (mt::AddOp op : anchors)
      fuse(op);
  }
};

} // namespace
} // namespace megatrain
