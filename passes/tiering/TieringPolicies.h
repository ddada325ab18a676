//===- TieringPolicies.h - mt-tier's policies and auto's portfolio --------===//
//
// The reference policies (keep, checkpoint, offload) and stage 5 of mt-tier
// (passes/Tiering.cpp): auto runs the greedy from three starting plans,
// builds the reference policies as they are, and keeps the fastest plan
// that fits.
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
/// checkpoint or offload). Its ops are not renumbered. Fails, with `why`,
/// when no plan fits.
mlir::FailureOr<TieringChoice> choosePlan(mlir::func::FuncOp func, llvm::StringRef policy,
                                          const DeviceProfile &profile, uint64_t budget,
                                          std::string &why);

} // namespace megatrain

#endif // MEGATRAIN_PASSES_TIERING_TIERINGPOLICIES_H
