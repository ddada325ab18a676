//===- TieringPolicies.h - mt-tier's policies and auto's portfolio --------===//
//
// The reference policies (keep, checkpoint, offload) and stage 6 of mt-tier
// (passes/Tiering.cpp): auto runs the greedy from three starting plans,
// builds the reference policies as they are, fills each (stage 5,
// TieringFill), and keeps the fastest plan that fits.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_PASSES_TIERING_TIERINGPOLICIES_H
#define MEGATRAIN_PASSES_TIERING_TIERINGPOLICIES_H

#include "megatrain/plan/DeviceProfile.h"
#include "megatrain/Passes/Passes.h"
#include "tiering/TieringModel.h"

#include "llvm/Support/raw_ostream.h"

#include <string>

namespace megatrain {

/// The plan a policy made: a detached, rewritten copy of the function (the
/// caller takes its body and erases it) and the policy's name for the plan
/// header, e.g. "auto (checkpoint+greedy)".
struct TieringChoice {
  mlir::func::FuncOp plan;
  std::string policy;
};

/// How auto fills its plans (stage 5).
struct FillOptions {
  bool enabled = true;
  /// Undo nothing that saves fewer seconds per byte (0: no floor).
  double minSecondsPerByte = 0;
  /// A portfolio entry (e.g. "checkpoint") that runs first; when it does not
  /// fit, the whole choice fails and nothing else runs. Empty: none.
  std::string mustFit;
  /// Stage 5b: also try each plan with its recompute traded for the links'
  /// spare time (spillToLink).
  bool spill = true;
  /// Stage 5's search: with a floor and known capacities, fills without the
  /// floor cut to a prefix chosen by the timeline compete with the floor's.
  bool search = true;
  /// For 5b's measure: the device's capacity and the device form of all the
  /// state (0: unknown, every parameter's copies then count on the links).
  uint64_t deviceBytes = 0;
  uint64_t stateDeviceBytes = 0;
  /// With micro-batches, the device accumulators of every parameter where
  /// mt-homes gives them the device's room before the homes (0: the homes
  /// come first, or no micro-batches): the part of the room they take
  /// sums on the device, the rest holds homes.
  uint64_t accumulatorBytes = 0;
  /// Where each plan considered is written, one line each (--tiering-log;
  /// null: nowhere).
  llvm::raw_ostream *log = nullptr;
};

/// The share of the state the device will not hold beside an arena of
/// `arena` bytes (1: all of it on the host; unknown capacities count as 1),
/// and of the micro-batch sums: where the accumulators take the room first
/// (`fill.accumulatorBytes`), the sums of those updated last are the
/// device's before any of them gets a home.
TieringModel::HostShare hostShareBeside(uint64_t arena, const FillOptions &fill);

/// Plans `func` under `budget` bytes (0: none) with `policy` (auto, keep,
/// checkpoint or offload; also a portfolio entry such as checkpoint+fill).
/// Under auto with a budget and `fill.enabled`, every fitting plan is also
/// filled (stage 5) and competes as "<plan>+fill". Its ops are not
/// renumbered. Fails, with `why`, when no plan fits.
mlir::FailureOr<TieringChoice> choosePlan(mlir::func::FuncOp func, llvm::StringRef policy,
                                          const DeviceProfile &profile, uint64_t budget,
                                          const FillOptions &fill, std::string &why);

} // namespace megatrain

#endif // MEGATRAIN_PASSES_TIERING_TIERINGPOLICIES_H
