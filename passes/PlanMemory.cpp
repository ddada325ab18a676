//===- PlanMemory.cpp - mt-plan-memory: static offsets in the device arena -===//
//
// Every op result lives in one device arena at a byte offset fixed here, so
// the runtime allocates once and never in the loop. The algorithm:
//
//   1. Collect every op result with its size: element bytes (bits rounded up
//      to whole bytes, so i1 takes a byte as the plan's BOOL does) times the
//      element count, at least 1 byte so each value has an address, rounded
//      up to the 256-byte alignment.
//   2. Give each a lifetime in mt.step units, inclusive: [def step, mt.live_end],
//      or [def, def] for a value nobody reads (its kernel still writes it).
//      Two kinds of value outlive that rule:
//        - mt.input results are written by the runtime before step 0, so they
//          live from step 0;
//        - mt.constant results are written once when the runtime starts and
//          must survive every training step, so they live forever.
//      lifetimeSlot (Liveness.h) holds these rules; mt-tier's last stage
//      sizes the arena with it too.
//      mt.offload results (host copies of offloaded activations, written by
//      mt-tier) go to a second arena, the host staging pool; everything else
//      goes to the device arena.
//      A view (an op marked mt.alias by mt-view-aliases) takes no bytes of
//      its own: its base (mt::viewBase, the first value of a chain of views)
//      holds the bytes over the union of the group's lifetimes, from the
//      base's def to the last step any view of it is read (or held).
//   3. Place each arena's values with placeBestFit (Placement.h): decreasing
//      size (ties: earlier def first), each at the tightest 256-aligned gap
//      among the already-placed values whose lifetimes overlap its own, or
//      above all of them when no gap is big enough. Big values placed first
//      leave gaps the many small ones fill. With `no-reuse`, values are
//      instead stacked one after the other in schedule order.
//   4. Check the invariant directly: no two values whose lifetimes overlap
//      share a byte. A failure is a bug in stage 3, reported as an error.
//      (3b) mt-tier fitted its budget (mt.device_budget) placing every view
//      as a copy; best fit is not monotone, so should the placement with
//      views exceed that budget, as many views as fit are kept: ordered by
//      how far each lengthens its base's life (least first), the longest
//      prefix that places within the budget is found by bisection (stages 1
//      to 4 again per try; none kept is mt-tier's placement) and the rest
//      become copies again (mt.alias removed).
//   5. Write `mt.offset` on each op (one entry per result, an offset in the
//      value's arena; a view's is its base's), `mt.arena_size` and
//      `mt.host_stage_size` on the function.
//
// Host-side tensors other than offloaded activations (parameter masters,
// gradients after the device-to-host copy, AdamW moments, the loss readout)
// are not values here; plan emission places them in the host pool.
//
//===----------------------------------------------------------------------===//
#include "megatrain/Passes/Passes.h"

#include "Liveness.h"

#include "megatrain/Passes/Placement.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

namespace megatrain {
#define GEN_PASS_DEF_PLANMEMORY
#include "megatrain/Passes/Passes.h.inc"

namespace {

enum Arena : unsigned { kDeviceArena = 0, kHostStageArena = 1, kArenaCount = 2 };
/// The "arena" of a view: placed with its base, not by itself.
constexpr unsigned kViewOfBase = kArenaCount;

/// One value to place: where it comes from, its arena and its slot (for a
/// view, `base` is the index of its base's entry).
struct ArenaValue {
  mlir::Operation *op;
  unsigned resultIndex;
  unsigned arena;
  Slot slot;
  size_t base = 0;
  int64_t ownLast = 0; // slot.last before any view lengthened it
};

/// Bytes of a statically shaped tensor, or failure with a diagnostic on `op`.
mlir::FailureOr<uint64_t> byteSize(mlir::Operation *op, mlir::Type type) {
  auto tensor = mlir::dyn_cast<mlir::RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return op->emitError("mt-plan-memory needs statically shaped tensors, got ")
           << type;
  mlir::Type element = tensor.getElementType();
  if (!element.isIntOrFloat())
    return op->emitError("mt-plan-memory cannot size element type ") << element;
  uint64_t bytes = (element.getIntOrFloatBitWidth() + 7) / 8;
  for (int64_t dim : tensor.getShape())
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes))
      return op->emitError("tensor size overflows 64 bits: ") << type;
  return std::max<uint64_t>(bytes, 1);
}

