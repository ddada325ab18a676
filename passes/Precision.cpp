//===- Precision.cpp - mt-precision: the compute precision of products ----===//
//
// fp32: nothing but the function's mt.precision. tf32: precision = "tf32" on
// every f32 matmul, attention and attention_grad. bf16: the operands of
// every f32 matmul go through one mt.cast to bf16 per distinct value, placed
// right after the value's definition (so the f32 original may die while its
// bf16 copy lives on); the matmul keeps its f32 result (fp32 accumulation).
// An f32 mt.param whose every use is such a cast becomes a bf16 mt.param
// and the casts fold away; mt.master_element = f32 tells plan emission to
// fetch it from the host bf16 compute copy of the parameter. Attention keeps
// f32 operands and gets precision = "bf16". linear_ce and linear_ce_grad are
// products too: their hidden and weight are cast as a matmul's operands.
//
//===----------------------------------------------------------------------===//
#include "megatrain/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace megatrain {
#define GEN_PASS_DEF_PRECISION
#include "megatrain/Passes/Passes.h.inc"
} // namespace megatrain

using namespace mlir;
using namespace megatrain;

namespace {

bool isF32(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && type.getElementType().isF32();
}

bool allF32(Operation *op) {
  for (Value operand : op->getOperands())
    if (!isF32(operand))
      return false;
  for (Value result : op->getResults())
    if (!isF32(result))
      return false;
  return true;
}

bool isCastToBf16(Operation *op) {
  auto cast = dyn_cast<mt::CastOp>(op);
  if (!cast)
    return false;
  auto type = dyn_cast<RankedTensorType>(cast.getResult().getType());
  return type && type.getElementType().isBF16();
}

struct Precision : megatrain::impl::PrecisionBase<Precision> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (precision != "fp32" && precision != "tf32" && precision != "bf16") {
      func.emitError("invalid mt-precision option precision=")
          << precision << " (fp32, tf32 or bf16)";
      return signalPassFailure();
    }
    Builder builder(func.getContext());
    func->setAttr(mt::attr::kPrecision, builder.getStringAttr(precision));
    if (precision == "fp32")
      return;
    StringAttr mark = builder.getStringAttr(precision);

    // Attention: f32 operands, products at the chosen precision inside.
    func.walk([&](Operation *op) {
      if (isa<mt::AttentionOp, mt::AttentionGradOp>(op) && allF32(op) &&
          !op->hasAttr("precision"))
        op->setAttr("precision", mark);
    });
    if (precision == "tf32") {
      func.walk([&](mt::MatMulOp op) {
        if (allF32(op) && !op->hasAttr("precision"))
          op->setAttr("precision", mark);
      });
      func.walk([&](Operation *op) {
        if (isa<mt::LinearCrossEntropyOp, mt::LinearCrossEntropyGradOp>(op) &&
            isF32(op->getOperand(0)) && !op->hasAttr("precision"))
          op->setAttr("precision", mark);
      });
      return;
    }
    castMatmulOperands(func, mark);
    hoistCastsToParams(func);
    foldParamCasts(func);
  }

  /// A value an mt.param reaches through transposes and reshapes only.
  static bool fromParam(Value value) {
    Operation *def = value.getDefiningOp();
    if (!def)
      return false;
    if (isa<mt::ParamOp>(def))
      return true;
    return isa<mt::TransposeOp, mt::ReshapeOp>(def) && fromParam(def->getOperand(0));
  }

  /// A cast to bf16 of a transpose or reshape (its only use) of a parameter
  /// casts the parameter instead and moves the layout op to bf16: the same
  /// elements move, and the parameter becomes a bf16 fetch (an exported
  /// `x @ W^T` reads W through a transpose).
  void hoistCastsToParams(func::FuncOp func) {
    for (bool changed = true; changed;) {
      changed = false;
      SmallVector<mt::CastOp> casts;
      func.walk([&](mt::CastOp cast) {
        if (isCastToBf16(cast))
          casts.push_back(cast);
      });
      for (mt::CastOp castOp : casts) {
        Operation *layout = castOp.getX().getDefiningOp();
        if (!layout || !isa<mt::TransposeOp, mt::ReshapeOp>(layout) ||
            !layout->getResult(0).hasOneUse())
          continue;
        Value source = layout->getOperand(0);
        if (!isF32(source) || !fromParam(source))
          continue;
        OpBuilder b(layout);
        b.setInsertionPointAfterValue(source);
        auto sourceType = cast<RankedTensorType>(source.getType());
        Value bf16 = b.create<mt::CastOp>(
            castOp.getLoc(), RankedTensorType::get(sourceType.getShape(), b.getBF16Type()),
            source);
        b.setInsertionPoint(layout);
        Operation *moved = b.clone(*layout);
        moved->setOperand(0, bf16);
        auto resultType = cast<RankedTensorType>(layout->getResult(0).getType());
        moved->getResult(0).setType(
            RankedTensorType::get(resultType.getShape(), b.getBF16Type()));
        castOp.getResult().replaceAllUsesWith(moved->getResult(0));
        castOp.erase();
        layout->erase();
        changed = true;
      }
    }
  }

  /// bf16: every f32 matmul reads bf16 casts of its operands; linear_ce and
  /// linear_ce_grad read bf16 casts of hidden and weight (their first two
  /// operands), their results stay f32.
  void castMatmulOperands(func::FuncOp func, StringAttr mark) {
    SmallVector<Operation *> matmuls;
    func.walk([&](Operation *op) {
      if (isa<mt::MatMulOp>(op) && allF32(op))
        matmuls.push_back(op);
      else if (isa<mt::LinearCrossEntropyOp, mt::LinearCrossEntropyGradOp>(op) &&
               isF32(op->getOperand(0)) && isF32(op->getOperand(1)))
        matmuls.push_back(op);
    });
    llvm::DenseMap<Value, Value> casts;
    for (Operation *op : matmuls) {
      unsigned products = isa<mt::MatMulOp>(op) ? op->getNumOperands() : 2;
      for (OpOperand &operand : op->getOpOperands().take_front(products)) {
        Value value = operand.get();
        Value &bf16 = casts[value];
        if (!bf16) {
          OpBuilder b(op);
          if (Operation *def = value.getDefiningOp())
            b.setInsertionPointAfter(def);
          else
            b.setInsertionPointToStart(value.getParentBlock());
          auto type = cast<RankedTensorType>(value.getType());
          bf16 = b.create<mt::CastOp>(
              value.getLoc(), RankedTensorType::get(type.getShape(), b.getBF16Type()),
              value);
        }
        operand.set(bf16);
      }
      op->setAttr("precision", mark);
    }
  }

  /// An f32 mt.param read only through casts to bf16 becomes a bf16 fetch.
  void foldParamCasts(func::FuncOp func) {
    SmallVector<mt::ParamOp> params(func.getOps<mt::ParamOp>());
    for (mt::ParamOp param : params) {
      Value result = param.getResult();
      if (!isF32(result) || result.use_empty())
        continue;
      if (!llvm::all_of(result.getUsers(), isCastToBf16))
        continue;
      SmallVector<Operation *> users(result.getUsers());
      auto type = cast<RankedTensorType>(result.getType());
      Builder b(param);
      result.setType(RankedTensorType::get(type.getShape(), b.getBF16Type()));
      param->setAttr(mt::attr::kMasterElement, TypeAttr::get(type.getElementType()));
      for (Operation *user : users) {
        user->getResult(0).replaceAllUsesWith(result);
        user->erase();
      }
    }
  }
};

} // namespace
