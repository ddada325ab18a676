//===- GradientInterface.td - the gradient rule every differentiable op has ===//
#ifndef MT_GRADIENT_INTERFACE_TD
#define MT_GRADIENT_INTERFACE_TD

include "mlir/IR/OpBase.td"

def Mt_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::megatrain::mt";
  let description = [{
    The reverse-mode rule of an op. Given the gradients of its results, the op
    builds (at the builder's insertion point) ops computing the gradients of its
    operands. `resultGrads[i]` is null when no gradient reaches result i; the
    rule appends one entry per operand to `operandGrads`, null for operands
    that get no gradient (integer operands such as indices or labels).
  }];
  let methods = [
    InterfaceMethod<
      "Builds the gradients of the operands from those of the results.",
      "::mlir::LogicalResult", "buildGradients",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

#endif // MT_GRADIENT_INTERFACE_TD
