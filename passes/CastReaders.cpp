//===- CastReaders.cpp - values read only as their bf16 casts -------------===//
#include "CastReaders.h"

#include "mlir/IR/TypeUtilities.h"

using namespace mlir;

namespace megatrain {

namespace {

bool collect(Value value, CastReaders &readers) {
  if (value.use_empty())
    return false;
  for (Operation *user : value.getUsers()) {
    if (isBf16Cast(user, /*toBf16=*/true))
      readers.casts.push_back(user);
    else if (isa<mt::ReshapeOp>(user) && collect(user->getResult(0), readers))
      readers.reshapes.push_back(user);
    else
      return false;
  }
  return true;
}

void setBf16(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  value.setType(RankedTensorType::get(type.getShape(), Builder(value.getContext()).getBF16Type()));
}

} // namespace

bool isBf16Cast(Operation *op, bool toBf16) {
  auto castOp = dyn_cast_or_null<mt::CastOp>(op);
  if (!castOp)
    return false;
  Type from = getElementTypeOrSelf(castOp.getX()), to = getElementTypeOrSelf(castOp.getResult());
  return toBf16 ? from.isF32() && to.isBF16() : from.isBF16() && to.isF32();
}

CastReaders castReadersOf(Value value) {
  CastReaders readers;
  if (!getElementTypeOrSelf(value).isF32() || !collect(value, readers))
    return {};
  return readers;
}

void narrowToBf16(Value value, const CastReaders &readers) {
  setBf16(value);
  for (Operation *reshape : readers.reshapes)
    setBf16(reshape->getResult(0));
  for (Operation *castOp : readers.casts) {
    castOp->getResult(0).replaceAllUsesWith(castOp->getOperand(0));
    castOp->erase();
  }
}

} // namespace megatrain
