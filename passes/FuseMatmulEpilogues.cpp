//===- FuseMatmulEpilogues.cpp - mt-fuse-matmul-epilogues: residual adds into their products ===//
//
// A Llama block adds the o_proj and down_proj products to the residual
// stream, autodiff sums the gradients of a value read by several products
// (dX = dY1 W1^T + dY2 W2^T + ...), and a linear layer with a bias adds it
// to its product: each is an mt.add that reads a product the matmul just
// wrote. cuBLASLt adds a matrix C (D = A B + beta C, beta = 1) or a bias
// vector (its BIAS epilogue) to the product in the same kernel, so the
// product never makes the round trip through memory and the add's launch is
// gone. This pass writes add(matmul(a, b), r) as one mt.matmul_add(a, b, r).
//
// It runs on the whole training step after mt-precision and
// mt-fold-transpose (the products have their bf16 operands, precision and
// transpose flags) and before mt-fuse-pointwise (which would otherwise take
// the add into an elementwise chain). In one walk over the adds, in program
// order:
//   1. Candidates: the add's operands that are mt.matmul results whose only
//      reader is this add (a product also read elsewhere must be written
//      anyway), of the add's result type and an f32 or f64 element type (the
//      kernels' accumulator types); the other operand, r, of the same type
//      (cuBLASLt's C has D's layout), or, for f32, a bias: rank 1, the
//      product's last dim (cuBLASLt's bias vector; Dgemm has none, so not
//      f64). Any other broadcast is not fused. add(p, p) is not one.
//   2. Of two candidates, the one whose r is defined before it (the later
//      product) is taken: then the fused op stands where that matmul stood,
//      and the add's operands do not live longer. A candidate whose r comes
//      after it puts the fused op where the add stood (its a and b live on
//      to there, as the add's operands did).
//   3. The fused op keeps the matmul's flags and precision; the add's
//      result is replaced by it and both ops are erased.
//
// The values do not change: y = A B + r is, per element, the product's
// accumulator rounded to y's type plus r, rounded once, exactly as the add
// of the rounded product (docs/ops.md "Matmul epilogues").
//
// Not optimal for: an activation after the product and its bias (GELU),
// which cuBLASLt's GELU_AUX_BIAS epilogue could take too; a product whose f32
// result is only cast to bf16 (an epilogue could write bf16 directly); a sum
// of two products with other readers; a bias added after a reshape of the
// product.
//
//===----------------------------------------------------------------------===//
#include "megatrain/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"

namespace megatrain {
#define GEN_PASS_DEF_FUSEMATMULEPILOGUES
#include "megatrain/Passes/Passes.h.inc"
} // namespace megatrain

using namespace mlir;
using namespace megatrain;

namespace {

/// The product defining `value` when its result can take an addend of the
/// add `sum`'s type in its epilogue.
mt::MatMulOp fusableProduct(Value value, mt::AddOp sum) {
  auto product = value.getDefiningOp<mt::MatMulOp>();
  if (!product || !product.getResult().hasOneUse())
    return nullptr;
  if (product.getResult().getType() != sum.getResult().getType())
    return nullptr;
  Type element = cast<RankedTensorType>(value.getType()).getElementType();
  if (!element.isF32() && !element.isF64())
    return nullptr;
  return product;
}

/// Whether `addend` can be added to a product of type `result` in its
/// epilogue: the same type, or an f32 bias over the last dim.
bool fusableAddend(Value addend, Type result) {
  if (addend.getType() == result)
    return true;
  auto r = cast<RankedTensorType>(addend.getType());
  auto y = cast<RankedTensorType>(result);
  return r.getRank() == 1 && y.getRank() >= 1 && r.getDimSize(0) == y.getShape().back() &&
         r.getElementType() == y.getElementType() && y.getElementType().isF32();
}

struct FuseMatmulEpilogues
    : megatrain::impl::FuseMatmulEpiloguesBase<FuseMatmulEpilogues> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    DominanceInfo dominance(func);
    SmallVector<mt::AddOp> adds;
    func.walk([&](mt::AddOp op) { adds.push_back(op); });
    for (mt::AddOp sum : adds) {
      Value lhs = sum.getLhs(), rhs = sum.getRhs();
      if (lhs == rhs)
        continue;
      mt::MatMulOp product;
      Value addend;
      Operation *at = nullptr;
      for (auto [candidate, other] : {std::pair(lhs, rhs), std::pair(rhs, lhs)}) {
        mt::MatMulOp p = fusableProduct(candidate, sum);
        if (!p || !fusableAddend(other, sum.getResult().getType()))
          continue;
        bool before = dominance.properlyDominates(other, p);
        if (!product || (before && at == sum.getOperation())) {
          product = p;
          addend = other;
          at = before ? p.getOperation() : sum.getOperation();
        }
      }
      if (!product)
        continue;
      OpBuilder b(at);
      auto fused = b.create<mt::MatMulAddOp>(
          b.getFusedLoc({product.getLoc(), sum.getLoc()}), sum.getResult().getType(),
          product.getA(), product.getB(), addend, product.getTransposeA(),
          product.getTransposeB());
      // The product's discardable attributes (precision) go with it.
      for (NamedAttribute attr : product->getDiscardableAttrs())
        fused->setAttr(attr.getName(), attr.getValue());
      sum.getResult().replaceAllUsesWith(fused.getResult());
      sum.erase();
      product.erase();
    }
  }
};

} // namespace
