//===- Placement.cpp - best-fit static placement by lifetime --------------===//
#include "megatrain/Passes/Placement.h"

#include <algorithm>
#include <numeric>

namespace megatrain {

uint64_t placeStacked(std::vector<Slot> &slots) {
  uint64_t top = 0;
  for (Slot &slot : slots) {
    slot.offset = top;
    top += slot.size;
  }
  return top;
}

uint64_t placeBestFit(std::vector<Slot> &slots) {
  std::vector<size_t> order(slots.size());
  std::iota(order.begin(), order.end(), 0);
  // Stable, so the layout is a function of the input alone.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (slots[a].size != slots[b].size)
      return slots[a].size > slots[b].size;
    return slots[a].first < slots[b].first;
  });

  uint64_t arena = 0;
  std::vector<const Slot *> placed;
  std::vector<const Slot *> conflicts;
  for (size_t index : order) {
    Slot &slot = slots[index];
    conflicts.clear();
    for (const Slot *other : placed)
      if (slot.livesWith(*other))
        conflicts.push_back(other);
    std::sort(conflicts.begin(), conflicts.end(),
              [](const Slot *a, const Slot *b) { return a->offset < b->offset; });

    // Walk the gaps between conflicting slots from the bottom; `floor` is the
    // lowest free byte above everything seen so far (offsets and sizes are
    // aligned, so every gap start is too).
    uint64_t floor = 0;
    std::optional<uint64_t> bestOffset;
    uint64_t bestGap = std::numeric_limits<uint64_t>::max();
    for (const Slot *other : conflicts) {
      if (other->offset > floor) {
        uint64_t gap = other->offset - floor;
        if (gap >= slot.size && gap < bestGap) {
          bestGap = gap;
          bestOffset = floor;
        }
      }
      floor = std::max(floor, other->offset + other->size);
    }
    slot.offset = bestOffset.value_or(floor);
    arena = std::max(arena, slot.offset + slot.size);
    placed.push_back(&slot);
  }
  return arena;
}

std::optional<std::pair<size_t, size_t>> findOverlap(const std::vector<Slot> &slots) {
  std::vector<size_t> byOffset(slots.size());
  std::iota(byOffset.begin(), byOffset.end(), 0);
  std::sort(byOffset.begin(), byOffset.end(),
            [&](size_t a, size_t b) { return slots[a].offset < slots[b].offset; });
  for (size_t i = 0; i < byOffset.size(); ++i) {
    const Slot &a = slots[byOffset[i]];
    for (size_t j = i + 1;
         j < byOffset.size() && slots[byOffset[j]].offset < a.offset + a.size; ++j)
      if (a.livesWith(slots[byOffset[j]]))
        return std::make_pair(byOffset[i], byOffset[j]);
  }
  return std::nullopt;
}

} // namespace megatrain
