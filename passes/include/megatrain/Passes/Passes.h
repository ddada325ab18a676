//===- Passes.h - the megatrain passes and pipeline ----------------------===//
#ifndef MEGATRAIN_PASSES_PASSES_H
#define MEGATRAIN_PASSES_PASSES_H

#include "megatrain/Dialect/MtDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace megatrain {

#define GEN_PASS_DECL
#include "megatrain/Passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "megatrain/Passes/Passes.h.inc"

} // namespace megatrain

#endif // MEGATRAIN_PASSES_PASSES_H
