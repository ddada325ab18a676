// LrSchedule.h - the learning rate of each training step: linear warmup, then constant, cosine or linear decay.
#pragma once

#include <cstdint>
#include <string>

namespace megatrain::runtime {

enum class LrScheduleKind { Constant = 0, Cosine = 1, Linear = 2 };

// Parses "constant" / "cosine" / "linear"; Error otherwise.
LrScheduleKind parseLrScheduleKind(const std::string& text);
const char* lrScheduleKindName(LrScheduleKind kind);

// With s the 1-based training step, W = warmupSteps, N = decaySteps:
//   s <= W:     lr = peak * s / W                      (linear warmup from 0)
//   otherwise:  p = clamp((s - W) / (N - W), 0, 1)     (p = 1 if N <= W)
//               constant: lr = peak
//               linear:   lr = minLr + (peak - minLr) * (1 - p)
//               cosine:   lr = minLr + (peak - minLr) * (1 + cos(pi p)) / 2
// so decay reaches minLr exactly at step N and stays there.
struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::Constant;
  double peak = 0;
  double minLr = 0;
  int64_t warmupSteps = 0;
  int64_t decaySteps = 0;

  double at(int64_t step) const;
  // "cosine 0.003 -> 0.0003 over 1000 steps, warmup 100" and the like.
  std::string describe() const;
  bool operator==(const LrSchedule& other) const;
  bool operator!=(const LrSchedule& other) const { return !(*this == other); }
};

}  // namespace megatrain::runtime
