//===- Bf16Attention.cpp - mt-bf16-attention: attention on bf16 tensors ----===//
//
// Under --precision bf16, mt-precision marks mt.attention and
// mt.attention_grad precision = "bf16" and leaves their tensors f32: the
// device rounds q, k, v (y, dy) to bf16 around its fused kernel and widens
// the bf16 results it writes back to f32, in copies of its own, and the step
// keeps f32 q, k, v and y alive from the forward to the backward. This pass
// moves those conversions into the graph, where they cost what they save:
//   1. Each such op gets bf16 q, k, v and y (attention_grad: also dy, dq, dk
//      and dv); lse stays f32. Each f32 operand gets one mt.cast to bf16,
//      placed right after its definition and shared by the forward and its
//      gradients; each bf16 result gets an mt.cast back to f32 for readers
//      that want f32.
//   2. Conversions that cancel go: a cast to bf16 of a cast to f32 of a bf16
//      x is x, also through reshapes (the attention output's reshape before
//      the output projection's cast and its weight gradient's, dv's before
//      its products' cast).
//   3. rotary and rotary_grad read a bf16 x in place of its f32 widening, and
//      one whose readers are only bf16 casts (directly or through one
//      reshape) writes bf16 itself.
// The values do not change: the cuDNN kernels read and wrote these bf16
// values before, and a bf16 result is the f32 result rounded to nearest even,
// as mt.cast rounds (docs/ops.md); the CPU kernels round the f32 form's
// operands and results as cuDNN does, so the CPU gives the same bits too. Off
// with megatrain-compile --no-bf16-attention.
//
// Not optimal for: the casts of operands a matmul produces (v, dy) stay
// kernels of their own (a matmul with a bf16 result would write them).
//
//===----------------------------------------------------------------------===//
#include "CastReaders.h"

#include "megatrain/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"

namespace megatrain {
#define GEN_PASS_DEF_BF16ATTENTION
#include "megatrain/Passes/Passes.h.inc"
} // namespace megatrain

using namespace mlir;
using namespace megatrain;

namespace {

RankedTensorType withElement(Value value, Type element) {
  return RankedTensorType::get(cast<RankedTensorType>(value.getType()).getShape(), element);
}

/// The bf16 value an f32 `value` widens exactly (a cast from bf16), or null.
Value widened(Value value) {
  Operation *def = value.getDefiningOp();
  return isBf16Cast(def, /*toBf16=*/false) ? cast<mt::CastOp>(def).getX() : Value();
}

/// An attention op this pass rewrites: precision bf16, every tensor f32.
bool candidate(Operation *op) {
  auto precision = op->getAttrOfType<StringAttr>("precision");
  if (!precision || precision.getValue() != "bf16")
    return false;
  auto f32 = [](Value value) { return getElementTypeOrSelf(value).isF32(); };
  return llvm::all_of(op->getOperands(), f32) && llvm::all_of(op->getResults(), f32);
}

struct Bf16Attention : megatrain::impl::Bf16AttentionBase<Bf16Attention> {
  using Base::Base;

  /// One bf16 cast per f32 value, right after its definition.
  DenseMap<Value, Value> narrowed;

  Value bf16Of(Value value) {
    if (Value source = widened(value))
      return source;
    auto [it, inserted] = narrowed.try_emplace(value);
    if (inserted) {
      OpBuilder b(value.getContext());
      b.setInsertionPointAfterValue(value);
      it->second = b.create<mt::CastOp>(value.getLoc(), withElement(value, b.getBF16Type()), value);
    }
    return it->second;
  }

