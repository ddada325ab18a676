//===- FuseMatmulEpilogues.cpp - mt-fuse-matmul-epilogues: residual adds, biases, GELU and its backward into their products ===//
//
// A Llama block adds the o_proj and down_proj products to the residual
// stream, autodiff sums the gradients of a value read by several products
// (dX = dY1 W1^T + dY2 W2^T + ...), and a linear layer with a bias adds it
// to its product: each is an mt.add that reads a product the matmul just
// wrote. cuBLASLt adds a matrix C (D = A B + beta C, beta = 1) or a bias
// vector (its BIAS epilogue) to the product in the same kernel, so the
// product never makes the round trip through memory and the add's launch is
// gone. This pass writes add(matmul(a, b), r) as one mt.matmul_add(a, b, r),
// and a tanh GELU of a biased product (GPT-2's c_fc) as one
// mt.matmul_bias_gelu(a, b, bias), which cuBLASLt's GELU_AUX_BIAS epilogue
// runs, writing the pre-activation the backward reads beside the GELU; and
// the GELU's backward of a product, gelu_grad(z, matmul(a, b)), as one
// mt.matmul_gelu_grad(a, b, z), which cuBLASLt's DGELU epilogue runs,
// reading z as its aux matrix.
//
// It runs on the whole training step after mt-precision and
// mt-fold-transpose (the products have their bf16 operands, precision and
// transpose flags) and before mt-fuse-pointwise (which would otherwise take
// the add or the GELU into an elementwise chain). First one walk over the
// adds, in program order:
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
// Then one walk over the GELUs:
//   4. A gelu {approximate = "tanh"} (the erf form has no epilogue) whose
//      operand is an f32 mt.matmul_add with a bias, directly or through
//      reshapes (GPT-2's Conv1D multiplies [B*T, C] and reshapes to
//      [B, T, 4C]), when the sum's every reader, through those reshapes, is
//      this gelu or a tanh gelu_grad reading it as its x (the backward's:
//      the pre-activation z it needs). Anything else reading z would make
//      the fused op write what it writes anyway, and is left unfused. So is
//      a gelu read only by casts to bf16 (directly or through reshapes: the
//      bf16 plans' next product reads it so): unfused, mt-fuse-pointwise
//      makes the gelu and the cast one program that reads z and writes
//      bf16 (10 bytes an element with the sum's write), where the fused op
//      would write an f32 y for the cast to read (14 bytes).
//   5. mt.matmul_bias_gelu stands where the sum stood, with its flags and
//      precision; its z replaces the sum (the reshapes and the gelu_grads
//      read it as before), and its y, reshaped as the gelu's operand was,
//      replaces the gelu.
// Then one walk over the gelu_grads (after the GELUs: a fused backward
// reading z would otherwise stop its forward from fusing):
//   6. A gelu_grad {approximate = "tanh"} whose dy is an f32 mt.matmul,
//      directly or through reshapes, that nothing but that chain reads (the
//      product is then never needed by itself). GPT-2: dy is c_proj's input
//      gradient dY W^T, reshaped to [B, T, 4C].
//   7. z is the gelu_grad's x in the product's shape: x, or the value of
//      that shape under x's reshapes (matmul_bias_gelu's z in GPT-2), else a
//      new reshape of x. mt.matmul_gelu_grad(a, b, z) stands where the
//      product stood when z is defined before it (as in step 2), else where
//      the gelu_grad stood; its result, reshaped as the gelu_grad's was,
//      replaces the gelu_grad; the product, its reshapes and x's reshapes
//      left unread are erased.
//
// The values do not change: y = A B + r is, per element, the product's
// accumulator rounded to y's type plus r, rounded once, exactly as the add
// of the rounded product, the fused GELU is gelu's expression of that sum,
// and the fused backward gelu_grad's of the rounded product (docs/ops.md
// "Matmul epilogues").
//
// Not optimal for: the bias gradient of the GELU's backward (the sum_to of
// matmul_gelu_grad's result, which cuBLASLt's DGELU_BGRAD could write: not
// used, docs/ops.md says why); a product whose f32 result is only cast to
// bf16 (an epilogue could write bf16 directly); a sum of two products with
// other readers; a bias added after a reshape of the product.
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

