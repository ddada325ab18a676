//===- MtDialect.cpp - registration of the mt dialect --------------------===//
#include "megatrain/Dialect/MtDialect.h"

using namespace mlir;
using namespace megatrain::mt;

#include "megatrain/Dialect/MtDialect.cpp.inc"
#include "megatrain/Dialect/GradientInterface.cpp.inc"

void MtDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "megatrain/Dialect/MtOps.cpp.inc"
      >();
}
