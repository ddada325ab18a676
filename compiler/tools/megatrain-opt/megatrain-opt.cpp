//===- megatrain-opt.cpp - run any megatrain pass alone on MLIR text ------===//
//
// The test driver of the passes: `megatrain-opt in.mlir --mt-schedule` runs
// one pass (or a pipeline) over mt IR and prints the result for FileCheck.
//
//===----------------------------------------------------------------------===//
#include "megatrain/Dialect/MtDialect.h"
#include "megatrain/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<megatrain::mt::MtDialect, mlir::func::FuncDialect>();
  megatrain::registerMegatrainPasses();
  // Canonicalize and CSE are part of the training pipeline; tests run them too.
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "megatrain pass driver\n", registry));
}
