// LrSchedule.cpp - the learning rate of each training step: linear warmup, then constant, cosine or linear decay.
#include "megatrain/runtime/LrSchedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "megatrain/plan/Error.h"

namespace megatrain::runtime {

LrScheduleKind parseLrScheduleKind(const std::string& text) {
  if (text == "constant") return LrScheduleKind::Constant;
  if (text == "cosine") return LrScheduleKind::Cosine;
  if (text == "linear") return LrScheduleKind::Linear;
  throw Error("unknown lr schedule '" + text + "' (expected constant, cosine or linear)");
}

const char* lrScheduleKindName(LrScheduleKind kind) {
  switch (kind) {
    case LrScheduleKind::Constant:
      return "constant";
    case LrScheduleKind::Cosine:
      return "cosine";
    case LrScheduleKind::Linear:
      return "linear";
  }
  return "?";
}

double LrSchedule::at(int64_t step) const {
  if (warmupSteps > 0 && step <= warmupSteps)
    return peak * static_cast<double>(step) / static_cast<double>(warmupSteps);
  if (kind == LrScheduleKind::Constant) return peak;
  const int64_t span = decaySteps - warmupSteps;
  const double p =
      span <= 0 ? 1.0 : std::clamp(static_cast<double>(step - warmupSteps) / static_cast<double>(span), 0.0, 1.0);
  const double factor = kind == LrScheduleKind::Linear ? 1.0 - p : 0.5 * (1.0 + std::cos(M_PI * p));
  return minLr + (peak - minLr) * factor;
}

std::string LrSchedule::describe() const {
  char text[160];
  if (kind == LrScheduleKind::Constant)
    std::snprintf(text, sizeof text, "constant %g", peak);
  else
    std::snprintf(text, sizeof text, "%s %g -> %g over %lld steps", lrScheduleKindName(kind), peak, minLr,
                  static_cast<long long>(decaySteps));
  std::string result = text;
  if (warmupSteps > 0) result += ", warmup " + std::to_string(warmupSteps);
  return result;
}

bool LrSchedule::operator==(const LrSchedule& other) const {
  // A constant schedule never reads minLr or decaySteps.
  const bool decays = kind != LrScheduleKind::Constant;
  return kind == other.kind && peak == other.peak && warmupSteps == other.warmupSteps &&
         (!decays || (minLr == other.minLr && decaySteps == other.decaySteps));
}

}  // namespace megatrain::runtime
