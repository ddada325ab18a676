//===- IrCost.h - the device profile's prices of mt ops and values --------===//
//
// OpCost.h prices kernels and copies described by shapes; these functions
// describe IR to it, so that mt-liveness's copy hold and mt-tier's model
// price an op the same way.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_PASSES_IRCOST_H
#define MEGATRAIN_PASSES_IRCOST_H

#include "megatrain/plan/DeviceProfile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace megatrain {

/// Bytes a value takes in an arena: its elements' bytes (bits rounded up to
/// whole bytes), at least one, aligned as placeBestFit places them.
uint64_t valueBytes(mlir::Value value);

/// Seconds `op` keeps the compute stream busy: the estimate of its kernel at
/// the precision its `precision` attribute names (mt-precision); 0 for an op
/// that launches no kernel (sources, sinks, fetches and copies).
double computeSeconds(mlir::Operation *op, const DeviceProfile &profile);

/// A pass's `device-profile` option: `profile` keeps its defaults (the H200
/// figures) when `path` is empty, else is read from the file. On a bad file,
/// emits "<pass>: <why>" on `func` and fails.
mlir::LogicalResult loadProfileOption(mlir::func::FuncOp func, llvm::StringRef path,
                                      const char *pass, DeviceProfile &profile);

} // namespace megatrain

#endif // MEGATRAIN_PASSES_IRCOST_H
