// PlanChecksum.h - the plan's CRC-32, written by the compiler and checked by every reader.
//
// A flipped byte inside a constant or an offset still parses as a plan and
// would train to different numbers; the checksum turns it into an error on
// load. It is the CRC-32 (zlib's) of the plan's deterministic serialization
// with Header.checksum 0, so it does not depend on how a writer orders fields.
#pragma once

#include <cstdint>
#include <string>

#include "megatrain/plan/plan.pb.h"

namespace megatrain {

// The checksum `plan` should carry (its own Header.checksum ignored).
uint32_t computePlanChecksum(const plan::Plan& plan);

// Sets Header.checksum and raises the format minor to the checksum's.
void sealPlan(plan::Plan& plan);

// For a plan of the checksum's minor or newer: an Error naming `label` when
// the checksum is missing or does not match. Older plans have none to check.
void checkPlanChecksum(const plan::Plan& plan, const std::string& label);

}  // namespace megatrain
