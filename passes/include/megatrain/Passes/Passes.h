//===- Passes.h - the megatrain passes and pipeline ----------------------===//
#ifndef MEGATRAIN_PASSES_PASSES_H
#define MEGATRAIN_PASSES_PASSES_H

#include "megatrain/Dialect/MtDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

#include <cstdint>

namespace megatrain {

/// The most micro-batches mt-microbatch makes: each is a copy of the step's
/// graph, and a plan's header holds the count in 32 bits, so a limit keeps a
/// typo from exhausting memory.
inline constexpr int64_t kMaxMicrobatches = 1024;

#define GEN_PASS_DECL
#include "megatrain/Passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "megatrain/Passes/Passes.h.inc"

} // namespace megatrain

#endif // MEGATRAIN_PASSES_PASSES_H
