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
//   3. Place values in decreasing size (ties: earlier def first), each at the
//      tightest 256-aligned gap among the already-placed values whose
//      lifetimes overlap its own (best fit), or above all of them when no gap
//      is big enough. Big values placed first leave gaps the many small
//      ones fill. With `no-reuse`, values are instead stacked one after the
//      other in schedule order.
//   4. Check the invariant directly: no two values whose lifetimes overlap
//      share a byte. A failure is a bug in stage 3, reported as an error.
//   5. Write `mt.offset` on each op (one entry per result) and
//      `mt.arena_size` (the end of the highest value) on the function.
//
// Excluded: nothing in the device arena is. Host-side tensors (parameter
// masters, gradients after the device-to-host copy, AdamW moments, the loss
// readout) are not values here; plan emission places them in the host pool.
//
//===----------------------------------------------------------------------===//
#include "megatrain/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

#include <limits>

namespace megatrain {
#define GEN_PASS_DEF_PLANMEMORY
#include "megatrain/Passes/Passes.h.inc"

namespace {

constexpr uint64_t kAlignment = 256;
constexpr int64_t kForever = std::numeric_limits<int64_t>::max();

uint64_t alignUp(uint64_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

/// One value to place: its lifetime in steps and its bytes in the arena.
struct ArenaValue {
  mlir::Operation *op;
  unsigned resultIndex;
  int64_t first; // inclusive
  int64_t last;  // inclusive
  uint64_t size; // aligned
  uint64_t offset = 0;

  bool livesWith(const ArenaValue &other) const {
    return first <= other.last && other.first <= last;
  }
  bool sharesBytesWith(const ArenaValue &other) const {
    return offset < other.offset + other.size && other.offset < offset + size;
  }
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
    if (mlir::failed(collect(func, values)))
      return signalPassFailure();
    if (noReuse)
      stack(values);
    else
      placeBestFit(values);
    if (mlir::failed(verify(func, values)))
      return signalPassFailure();
    annotate(func, values);
  }

  /// Stages 1 and 2.
  mlir::LogicalResult collect(mlir::func::FuncOp func,
                              std::vector<ArenaValue> &values) {
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
        ArenaValue value{op, static_cast<unsigned>(index), step.getInt(),
                         std::max(step.getInt(), liveEnd[index]), alignUp(*bytes)};
        if (mlir::isa<mt::InputOp>(op))
          value.first = 0;
        if (mlir::isa<mt::ConstantOp>(op)) {
          value.first = 0;
          value.last = kForever;
        }
        values.push_back(value);
      }
      return mlir::WalkResult::advance();
    });
    return mlir::failure(walk.wasInterrupted());
  }

  /// Stage 3 with no-reuse.
  static void stack(std::vector<ArenaValue> &values) {
    uint64_t top = 0;
    for (ArenaValue &value : values) {
      value.offset = top;
      top += value.size;
    }
  }

  /// Stage 3.
  static void placeBestFit(std::vector<ArenaValue> &values) {
    std::vector<size_t> order(values.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    // Stable, so equal sizes and defs keep schedule order: the layout is a
    // function of the IR alone.
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      if (values[a].size != values[b].size)
        return values[a].size > values[b].size;
      return values[a].first < values[b].first;
    });

    std::vector<const ArenaValue *> placed;
    std::vector<const ArenaValue *> conflicts;
    for (size_t index : order) {
      ArenaValue &value = values[index];
      conflicts.clear();
      for (const ArenaValue *other : placed)
        if (value.livesWith(*other))
          conflicts.push_back(other);
      llvm::sort(conflicts, [](const ArenaValue *a, const ArenaValue *b) {
        return a->offset < b->offset;
      });

      // Walk the gaps between conflicting values from the bottom; `floor` is
      // the lowest free byte above everything seen so far (offsets and sizes
      // are aligned, so every gap start is too).
      uint64_t floor = 0;
      std::optional<uint64_t> bestOffset;
      uint64_t bestGap = std::numeric_limits<uint64_t>::max();
      for (const ArenaValue *other : conflicts) {
        if (other->offset > floor) {
          uint64_t gap = other->offset - floor;
          if (gap >= value.size && gap < bestGap) {
            bestGap = gap;
            bestOffset = floor;
          }
        }
        floor = std::max(floor, other->offset + other->size);
      }
      value.offset = bestOffset.value_or(floor);
      placed.push_back(&value);
    }
  }

  /// Stage 4.
  static mlir::LogicalResult verify(mlir::func::FuncOp func,
                                    const std::vector<ArenaValue> &values) {
    std::vector<const ArenaValue *> byOffset;
    for (const ArenaValue &value : values)
      byOffset.push_back(&value);
    llvm::sort(byOffset, [](const ArenaValue *a, const ArenaValue *b) {
      return a->offset < b->offset;
    });
    for (size_t i = 0; i < byOffset.size(); ++i) {
      const ArenaValue &a = *byOffset[i];
      for (size_t j = i + 1;
           j < byOffset.size() && byOffset[j]->offset < a.offset + a.size; ++j) {
        const ArenaValue &b = *byOffset[j];
        if (a.livesWith(b))
          return b.op->emitError("mt-plan-memory placed result ")
                 << b.resultIndex << " at offset " << b.offset
                 << " over a live value of '" << a.op->getName() << "' at offset "
                 << a.offset << " (internal error)";
      }
    }
    return mlir::success();
  }

  /// Stage 5.
  void annotate(mlir::func::FuncOp func, const std::vector<ArenaValue> &values) {
    mlir::Builder builder(&getContext());
    uint64_t arenaSize = 0;
    llvm::SmallVector<int64_t> offsets;
    // Values were collected op by op, results in order, so each op's entries
    // are contiguous.
    for (size_t i = 0; i < values.size();) {
      mlir::Operation *op = values[i].op;
      offsets.clear();
      for (; i < values.size() && values[i].op == op; ++i) {
        offsets.push_back(static_cast<int64_t>(values[i].offset));
        arenaSize = std::max(arenaSize, values[i].offset + values[i].size);
      }
      op->setAttr(mt::attr::kOffset, builder.getDenseI64ArrayAttr(offsets));
    }
    func->setAttr(mt::attr::kArenaSize,
                  builder.getI64IntegerAttr(static_cast<int64_t>(arenaSize)));
  }
};

} // namespace
} // namespace megatrain
