// FormatVersion.h - the plan file's magic and format version, which the compiler writes and the runtime checks.
//
// A reader takes a plan of its own major version and any minor up to its own
// (parsePlan, megatrain/runtime/PlanLoader.h). The compiler writes the lowest
// minor whose features a plan uses, so an older runtime still runs a plan that
// needs nothing newer; docs/plan.md lists what each minor added.
#pragma once

#include <cstdint>

#include "megatrain/plan/plan.pb.h"

namespace megatrain {

// Plan.magic: tells a plan from another protobuf message that parses as one.
inline constexpr const char* kPlanMagic = "megatrain.plan";

// The newest format this build writes and reads.
inline constexpr uint32_t kPlanFormatMajor = 1;
inline constexpr uint32_t kPlanFormatMinor = 11;

// The minor that introduced each feature.
// Minor 1: the OUTPUT_READOUT role (graph outputs kept by --keep-output).
inline constexpr uint32_t kPlanMinorOutputReadout = 1;
// Minor 2: the tiering fields (role OFFLOADED and the staging pool,
// HostTask.ACCUMULATE, Step.recompute, the header's budget and link bytes) and
// the simulator's predictions (docs/tiering.md).
inline constexpr uint32_t kPlanMinorTiering = 2;
// Minor 3: the compute precision: header.precision, the PARAMETER_COMPUTE role
// and ADAMW's fifth tensor.
inline constexpr uint32_t kPlanMinorPrecision = 3;
// Minor 4: Header.checksum, which every reader checks (PlanChecksum.h).
inline constexpr uint32_t kPlanMinorChecksum = 4;
// Minor 5: header.target_input and header.ignore_index (a loss mask's targets).
inline constexpr uint32_t kPlanMinorTargets = 5;
// Minor 6: Header.evaluation, a forward-only plan (megatrain-compile
// --forward-only) that megatrain-run evaluates with and never trains with.
inline constexpr uint32_t kPlanMinorEvaluation = 6;
// Minor 7: state homes: training state in DEVICE pools (pool `device_state`),
// ADAMW and ACCUMULATE on device tensors (run on the compute stream), an
// ADAMW gradient that is an arena ACTIVATION, the header's capacities, and
// the disk tier: a DISK pool of optimizer state, the host pool `disk_stage`
// of STATE_STAGE tensors and the `disk` stream of its copies.
inline constexpr uint32_t kPlanMinorHomes = 7;
// Minor 8: Tensor.alias_of, views that share their base's bytes (reshapes
// and order-keeping transposes emitted as no step).
inline constexpr uint32_t kPlanMinorAliases = 8;
// Minor 9: the gradient staging ring: host pool `grad_stage` of STATE_STAGE
// `grad_stage:<param>` tensors (sharing bytes by lifetime), read as the
// gradient of a host ADAMW and as the addend of a host ACCUMULATE.
inline constexpr uint32_t kPlanMinorGradientStage = 9;
// Minor 10: accumulator visits: device pool `acc_visit` of STATE_STAGE
// `acc_visit:<param>` tensors (sharing bytes by lifetime), a micro-batch sum
// fetched from its host accumulator, added to on the device (the product's
// matmul_add, or ACCUMULATE on compute) and copied back.
inline constexpr uint32_t kPlanMinorVisits = 10;
// Minor 11: update visits: device pool `update_visit` of STATE_STAGE
// `visit_master:`, `visit_m:`, `visit_v:`, `visit_compute:` (and
// `visit_grad:`) tensors, a host home's state fetched from the host, updated
// by a device ADAMW whose operands are those STATE_STAGE tensors, and copied
// back into its PARAMETER, moments and compute copy.
inline constexpr uint32_t kPlanMinorUpdateVisits = 11;

static_assert(kPlanMinorOutputReadout <= kPlanFormatMinor && kPlanMinorTiering <= kPlanFormatMinor &&
                  kPlanMinorPrecision <= kPlanFormatMinor && kPlanMinorChecksum <= kPlanFormatMinor &&
                  kPlanMinorTargets <= kPlanFormatMinor && kPlanMinorEvaluation <= kPlanFormatMinor &&
                  kPlanMinorHomes <= kPlanFormatMinor && kPlanMinorAliases <= kPlanFormatMinor &&
                  kPlanMinorGradientStage <= kPlanFormatMinor && kPlanMinorVisits <= kPlanFormatMinor &&
                  kPlanMinorUpdateVisits <= kPlanFormatMinor,
              "a feature's minor is newer than the format this build reads");

// Raises header.format_minor to `minor` when it is lower: a plan's minor is
// that of the newest feature it uses.
inline void requirePlanFormatMinor(plan::Header& header, uint32_t minor) {
  if (header.format_minor() < minor) header.set_format_minor(minor);
}

}  // namespace megatrain
