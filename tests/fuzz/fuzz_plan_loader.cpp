// fuzz_plan_loader.cpp - libFuzzer target: plan bytes through parsePlan, validatePlan and verifySchedule.
//
// The order is megatrain-run's: a plan is validated against the CPU backend's
// kernel table (not prepared: nothing is allocated) before the schedule
// verifier, which expects validatePlan's structural checks to hold, sees it.
// megatrain::Error is an expected rejection; anything else crashes the run.
#include <cstddef>
#include <cstdint>
#include <string>

#include <google/protobuf/stubs/logging.h>

#include "megatrain/plan/Error.h"
#include "megatrain/plan/PlanVerifier.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/PlanLoader.h"

// protobuf logs every string field that is not UTF-8; parsePlan reports the
// failure itself, and millions of log lines only slow the campaign.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const megatrain::runtime::CpuBackend backend;
  try {
    const megatrain::plan::Plan plan =
        megatrain::runtime::parsePlan(std::string(reinterpret_cast<const char*>(data), size), "fuzz.plan");
    megatrain::runtime::validatePlan(plan, backend, "fuzz.plan");
    (void)megatrain::verifySchedule(plan);
  } catch (const megatrain::Error&) {
  }
  return 0;
}
