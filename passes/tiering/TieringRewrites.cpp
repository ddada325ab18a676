//===- TieringRewrites.cpp - mt-tier's fetch, offload and recompute rewrites //
//
// Stage 2 of mt-tier (passes/Tiering.cpp) and the rewrites stages 3 to 5
// apply.
//
//===----------------------------------------------------------------------===//
#include "tiering/TieringRewrites.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace megatrain {

void TieringRewriter::moveTo(mlir::Operation *op, int64_t place) {
  mlir::Operation *anchor = model.opAt(place);
  if (anchor != op)
    op->moveBefore(anchor);
}

void TieringRewriter::placeParamFetches() {
  model.analyze();
  // In order of first use, so earlier fetches claim the link first.
  std::vector<mlir::Operation *> fetches;
  for (mlir::Operation *op : model.ops())
    if (mlir::isa<mt::ParamOp>(op) && !op->getResult(0).use_empty())
      fetches.push_back(op);
  for (mlir::Operation *fetch : fetches) {
    const LiveValue *value = model.live(fetch->getResult(0));
    int64_t b = value->uses.front();
    int64_t here = model.positionOf(fetch);
    double transfer = model.h2dAt(here);
    auto [k, exposed] =
        model.placeFetch(0, model.fetchDeadline(fetch), b, transfer, here, transfer);
    (void)exposed;
    if (k >= 0 && k != here) {
      moveTo(fetch, k);
      model.analyze();
    }
  }
}

bool TieringRewriter::recomputable(mlir::Operation *op) const {
  if (op->getNumResults() == 0 || op->getNumRegions() != 0)
    return false;
  if (mlir::isa<mt::ParamOp, mt::InputOp, mt::ConstantOp, mt::OffloadOp,
                mt::PrefetchOp>(op))
    return false;
  return mlir::isMemoryEffectFree(op);
}

bool TieringRewriter::availableAt(mlir::Value value, int64_t b,
                                  const llvm::DenseSet<mlir::Value> &mustRebuild,
                                  mlir::Value *found) const {
  auto liveAt = [&](mlir::Value candidate) {
    const LiveValue *info = model.live(candidate);
    return info && info->first < b && info->last >= b;
  };
  if (!mustRebuild.contains(value) && liveAt(value)) {
    *found = value;
    return true;
  }
  // A copy made earlier (fetched again, prefetched, rebuilt) serves if it is
  // live at b; under the checkpoint policy (mustRebuild set) any copy made
  // before b does, its life extended to b, so a layer is rebuilt once.
  for (mlir::Value replacement : replacementsOf(value)) {
    const LiveValue *info = model.live(replacement);
    bool earlier = info && info->first < b;
    if (liveAt(replacement) || (earlier && !mustRebuild.empty())) {
      *found = replacement;
      return true;
    }
  }
  return false;
}

bool TieringRewriter::planRecompute(mlir::Value value, int64_t b, int depth,
                                    const llvm::DenseSet<mlir::Value> &mustRebuild,
                                    llvm::SmallVectorImpl<mlir::Operation *> &chain,
                                    llvm::DenseSet<mlir::Operation *> &inChain,
                                    double &cost) const {
  mlir::Operation *def = value.getDefiningOp();
  if (!def || !recomputable(def) || depth > maxDepth)
    return false;
  if (inChain.contains(def))
    return true;
  for (mlir::Value operand : def->getOperands()) {
    mlir::Value found;
    if (availableAt(operand, b, mustRebuild, &found))
      continue;
    mlir::Operation *producer = operand.getDefiningOp();
    if (producer && mlir::isa<mt::ConstantOp>(producer))
      continue;
    if (producer && mlir::isa<mt::ParamOp>(producer)) {
      if (inChain.contains(producer))
        continue;
      if (model.fetchDeadline(producer) < b - 1)
        return false; // the master is already updated at b
      cost += model.transferOf(operand);
      inChain.insert(producer);
      chain.push_back(producer);
      continue;
    }
    if (!planRecompute(operand, b, depth + 1, mustRebuild, chain, inChain, cost))
      return false;
  }
  inChain.insert(def);
  chain.push_back(def);
  cost += model.computeAt(model.positionOf(def));
  return true;
}

void TieringRewriter::replaceUsesFrom(mlir::Value value, mlir::Value replacement,
                                      int64_t from) {
  value.replaceUsesWithIf(replacement, [&](mlir::OpOperand &use) {
    mlir::Operation *owner = use.getOwner();
    int64_t at = model.positionOf(owner);
    // Ops created by this rewrite are not positioned and use what they were built with.
    return at >= 0 && at >= from && owner != replacement.getDefiningOp();
  });
  replacements[value].push_back(replacement);
  // Chains of replacement: an original whose replacement is replaced again.
  for (auto &entry : replacements)
    if (llvm::is_contained(entry.second, value) && entry.first != value)
      entry.second.push_back(replacement);
}

mlir::Value TieringRewriter::refetch(mlir::Value value, int64_t place) {
  mlir::Operation *def = value.getDefiningOp();
  mlir::OpBuilder builder(model.opAt(place));
  mlir::Operation *clone = builder.clone(*def);
  return clone->getResult(0);
}

mlir::Value hostCopyOf(mlir::Value value) {
  for (mlir::Operation *user : value.getUsers())
    if (auto offload = mlir::dyn_cast<mt::OffloadOp>(user))
      return offload.getResult();
  return {};
}

mlir::Value offloadOnce(mlir::Value value) {
  if (mlir::Value host = hostCopyOf(value))
    return host;
  mlir::Operation *def = value.getDefiningOp();
  mlir::OpBuilder builder(def->getContext());
  builder.setInsertionPointAfter(def);
  return builder.create<mt::OffloadOp>(def->getLoc(), value.getType(), value);
}

mlir::Value TieringRewriter::offloadAndPrefetch(mlir::Value value, int64_t place) {
  mlir::Value host = offloadOnce(value);
  mlir::OpBuilder builder(model.opAt(place));
  return builder.create<mt::PrefetchOp>(value.getLoc(), value.getType(), host);
}

mlir::Value TieringRewriter::recompute(mlir::Value value, int64_t b,
                                       const llvm::DenseSet<mlir::Value> &mustRebuild) {
  llvm::SmallVector<mlir::Operation *> chain;
  llvm::DenseSet<mlir::Operation *> inChain;
  double cost = 0;
  bool ok = planRecompute(value, b, 0, mustRebuild, chain, inChain, cost);
  assert(ok && "recompute was priced as possible");
  (void)ok;
  mlir::IRMapping mapping;
  mlir::OpBuilder builder(model.opAt(b));
  mlir::UnitAttr unit = builder.getUnitAttr();
  for (mlir::Operation *op : chain) {
    for (mlir::Value operand : op->getOperands()) {
      if (mapping.contains(operand))
        continue;
      mlir::Value found;
      if (availableAt(operand, b, mustRebuild, &found))
        mapping.map(operand, found);
    }
    mlir::Operation *clone = builder.clone(*op, mapping);
    mlir::Operation *original = cloneOf.lookup(op);
    cloneOf[clone] = original ? original : op;
    if (!mlir::isa<mt::ParamOp>(clone))
      clone->setAttr(mt::attr::kRecompute, unit);
    for (auto [original, copy] : llvm::zip(op->getResults(), clone->getResults()))
      if (original != value)
        replacements[original].push_back(copy);
  }
  return mapping.lookup(value);
}

} // namespace megatrain
