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

#include "megatrain/Cost/DeviceProfile.h"
#include "megatrain/Passes/Passes.h"

#include <string>

namespace megatrain {

/// The plan a policy made: a detached, rewritten copy of the function (the
/// caller takes its body and erases it) and the policy's name for the plan
/// header, e.g. "auto (checkpoint+greedy)".
struct TieringChoice {
  mlir::func::FuncOp plan;
  std::string policy;
};

/// Plans `func` under `budget` bytes (0: none) with `policy` (auto, keep,
/// checkpoint or offload; also a portfolio entry such as checkpoint+fill).
/// Under auto with a budget and `fill`, every fitting plan is also filled
/// (stage 5) and competes as "<plan>+fill". With `mustFit` (a portfolio
/// entry, e.g. checkpoint), it runs first and a failure to fit fails the
/// whole choice. Its ops are not renumbered. Fails, with `why`, when no plan
/// fits.
mlir::FailureOr<TieringChoice> choosePlan(mlir::func::FuncOp func, llvm::StringRef policy,
                                          const DeviceProfile &profile, uint64_t budget,
                                          bool fill, llvm::StringRef mustFit,
                                          std::string &why);

} // namespace megatrain

#endif // MEGATRAIN_PASSES_TIERING_TIERINGPOLICIES_H
