//===- FoldTranspose.cpp - mt-fold-transpose: transposes into matmul flags ===//
//
// An exported `x @ W^T` is mt.matmul(x, mt.transpose(W)), and the gradients
// autodiff writes transpose operands and results of products too; each such
// transpose is a full memory pass on the device, while a matmul reads either
// operand transposed for free (its transpose_a / transpose_b flags, cuBLASLt's
// op(A) / op(B)). Two rewrites, to a fixed point:
//
//  - operand: matmul(.., transpose(v, swap), ..) -> matmul(.., v, ..) with
//    the operand's flag toggled;
//  - result: transpose(matmul(a, b, ta, tb), swap), the product's only user,
//    -> matmul(b, a, !tb, !ta), since (op(A) op(B))^T = op(B)^T op(A)^T.
//
// `swap` is a permutation exchanging the last two dims and keeping the
// leading ones in place. Transposes left without users are erased. Every
// output element is the same sum of the same products in the same order
// (the CPU kernel sums over k in increasing order whatever the layout), so
// values do not change.
//
//===----------------------------------------------------------------------===//
#include "megatrain/Passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace megatrain {
#define GEN_PASS_DEF_FOLDTRANSPOSE
#include "megatrain/Passes/Passes.h.inc"
} // namespace megatrain

using namespace mlir;
using namespace megatrain;

namespace {

/// perm = [0, 1, .., n-3, n-1, n-2] with n >= 2.
bool swapsLastTwo(ArrayRef<int64_t> perm) {
  const int64_t n = perm.size();
  if (n < 2)
    return false;
  for (int64_t i = 0; i < n - 2; ++i)
    if (perm[i] != i)
      return false;
  return perm[n - 2] == n - 1 && perm[n - 1] == n - 2;
}

/// The transpose defining `value` when it swaps the last two dims.
mt::TransposeOp swapTransposeOf(Value value) {
  auto transpose = value.getDefiningOp<mt::TransposeOp>();
  if (transpose && swapsLastTwo(transpose.getPerm()))
    return transpose;
  return nullptr;
}

struct FoldTranspose : megatrain::impl::FoldTransposeBase<FoldTranspose> {
  using Base::Base;

  /// Reads each swap-transposed operand of `op` from the transpose's input.
  static bool foldOperands(mt::MatMulOp op) {
    bool changed = false;
    for (bool again = true; again;) {
      again = false;
      if (mt::TransposeOp t = swapTransposeOf(op.getA())) {
        op.getAMutable().assign(t.getX());
        op.setTransposeA(!op.getTransposeA());
        again = changed = true;
      }
      if (mt::TransposeOp t = swapTransposeOf(op.getB())) {
        op.getBMutable().assign(t.getX());
        op.setTransposeB(!op.getTransposeB());
        again = changed = true;
      }
    }
    return changed;
  }

  /// transpose(matmul(a, b, ta, tb)) -> matmul(b, a, !tb, !ta) when the
  /// transpose is the product's only user.
  static bool foldResult(mt::TransposeOp transpose) {
    if (!swapsLastTwo(transpose.getPerm()))
      return false;
    auto product = transpose.getX().getDefiningOp<mt::MatMulOp>();
    if (!product || !product.getResult().hasOneUse())
      return false;
    OpBuilder b(product);
    auto swapped = b.create<mt::MatMulOp>(
        product.getLoc(), transpose.getResult().getType(), product.getB(),
        product.getA(), !product.getTransposeB(), !product.getTransposeA());
    // Keep the product's other attributes (precision and the like).
    for (NamedAttribute attr : product->getAttrs())
      if (attr.getName() != product.getTransposeAAttrName() &&
          attr.getName() != product.getTransposeBAttrName())
        swapped->setAttr(attr.getName(), attr.getValue());
    transpose.getResult().replaceAllUsesWith(swapped.getResult());
    transpose.erase();
    product.erase();
    return true;
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    for (bool changed = true; changed;) {
      changed = false;
      SmallVector<mt::TransposeOp> transposes;
      func.walk([&](mt::TransposeOp op) { transposes.push_back(op); });
      for (mt::TransposeOp op : transposes)
        changed |= foldResult(op);
      func.walk([&](mt::MatMulOp op) { changed |= foldOperands(op); });
    }
    // Erase the transposes left dead, users before what they read.
    SmallVector<mt::TransposeOp> dead;
    func.walk([&](mt::TransposeOp op) { dead.push_back(op); });
    for (mt::TransposeOp op : llvm::reverse(dead))
      if (op->use_empty())
        op.erase();
  }
};

} // namespace
