// LrScheduleTest.cpp - the lr of every step against the schedule formulas of docs/runtime.md.
#include <gtest/gtest.h>

#include <cmath>

#include "megatrain/plan/Error.h"
#include "megatrain/runtime/LrSchedule.h"

namespace megatrain::runtime {
namespace {

constexpr double kPeak = 1e-3, kMin = 1e-4;

LrSchedule schedule(LrScheduleKind kind, int64_t warmup = 10, int64_t decay = 110) {
  return LrSchedule{kind, kPeak, kMin, warmup, decay};
}

TEST(LrSchedule, WarmupRisesLinearlyFromZeroToThePeak) {
  for (LrScheduleKind kind : {LrScheduleKind::Constant, LrScheduleKind::Cosine, LrScheduleKind::Linear}) {
    const LrSchedule s = schedule(kind);
    EXPECT_DOUBLE_EQ(s.at(1), kPeak / 10);
    EXPECT_DOUBLE_EQ(s.at(5), kPeak * 5 / 10);
    EXPECT_DOUBLE_EQ(s.at(10), kPeak);
  }
}

TEST(LrSchedule, ConstantHoldsThePeak) {
  const LrSchedule s = schedule(LrScheduleKind::Constant);
  for (int64_t step : {11, 60, 110, 1000}) EXPECT_EQ(s.at(step), kPeak);
  EXPECT_EQ(schedule(LrScheduleKind::Constant, 0).at(1), kPeak);
}

TEST(LrSchedule, CosineAndLinearDecayToTheFloorAtDecaySteps) {
  const LrSchedule cosine = schedule(LrScheduleKind::Cosine), linear = schedule(LrScheduleKind::Linear);
  // p = (s - 10) / 100 after the warmup.
  for (int64_t step : {11, 35, 60, 85, 109, 110}) {
    const double p = (step - 10) / 100.0;
    EXPECT_NEAR(cosine.at(step), kMin + (kPeak - kMin) * 0.5 * (1 + std::cos(M_PI * p)), 1e-18) << step;
    EXPECT_NEAR(linear.at(step), kMin + (kPeak - kMin) * (1 - p), 1e-18) << step;
  }
  EXPECT_NEAR(cosine.at(60), (kPeak + kMin) / 2, 1e-18);  // half way
  EXPECT_EQ(cosine.at(110), kMin);
  EXPECT_EQ(linear.at(110), kMin);
  EXPECT_EQ(cosine.at(500), kMin);  // past the end: the floor
  // No warmup: decay starts at step 1; decay steps within the warmup: the floor after it.
  EXPECT_NEAR(schedule(LrScheduleKind::Linear, 0, 4).at(1), kMin + (kPeak - kMin) * 0.75, 1e-18);
  EXPECT_EQ(schedule(LrScheduleKind::Cosine, 10, 5).at(11), kMin);
}

TEST(LrSchedule, NamesDescriptionsAndEquality) {
  EXPECT_EQ(parseLrScheduleKind("cosine"), LrScheduleKind::Cosine);
  EXPECT_EQ(std::string(lrScheduleKindName(LrScheduleKind::Linear)), "linear");
  EXPECT_THROW(parseLrScheduleKind("exponential"), Error);
  EXPECT_EQ(schedule(LrScheduleKind::Cosine).describe(), "cosine 0.001 -> 0.0001 over 110 steps, warmup 10");
  EXPECT_EQ(schedule(LrScheduleKind::Constant, 0).describe(), "constant 0.001");
  // A constant schedule does not read the floor or the decay length.
  EXPECT_TRUE(schedule(LrScheduleKind::Constant, 10, 5) == schedule(LrScheduleKind::Constant, 10, 500));
  EXPECT_TRUE(schedule(LrScheduleKind::Cosine, 10, 5) != schedule(LrScheduleKind::Cosine, 10, 500));
}

}  // namespace
}  // namespace megatrain::runtime