  /// `op` rebuilt with bf16 operands (lse kept) and bf16 results but lse;
  /// every old result is replaced by the new one or its f32 widening.
  void retype(Operation *op) {
    OpBuilder b(op);
    Type bf16 = b.getBF16Type();
    SmallVector<Value> operands;
    for (Value operand : op->getOperands())
      operands.push_back(getElementTypeOrSelf(operand).isF32() && !isLse(op, operand) ? bf16Of(operand) : operand);
    SmallVector<Type> types;
    for (OpResult result : op->getResults())
      types.push_back(isLse(op, result) ? result.getType() : withElement(result, bf16));
    OperationState state(op->getLoc(), op->getName(), operands, types, op->getAttrs());
    Operation *rebuilt = b.create(state);
    b.setInsertionPointAfter(rebuilt);
    for (auto [old, now] : llvm::zip(op->getResults(), rebuilt->getResults())) {
      if (old.getType() == now.getType()) {
        old.replaceAllUsesWith(now);
        continue;
      }
      if (old.use_empty())
        continue;
      old.replaceAllUsesWith(b.create<mt::CastOp>(op->getLoc(), old.getType(), now).getResult());
    }
    op->erase();
  }

  static bool isLse(Operation *op, Value value) {
    if (auto attention = dyn_cast<mt::AttentionOp>(op))
      return value == attention.getLse();
    return value == cast<mt::AttentionGradOp>(op).getLse();
  }

  /// Casts to bf16 of a bf16 value's widening, directly or through
  /// reshapes, become the value (reshaped).
  void cancelRoundTrips(func::FuncOp func) {
    SmallVector<mt::CastOp> casts;
    func.walk([&](mt::CastOp op) {
      if (isBf16Cast(op, /*toBf16=*/true))
        casts.push_back(op);
    });
    for (mt::CastOp op : casts) {
      Value x = op.getX();
      if (Value source = widened(x)) {
        op.getResult().replaceAllUsesWith(source);
        op.erase();
        continue;
      }
      // Through a chain of reshapes (a weight gradient views the attention
      // output's [B, S, H D] view as [B S, H D]).
      Value source;
      for (auto reshape = x.getDefiningOp<mt::ReshapeOp>(); reshape && !source;
           reshape = reshape.getX().getDefiningOp<mt::ReshapeOp>())
        source = widened(reshape.getX());
      if (!source)
        continue;
      OpBuilder b(op);
      auto narrow = b.create<mt::ReshapeOp>(op.getLoc(), op.getResult().getType(), source);
      op.getResult().replaceAllUsesWith(narrow.getResult());
      op.erase();
    }
  }

  /// rotary and rotary_grad: read bf16 sources in place of their widening;
  /// write bf16 when every reader is a bf16 cast, directly or through
  /// reshapes (which then move bf16).
  void narrowRotary(Operation *op) {
    OpOperand &x = op->getOpOperand(0);
    if (Value source = widened(x.get()))
      x.set(source);
    Value result = op->getResult(0);
    if (CastReaders readers = castReadersOf(result); readers.any())
      narrowToBf16(result, readers);
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    narrowed.clear();
    auto precision = func->getAttrOfType<StringAttr>(mt::attr::kPrecision);
    if (!precision || precision.getValue() != "bf16")
      return;
    SmallVector<Operation *> ops;
    func.walk([&](Operation *op) {
      if (isa<mt::AttentionOp, mt::AttentionGradOp>(op) && candidate(op))
        ops.push_back(op);
    });
    if (ops.empty())
      return;
    for (Operation *op : ops)
      retype(op);
    cancelRoundTrips(func);
    SmallVector<Operation *> rotaries;
    func.walk([&](Operation *op) {
      if (isa<mt::RotaryOp, mt::RotaryGradOp>(op))
        rotaries.push_back(op);
    });
    for (Operation *op : rotaries)
      narrowRotary(op);
    cancelRoundTrips(func);
    // The widenings and reshapes nothing reads any more.
    SmallVector<Operation *> conversions;
    func.walk([&](Operation *op) {
      if (isa<mt::CastOp, mt::ReshapeOp>(op))
        conversions.push_back(op);
    });
    for (Operation *op : llvm::reverse(conversions))
      if (op->use_empty())
        op->erase();
  }
};

} // namespace