/// Whether every reader of `value`, through reshapes, is a cast to bf16 (and
/// there is one).
bool onlyCastToBf16(Value value) {
  bool any = false;
  for (Operation *reader : value.getUsers()) {
    if (auto reshape = dyn_cast<mt::ReshapeOp>(reader)) {
      if (!onlyCastToBf16(reshape.getResult()))
        return false;
      any = true;
      continue;
    }
    auto narrow = dyn_cast<mt::CastOp>(reader);
    if (!narrow ||
        !cast<RankedTensorType>(narrow.getResult().getType()).getElementType().isBF16())
      return false;
    any = true;
  }
  return any;
}

/// The biased f32 sum under `gelu`'s operand (through reshapes) when its
/// every reader is that gelu or a tanh gelu_grad reading it as x, else null.
mt::MatMulAddOp fusableGeluProduct(mt::GeluOp gelu) {
  if (gelu.getApproximate() != "tanh" || onlyCastToBf16(gelu.getResult()))
    return nullptr;
  Value value = gelu.getX();
  while (auto reshape = value.getDefiningOp<mt::ReshapeOp>())
    value = reshape.getX();
  auto sum = value.getDefiningOp<mt::MatMulAddOp>();
  if (!sum)
    return nullptr;
  auto y = cast<RankedTensorType>(sum.getResult().getType());
  if (!y.getElementType().isF32() || sum.getR().getType() == y ||
      cast<RankedTensorType>(sum.getR().getType()).getRank() != 1)
    return nullptr;
  // Every reader of z, through reshapes: the gelu, or a gelu_grad's x.
  SmallVector<Value> values{sum.getResult()};
  while (!values.empty()) {
    Value z = values.pop_back_val();
    for (OpOperand &use : z.getUses()) {
      Operation *reader = use.getOwner();
      if (auto reshape = dyn_cast<mt::ReshapeOp>(reader)) {
        values.push_back(reshape.getResult());
        continue;
      }
      if (reader == gelu.getOperation())
        continue;
      // A backward already fused (the pass run again) reads z as its z.
      if (auto fusedGrad = dyn_cast<mt::MatMulGeluGradOp>(reader);
          fusedGrad && use.getOperandNumber() == 2)
        continue;
      auto grad = dyn_cast<mt::GeluGradOp>(reader);
      if (!grad || grad.getApproximate() != "tanh" || grad.getX() != z || grad.getDy() == z)
        return nullptr;
    }
  }
  return sum;
}

/// Writes gelu(reshapes of sum) as mt.matmul_bias_gelu at the sum's place.
void fuseGelu(mt::GeluOp gelu, mt::MatMulAddOp sum) {
  OpBuilder b(sum);
  Type type = sum.getResult().getType();
  auto fused = b.create<mt::MatMulBiasGeluOp>(
      b.getFusedLoc({sum.getLoc(), gelu.getLoc()}), TypeRange{type, type}, sum.getA(),
      sum.getB(), sum.getR(), sum.getTransposeA(), sum.getTransposeB());
  for (NamedAttribute attr : sum->getDiscardableAttrs())
    fused->setAttr(attr.getName(), attr.getValue());
  sum.getResult().replaceAllUsesWith(fused.getZ());
  sum.erase();
  Value y = fused.getY();
  if (y.getType() != gelu.getResult().getType()) {
    b.setInsertionPoint(gelu);
    y = b.create<mt::ReshapeOp>(gelu.getLoc(), gelu.getResult().getType(), y);
  }
  gelu.getResult().replaceAllUsesWith(y);
  gelu.erase();
}