struct PlanMemory : impl::PlanMemoryBase<PlanMemory> {
  using PlanMemoryBase::PlanMemoryBase;

  void runOnOperation() override {
    mlir::func::FuncOp func = getOperation();
    std::vector<ArenaValue> values;
    uint64_t sizes[kArenaCount] = {0, 0};
    if (mlir::failed(place(func, values, sizes)))
      return signalPassFailure();
    // Stage 3b. mt-tier fitted the budget with every view a copy, and best
    // fit is not monotone: should the views' placement come out bigger than
    // the budget, keep the views that still place within it.
    auto budget = func->getAttrOfType<mlir::IntegerAttr>(mt::attr::kDeviceBudget);
    if (budget && budget.getInt() > 0 &&
        sizes[kDeviceArena] > static_cast<uint64_t>(budget.getInt()) &&
        mlir::failed(keepViewsThatFit(func, values, sizes, static_cast<uint64_t>(budget.getInt()))))
      return signalPassFailure();
    annotate(func, values, sizes);
  }

  /// Stage 3b: the views ordered by how far each lengthens its base's life
  /// (least first, then in program order), the longest prefix of them whose
  /// placement fits `budget` (bisection: none kept fits, as mt-tier placed
  /// it; all kept does not), the rest made copies. `values` and `sizes` are
  /// left as that placement's.
  mlir::LogicalResult keepViewsThatFit(mlir::func::FuncOp func, std::vector<ArenaValue> &values,
                                       uint64_t (&sizes)[kArenaCount], uint64_t budget) {
    std::vector<std::pair<int64_t, mlir::Operation *>> views;
    for (const ArenaValue &value : values)
      if (value.arena == kViewOfBase)
        views.emplace_back(std::max<int64_t>(0, value.slot.last - values[value.base].ownLast), value.op);
    if (views.empty())
      return mlir::success();
    std::stable_sort(views.begin(), views.end(),
                     [](const auto &a, const auto &b) { return a.first < b.first; });
    mlir::UnitAttr alias = mlir::UnitAttr::get(&getContext());
    auto keep = [&](size_t count) -> mlir::FailureOr<bool> {
      for (size_t i = 0; i < views.size(); ++i) {
        if (i < count)
          views[i].second->setAttr(mt::attr::kAlias, alias);
        else
          views[i].second->removeAttr(mt::attr::kAlias);
      }
      values.clear();
      if (mlir::failed(place(func, values, sizes)))
        return mlir::failure();
      return sizes[kDeviceArena] <= budget;
    };
    size_t fits = 0, over = views.size();
    while (over - fits > 1) {
      const size_t mid = fits + (over - fits) / 2;
      mlir::FailureOr<bool> ok = keep(mid);
      if (mlir::failed(ok))
        return mlir::failure();
      (*ok ? fits : over) = mid;
    }
    return mlir::success(mlir::succeeded(keep(fits)));
  }

  /// Stages 1 to 4.
  mlir::LogicalResult place(mlir::func::FuncOp func, std::vector<ArenaValue> &values,
                            uint64_t (&sizes)[kArenaCount]) {
    if (mlir::failed(collect(func, values)))
      return mlir::failure();
    for (unsigned arena = 0; arena < kArenaCount; ++arena) {
      std::vector<size_t> members;
      std::vector<Slot> slots;
      for (size_t i = 0; i < values.size(); ++i)
        if (values[i].arena == arena) {
          members.push_back(i);
          slots.push_back(values[i].slot);
        }
      sizes[arena] = noReuse ? placeStacked(slots) : placeBestFit(slots);
      // Stage 4.
      if (auto overlap = findOverlap(slots)) {
        const ArenaValue &a = values[members[overlap->first]];
        const ArenaValue &b = values[members[overlap->second]];
        b.op->emitError("mt-plan-memory placed result ")
            << b.resultIndex << " at offset " << slots[overlap->second].offset
            << " over a live value of '" << a.op->getName() << "' at offset "
            << slots[overlap->first].offset << " (internal error)";
        return mlir::failure();
      }
      for (size_t k = 0; k < members.size(); ++k)
        values[members[k]].slot = slots[k];
    }
    for (ArenaValue &value : values)
      if (value.arena == kViewOfBase)
        value.slot.offset = values[value.base].slot.offset;
    return mlir::success();
  }

