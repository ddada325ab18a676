// StateHomesTest.cpp - passes/tiering/StateHomes.h: the slot of the accumulator visits' ring
// (planAccumulatorVisits; docs/tiering.md "Accumulator visits"): the size that needs the least
// device memory for the sums, the ring's slots of it plus every larger sum whole; and the
// gradient staging ring the copy holds assume (holdRingBytes; "The copy hold"); the update
// visits' forcing and ring (forcedVisit, updateVisitRingBytes; "Update visits").
#include "tiering/StateHomes.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace megatrain {
namespace {

// `count` trainable parameters whose accumulators take `bytes` each.
void add(std::vector<ParameterState> &states, int count, uint64_t bytes, bool trainable = true) {
  for (int i = 0; i < count; ++i) {
    ParameterState state;
    state.name = "p" + std::to_string(states.size());
    state.trainable = trainable;
    state.accumulatorBytes = trainable ? bytes : 0;
    states.push_back(state);
  }
}

TEST(AccumulatorVisits, TheSlotThatLeavesTheLeastOnTheDevice) {
  // The 1.36B's shape: norms, the attention's four products, the MLP's three, the embedding
  // and lm_head. Eight slots of an MLP weight's 46 MB and the two 262 MB sums whole take
  // 0.89 GB, where the MLP's slot size beats both larger (2.1 GB of ring) and smaller (the
  // MLP's 3.3 GB whole) ones.
  std::vector<ParameterState> states;
  add(states, 49, 8192);
  add(states, 96, 16777216);
  add(states, 72, 46137344);
  add(states, 2, 262144000);
  add(states, 3, 1 << 20, /*trainable=*/false); // frozen: no sum
  const AccumulatorVisits visits = planAccumulatorVisits(states, 8);
  EXPECT_EQ(visits.slotBytes, 46137344u);
  EXPECT_EQ(visits.ringBytes, 8u * 46137344u);
  EXPECT_TRUE(visits.visits(states[0]));
  EXPECT_TRUE(visits.visits(states[49 + 96]));
  EXPECT_FALSE(visits.visits(states[49 + 96 + 72])); // the embedding stays whole
  EXPECT_FALSE(visits.visits(states.back()));        // a frozen one has nothing to sum
}

TEST(AccumulatorVisits, NoneWhereTheRingWouldTakeAsMuchAsTheSums) {
  // Three sums of one size: 3 slots take what the sums take, so none visits (a tie keeps
  // them whole: no trips over the links for nothing); with four sums the ring saves one.
  std::vector<ParameterState> states;
  add(states, 3, 4096);
  EXPECT_EQ(planAccumulatorVisits(states, 3).slotBytes, 0u);
  EXPECT_EQ(planAccumulatorVisits(states, 3).ringBytes, 0u);
  add(states, 1, 4096);
  EXPECT_EQ(planAccumulatorVisits(states, 3).slotBytes, 4096u);
  EXPECT_EQ(planAccumulatorVisits(states, 3).ringBytes, 3u * 4096u);
  // Without micro-batches (no sums) nothing visits.
  std::vector<ParameterState> none;
  add(none, 4, 0);
  EXPECT_EQ(planAccumulatorVisits(none, 3).slotBytes, 0u);
}

// `count` trainable parameters of `elements` f32 elements each, every home's bytes set as
// collectParameterState sets a host home's: 16 bytes an element (master, m, v, bf16 copy
// and its padding are not the point here).
void addState(std::vector<ParameterState> &states, int count, uint64_t elements) {
  for (int i = 0; i < count; ++i) {
    ParameterState state;
    state.name = "s" + std::to_string(states.size());
    state.trainable = true;
    state.elements = elements;
    state.bytes[1][1] = 16 * elements;
    states.push_back(state);
  }
}

TEST(HoldRing, WholeWhereTheHostHoldsItBesideTheStateItKeeps) {
  // Ten parameters of 1 MiB elements: 4 MiB gradients, 40 MiB for the whole ring, 160 MiB
  // of host forms. A host of 150 MiB cannot hold all of it with the ring (200 MiB), so with
  // every parameter on the host the copies are taken to wait on four slots; with half the
  // state on the device (100 MiB) the whole ring fits, as mt-homes will give it.
  std::vector<ParameterState> states;
  addState(states, 10, 1 << 20);
  const uint64_t slots = gradientStageBytes(states, false, false);
  const uint64_t whole = wholeGradientStageBytes(states, false, false);
  ASSERT_EQ(slots, 4u * (4u << 20));
  ASSERT_EQ(whole, 10u * (4u << 20));
  const int64_t host = 150ll << 20;
  EXPECT_EQ(holdRingBytes(states, false, false, slots, 0, host, 1.0), slots);
  EXPECT_EQ(holdRingBytes(states, false, false, slots, 0, host, 0.5), whole);
  // What else the host holds counts: 60 MiB of offload staging leave no room for it.
  EXPECT_EQ(holdRingBytes(states, false, false, slots, 60ull << 20, host, 0.5), slots);
  // An unlimited host always has it.
  EXPECT_EQ(holdRingBytes(states, false, false, slots, 0, -1, 1.0), whole);
  // With kept gradients and no micro-batches there is no ring at all.
  EXPECT_EQ(holdRingBytes(states, true, false, 0, 0, host, 1.0), 0u);
}

TEST(UpdateVisits, TheForcingIsAHostHomeAndTheRingFourSlotsOfTheLargestVisitor) {
  std::string why;
  auto forcings = parseHomeForcings({"visit:^w", "device:^b$", "host"}, why);
  ASSERT_TRUE(forcings) << why;
  EXPECT_EQ(forcedHome(*forcings, "w1"), Home::Host);
  EXPECT_TRUE(forcedVisit(*forcings, "w1"));
  EXPECT_FALSE(forcedVisit(*forcings, "b"));  // the first match wins: device
  EXPECT_FALSE(forcedVisit(*forcings, "x"));  // host, no visit
  EXPECT_FALSE(parseHomeForcings({"visits:^w"}, why));
  EXPECT_NE(why.find("expected device, host, disk, visit or visit-master"), std::string::npos) << why;

  std::vector<ParameterState> states(4);
  const char *names[] = {"w1", "w2", "b", "wf"};
  const uint64_t elements[] = {1000, 300, 5000, 9000};
  for (int i = 0; i < 4; ++i) {
    states[i].name = names[i];
    states[i].elements = elements[i];
    states[i].trainable = i < 3; // wf is frozen: no update, no visit
    states[i].computeCopy = i == 0;
  }
  // w1: three f32 of 4000 bytes (4096 aligned) and a bf16 copy of 2000 (2048); with
  // micro-batches a sum kept on the host takes a fourth f32.
  EXPECT_EQ(updateVisitSlotBytes(states[0], false), 3u * 4096 + 2048);
  EXPECT_EQ(updateVisitSlotBytes(states[0], true), 4u * 4096 + 2048);
  EXPECT_EQ(updateVisitSlotBytes(states[1], false), 3u * 1280);
  EXPECT_EQ(updateVisitRingBytes(states, *forcings, false), kUpdateVisitSlots * (3u * 4096 + 2048));
  // visit-master: the moments stay on the device; the slot holds the master and compute copy.
  auto master = parseHomeForcings({"visit-master:^w1$"}, why);
  ASSERT_TRUE(master) << why;
  EXPECT_TRUE(forcedVisit(*master, "w1"));
  EXPECT_TRUE(forcedMomentsOnDevice(*master, "w1"));
  EXPECT_FALSE(forcedMomentsOnDevice(*forcings, "w1"));
  EXPECT_EQ(updateVisitRingBytes(states, *master, false), kUpdateVisitSlots * (4096u + 2048));
  std::vector<ParameterState> moved = states;
  moved[0].bytes[1] = {0, 3 * 4096 + 2048, 0}; // its host home: master, m, v, compute copy
  applyMomentsOnDevice(moved, *master);
  EXPECT_EQ(moved[0].bytes[1][0], 2u * 4096);   // the moments on the device
  EXPECT_EQ(moved[0].bytes[1][1], 4096u + 2048); // master and compute copy on the host
  auto none = parseHomeForcings({"host"}, why);
  ASSERT_TRUE(none) << why;
  EXPECT_EQ(updateVisitRingBytes(states, *none, false), 0u);
}

} // namespace
} // namespace megatrain
