//===- IrCost.cpp - the device profile's prices of mt ops and values ------===//
#include "IrCost.h"

#include "megatrain/plan/OpCost.h"
#include "megatrain/Dialect/MtDialect.h"
#include "megatrain/Passes/Placement.h"

#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>

namespace megatrain {

namespace {

TensorShape shapeOf(mlir::Value value) {
  auto type = mlir::cast<mlir::RankedTensorType>(value.getType());
  TensorShape shape;
  shape.dims.assign(type.getShape().begin(), type.getShape().end());
  shape.elementBytes = (type.getElementType().getIntOrFloatBitWidth() + 7) / 8;
  return shape;
}

} // namespace

uint64_t valueBytes(mlir::Value value) {
  auto type = mlir::cast<mlir::RankedTensorType>(value.getType());
  uint64_t bytes = (type.getElementType().getIntOrFloatBitWidth() + 7) / 8;
  for (int64_t dim : type.getShape())
    bytes *= static_cast<uint64_t>(dim);
  return alignPlacement(std::max<uint64_t>(bytes, 1));
}

double computeSeconds(mlir::Operation *op, const DeviceProfile &profile) {
  if (mlir::isa<mt::InputOp, mt::ConstantOp, mt::LossOp, mt::OutputOp, mt::ParamGradOp,
                mt::AdamWOp, mt::GradPartOp, mt::ParamOp, mt::PrefetchOp, mt::OffloadOp>(op))
    return 0;
  KernelDesc kernel;
  kernel.kernel = op->getName().stripDialect().str();
  for (mlir::Value operand : op->getOperands())
    kernel.inputs.push_back(shapeOf(operand));
  for (mlir::Value result : op->getResults())
    kernel.outputs.push_back(shapeOf(result));
  Precision rate = Precision::FP32;
  for (mlir::NamedAttribute attr : op->getAttrs()) {
    if (auto flag = mlir::dyn_cast<mlir::BoolAttr>(attr.getValue()))
      kernel.intAttrs[attr.getName().str()] = flag.getValue();
    else if (auto number = mlir::dyn_cast<mlir::IntegerAttr>(attr.getValue()))
      kernel.intAttrs[attr.getName().str()] = number.getInt();
    else if (auto text = mlir::dyn_cast<mlir::StringAttr>(attr.getValue());
             text && attr.getName() == "precision")
      rate = precisionNamed(text.str());  // mt-precision's tf32 or bf16
  }
  return estimateKernel(kernel, profile, rate).seconds;
}

mlir::LogicalResult loadProfileOption(mlir::func::FuncOp func, llvm::StringRef path,
                                      const char *pass, DeviceProfile &profile) {
  if (path.empty())
    return mlir::success();
  std::string error;
  if (loadDeviceProfile(path.str(), profile, error))
    return mlir::success();
  func.emitError(pass) << ": " << error;
  return mlir::failure();
}

} // namespace megatrain