/// The f32 product under `grad`'s dy (through reshapes) when that chain is
/// its only reader and `grad` is a tanh gelu_grad, else null.
mt::MatMulOp fusableGeluGradProduct(mt::GeluGradOp grad) {
  if (grad.getApproximate() != "tanh" || !grad.getDy().hasOneUse())
    return nullptr;
  Value value = grad.getDy();
  while (auto reshape = value.getDefiningOp<mt::ReshapeOp>()) {
    value = reshape.getX();
    if (!value.hasOneUse())
      return nullptr;
  }
  auto product = value.getDefiningOp<mt::MatMulOp>();
  if (!product ||
      !cast<RankedTensorType>(product.getResult().getType()).getElementType().isF32())
    return nullptr;
  return product;
}

/// Writes gelu_grad(x, reshapes of product) as mt.matmul_gelu_grad with z =
/// x in the product's shape (x itself or a value under its reshapes, else a
/// new reshape of x), at the product's place when z is defined before it,
/// else at the gelu_grad's.
void fuseGeluGrad(mt::GeluGradOp grad, mt::MatMulOp product, DominanceInfo &dominance) {
  Type type = product.getResult().getType();
  Value z = grad.getX();
  for (Value v = z;;) {
    if (v.getType() == type) {
      z = v;
      break;
    }
    auto reshape = v.getDefiningOp<mt::ReshapeOp>();
    if (!reshape)
      break;
    v = reshape.getX();
  }
  Operation *at = dominance.properlyDominates(z, product) ? product.getOperation()
                                                          : grad.getOperation();
  OpBuilder b(at);
  if (z.getType() != type)
    z = b.create<mt::ReshapeOp>(grad.getLoc(), type, z);
  auto fused = b.create<mt::MatMulGeluGradOp>(
      b.getFusedLoc({product.getLoc(), grad.getLoc()}), type, product.getA(), product.getB(), z,
      product.getTransposeA(), product.getTransposeB());
  for (NamedAttribute attr : product->getDiscardableAttrs())
    fused->setAttr(attr.getName(), attr.getValue());
  Value dz = fused.getDz();
  if (dz.getType() != grad.getResult().getType()) {
    b.setInsertionPoint(grad);
    dz = b.create<mt::ReshapeOp>(grad.getLoc(), grad.getResult().getType(), dz);
  }
  grad.getResult().replaceAllUsesWith(dz);
  // The gelu_grad, then the chain of reshapes from the product, each now
  // unread, and the reshapes from z to x that nothing else reads.
  Value dy = grad.getDy(), x = grad.getX();
  grad.erase();
  while (auto reshape = dy.getDefiningOp<mt::ReshapeOp>()) {
    dy = reshape.getX();
    reshape.erase();
  }
  product.erase();
  while (x != z && x.use_empty()) {
    auto reshape = x.getDefiningOp<mt::ReshapeOp>();
    if (!reshape)
      break;
    x = reshape.getX();
    reshape.erase();
  }
}

struct FuseMatmulEpilogues
    : megatrain::impl::FuseMatmulEpiloguesBase<FuseMatmulEpilogues> {
  using Base::Base;

  void runOnOperation() override {
    fuseAdds();
    SmallVector<mt::GeluOp> gelus;
    getOperation().walk([&](mt::GeluOp op) { gelus.push_back(op); });
    for (mt::GeluOp gelu : gelus)
      if (mt::MatMulAddOp sum = fusableGeluProduct(gelu))
        fuseGelu(gelu, sum);
    SmallVector<mt::GeluGradOp> grads;
    getOperation().walk([&](mt::GeluGradOp op) { grads.push_back(op); });
    DominanceInfo dominance(getOperation());
    for (mt::GeluGradOp grad : grads)
      if (mt::MatMulOp product = fusableGeluGradProduct(grad))
        fuseGeluGrad(grad, product, dominance);
  }

  void fuseAdds() {
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