  /// Stages 1 and 2.
  mlir::LogicalResult collect(mlir::func::FuncOp func,
                              std::vector<ArenaValue> &values) {
    llvm::DenseMap<mlir::Value, size_t> entryOf;
    mlir::WalkResult walk = func.walk([&](mlir::Operation *op) {
      if (op == func.getOperation() || op->getNumResults() == 0)
        return mlir::WalkResult::advance();
      auto step = op->getAttrOfType<mlir::IntegerAttr>(mt::attr::kStep);
      auto liveEnd = op->getAttrOfType<mlir::DenseI64ArrayAttr>(mt::attr::kLiveEnd);
      if (!step || !liveEnd) {
        op->emitError("op has no mt.step / mt.live_end; run mt-schedule and "
                      "mt-liveness before mt-plan-memory");
        return mlir::WalkResult::interrupt();
      }
      if (liveEnd.size() != static_cast<int64_t>(op->getNumResults())) {
        op->emitError("mt.live_end has ")
            << liveEnd.size() << " entries for " << op->getNumResults()
            << " results";
        return mlir::WalkResult::interrupt();
      }
      for (auto [index, result] : llvm::enumerate(op->getResults())) {
        mlir::FailureOr<uint64_t> bytes = byteSize(op, result.getType());
        if (mlir::failed(bytes))
          return mlir::WalkResult::interrupt();
        Slot slot = lifetimeSlot(op, step.getInt(), liveEnd[index], alignPlacement(*bytes));
        unsigned arena = mlir::isa<mt::OffloadOp>(op) ? kHostStageArena : kDeviceArena;
        size_t base = 0;
        if (op->hasAttr(mt::attr::kAlias)) {
          auto found = entryOf.find(mt::viewBase(result));
          if (found == entryOf.end() || values[found->second].slot.size != slot.size ||
              values[found->second].arena != kDeviceArena) {
            op->emitError("mt.alias on a result whose base is no device value of its "
                          "size defined before it; rerun mt-view-aliases");
            return mlir::WalkResult::interrupt();
          }
          // The base's bytes live until the group's last use.
          base = found->second;
          Slot &held = values[base].slot;
          held.last = std::max(held.last, slot.last);
          arena = kViewOfBase;
        }
        entryOf[result] = values.size();
        values.push_back({op, static_cast<unsigned>(index), arena, slot, base, slot.last});
      }
      return mlir::WalkResult::advance();
    });
    return mlir::failure(walk.wasInterrupted());
  }

  /// Stage 5.
  void annotate(mlir::func::FuncOp func, const std::vector<ArenaValue> &values,
                const uint64_t (&sizes)[kArenaCount]) {
    mlir::Builder builder(&getContext());
    llvm::SmallVector<int64_t> offsets;
    // Values were collected op by op, results in order, so each op's entries
    // are contiguous.
    for (size_t i = 0; i < values.size();) {
      mlir::Operation *op = values[i].op;
      offsets.clear();
      for (; i < values.size() && values[i].op == op; ++i)
        offsets.push_back(static_cast<int64_t>(values[i].slot.offset));
      op->setAttr(mt::attr::kOffset, builder.getDenseI64ArrayAttr(offsets));
    }
    func->setAttr(mt::attr::kArenaSize,
                  builder.getI64IntegerAttr(static_cast<int64_t>(sizes[kDeviceArena])));
    if (sizes[kHostStageArena] > 0)
      func->setAttr(mt::attr::kHostStageSize,
                    builder.getI64IntegerAttr(static_cast<int64_t>(sizes[kHostStageArena])));
  }
};

} // namespace
} // namespace megatrain
