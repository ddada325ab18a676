//===- Placement.h - static offsets for values with step lifetimes --------===//
//
// The placement algorithm of mt-plan-memory, shared with mt-tier (which needs
// the arena size a set of lifetimes will take before it commits to them).
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_PASSES_PLACEMENT_H
#define MEGATRAIN_PASSES_PLACEMENT_H

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace megatrain {

inline constexpr uint64_t kPlacementAlignment = 256;
inline constexpr int64_t kLivesForever = std::numeric_limits<int64_t>::max();

inline uint64_t alignPlacement(uint64_t bytes) {
  return (bytes + kPlacementAlignment - 1) / kPlacementAlignment * kPlacementAlignment;
}

/// A value to place: its inclusive lifetime in steps, its aligned size, and
/// (after placement) its offset.
struct Slot {
  int64_t first = 0;
  int64_t last = 0;
  uint64_t size = 0;
  uint64_t offset = 0;

  bool livesWith(const Slot &other) const {
    return first <= other.last && other.first <= last;
  }
  bool sharesBytesWith(const Slot &other) const {
    return offset < other.offset + other.size && other.offset < offset + size;
  }
};

/// Best fit, biggest first (ties: earlier first, then input order): each slot
/// goes into the tightest aligned gap among the placed slots that live with
/// it, else on top of them. Returns the arena size.
uint64_t placeBestFit(std::vector<Slot> &slots);

/// Every slot in its own bytes, in input order. Returns the arena size.
uint64_t placeStacked(std::vector<Slot> &slots);

/// The longest prefix of `count` candidates, by bisection over [0, count - 1],
/// for which `fits(prefix)` holds, where `fits` holds up to some prefix and not
/// after it and holds for 0 (the caller has found that all `count` do not fit):
/// a handful of placements, not one per candidate.
template <typename Fits> size_t longestFittingPrefix(size_t count, Fits fits) {
  size_t lo = 0, hi = count == 0 ? 0 : count - 1;
  while (lo < hi) {
    size_t mid = (lo + hi + 1) / 2;
    if (fits(mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/// The first pair (i, j) of slots that live together and share a byte.
std::optional<std::pair<size_t, size_t>> findOverlap(const std::vector<Slot> &slots);

} // namespace megatrain

#endif // MEGATRAIN_PASSES_PLACEMENT_H
