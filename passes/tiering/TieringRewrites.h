//===- TieringRewrites.h - mt-tier's fetch, offload and recompute rewrites ===//
//
// The ways mt-tier changes where a value is between two uses: move a fetch
// (stage 2, and the greedy's Delay), fetch a parameter again, offload a value
// and prefetch it back, or recompute it from its producers. Each rewrite
// leaves the computation unchanged: it moves bytes as they are or re-runs the
// same kernel on the same inputs. The model is stale after a rewrite; the
// caller runs analyze() before the next question.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_PASSES_TIERING_TIERINGREWRITES_H
#define MEGATRAIN_PASSES_TIERING_TIERINGREWRITES_H

#include "tiering/TieringModel.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseSet.h"

namespace megatrain {

/// How many producers deep a recompute may reach by default.
inline constexpr int kMaxRecomputeDepth = 8;

/// The host copy an mt.offload already made of `value`, or null.
mlir::Value hostCopyOf(mlir::Value value);
/// `value`'s host copy: the existing one, else an mt.offload right after its def.
mlir::Value offloadOnce(mlir::Value value);

class TieringRewriter {
public:
  explicit TieringRewriter(TieringModel &model) : model(model) {}

  /// Stage 2: moves every parameter fetch to the latest position whose
  /// compute before the first use hides its transfer.
  void placeParamFetches();

  /// The longest chain of producers a recompute may clone.
  void setMaxRecomputeDepth(int depth) { maxDepth = depth; }

  /// Whether cloning `op` re-creates its results: no side effects, not a
  /// source or a copy.
  bool recomputable(mlir::Operation *op) const;
  /// Whether `value`, or a copy of it made earlier, is in the arena at b
  /// (`found`). Values in `mustRebuild` count only through their copies.
  bool availableAt(mlir::Value value, int64_t b,
                   const llvm::DenseSet<mlir::Value> &mustRebuild,
                   mlir::Value *found) const;
  /// Plans the recompute of `value` before position b: the ops to clone in
  /// order, their seconds, or failure.
  bool planRecompute(mlir::Value value, int64_t b, int depth,
                     const llvm::DenseSet<mlir::Value> &mustRebuild,
                     llvm::SmallVectorImpl<mlir::Operation *> &chain,
                     llvm::DenseSet<mlir::Operation *> &inChain, double &cost) const;

  /// Uses of `value` at positions from `from` on read `replacement` instead.
  void replaceUsesFrom(mlir::Value value, mlir::Value replacement, int64_t from);
  /// A new fetch of the fetched `value` at `place`.
  mlir::Value refetch(mlir::Value value, int64_t place);
  /// `value` offloaded after its def (once) and prefetched at `place`.
  mlir::Value offloadAndPrefetch(mlir::Value value, int64_t place);
  /// `value` rebuilt right before b from the chain planRecompute finds.
  mlir::Value recompute(mlir::Value value, int64_t b,
                        const llvm::DenseSet<mlir::Value> &mustRebuild);
  void moveTo(mlir::Operation *op, int64_t place);

  /// The op of the step before tiering that `clone`, made by recompute(),
  /// re-runs (through clones of clones), or null for any other op.
  mlir::Operation *originalOf(mlir::Operation *clone) const {
    return cloneOf.lookup(clone);
  }
  /// Every clone recompute() made, with its original.
  const llvm::DenseMap<mlir::Operation *, mlir::Operation *> &clones() const {
    return cloneOf;
  }

  /// The values that replaced `value` for its later uses, oldest first.
  llvm::ArrayRef<mlir::Value> replacementsOf(mlir::Value value) const {
    auto it = replacements.find(value);
    if (it == replacements.end())
      return {};
    return it->second;
  }

private:
  TieringModel &model;
  int maxDepth = kMaxRecomputeDepth;
  // Values that replaced an original value for its later uses.
  llvm::DenseMap<mlir::Value, llvm::SmallVector<mlir::Value, 2>> replacements;
  // Each op recompute() cloned, and the original op it re-runs (TieringFill
  // gives the original's results back to the clone's users).
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> cloneOf;
};

} // namespace megatrain

#endif // MEGATRAIN_PASSES_TIERING_TIERINGREWRITES_H
