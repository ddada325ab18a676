//===- FusionMatch.h - matchers over mt ops shared by the fusion passes ---===//
//
// The fusion passes (FuseLayerNorm.cpp, FuseRmsNorm.cpp, FuseActivations.cpp)
// recognize compositions of mt ops as the importer writes them. A pattern is
// rewritten only when each of its intermediate values is used by the pattern
// alone; these helpers answer that and read the scalar constants involved.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_PASSES_FUSIONMATCH_H
#define MEGATRAIN_PASSES_FUSIONMATCH_H

#include "megatrain/Dialect/MtDialect.h"

#include "mlir/IR/PatternMatch.h"

#include <optional>

namespace megatrain::fusion {

/// Relative tolerance for constants: the exporters write them in f32.
constexpr double kConstantTolerance = 1e-6;

/// The one value of a tensor whose elements are all equal, when it is an
/// mt.constant (splat) or an mt.fill; nullopt otherwise.
std::optional<double> splatValue(mlir::Value v);

/// True when `v` is an mt.constant or mt.fill of one value within
/// kConstantTolerance (relative) of `expected`, and holds one element.
bool isScalarConstant(mlir::Value v, double expected);

/// True when v holds exactly one element (rank 0 or all dims 1).
bool isScalarShaped(mlir::Value v);

/// The op of type OpTy defining `v` when `v` has exactly one use (so
/// rewriting that user cannot change what anybody else reads); else null.
template <typename OpTy>
OpTy singleUseDef(mlir::Value v) {
  if (!v.hasOneUse())
    return nullptr;
  return v.getDefiningOp<OpTy>();
}

/// For y = a * b (or a / b when `op` is an mt.div) matched as x times a
/// scalar constant c: mt.mul with a one-element constant on either side,
/// mt.div by one (c = 1 / divisor), or mt.scale. The product must have x's
/// type (the scalar broadcasts away). Returns x and sets c.
mlir::Value matchScalarMultiple(mlir::Operation *op, double &c);

/// True when `axes` are [axis, rank) for some axis >= 0 (sets axis).
bool trailingAxes(llvm::ArrayRef<int64_t> axes, int64_t rank, int64_t &axis);

/// y / sqrt(mean(y^2) + eps) over trailing axes, the core of RMSNorm and
/// (with y = x - mean(x)) of LayerNorm.
struct RootMeanSquareMatch {
  mlir::Value y;    // the normalized value
  int64_t axis = 0; // mean over [axis, rank)
  double epsilon = 0;
  // The matched ops, users before the values they read: the root (the
  // division or product) first. Each has one use, inside the pattern,
  // except the root.
  llvm::SmallVector<mlir::Operation *> ops;
};

/// Matches `root` as y * inv or inv * y with inv = reciprocal(sqrt(v)) or
/// powf(v, -0.5), or y / sqrt(v); v = mean(sq) + eps (eps on either side,
/// one-element constant), the mean over trailing axes with keepdims, sq =
/// y * y or powf(y, 2). The root has y's type. y's own users are not
/// checked.
std::optional<RootMeanSquareMatch> matchRootMeanSquare(mlir::Operation *root);

/// Erases the ops of a matched pattern once the fused op has replaced its
/// root: each must be left without users (they were used only inside the
/// pattern). Scalar constants and fills the pattern read are erased too
/// when nothing else reads them.
void erasePattern(mlir::RewriterBase &rewriter, llvm::ArrayRef<mlir::Operation *> ops);

} // namespace megatrain::fusion

#endif // MEGATRAIN_PASSES_FUSIONMATCH_H
