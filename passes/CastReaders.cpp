//===- CastReaders.cpp - values read only as their bf16 casts -------------===//
#include "CastReaders.h"

#include "mlir/IR/TypeUtilities.h"

using namespace mlir;

namespace megatrain {

bool isBf16Cast(Operation *op, bool toBf16) {
  auto castOp = dyn_cast_or_null<mt::CastOp>(op);
  if (!castOp)
    return false;
  Type from = getElementTypeOrSelf(castOp.getX()), to = getElementTypeOrSelf(castOp.getResult());
  return toBf16 ? from.isF32() && to.isBF16() : from.isBF16() && to.isF32();
}

bool readersThroughReshapes(Value value, llvm::function_ref<bool(Operation *)> isReader,
                            SmallVectorImpl<Operation *> &readers,
                            SmallVectorImpl<Operation *> &reshapes) {
  if (value.use_empty())
    return false;
  for (Operation *user : value.getUsers()) {
    if (isReader(user))
      readers.push_back(user);
    else if (isa<mt::ReshapeOp>(user) &&
             readersThroughReshapes(user->getResult(0), isReader, readers, reshapes))
      reshapes.push_back(user);
    else
      return false;
  }
  return true;
}

void setBf16(Value value, ArrayRef<Operation *> reshapes) {
  Type bf16 = Builder(value.getContext()).getBF16Type();
  auto narrow = [&](Value v) {
    v.setType(RankedTensorType::get(cast<RankedTensorType>(v.getType()).getShape(), bf16));
  };
  narrow(value);
  for (Operation *reshape : reshapes)
    narrow(reshape->getResult(0));
}

CastReaders castReadersOf(Value value) {
  CastReaders readers;
  auto isCast = [](Operation *op) { return isBf16Cast(op, /*toBf16=*/true); };
  if (!getElementTypeOrSelf(value).isF32() ||
      !readersThroughReshapes(value, isCast, readers.casts, readers.reshapes))
    return {};
  return readers;
}

void narrowToBf16(Value value, const CastReaders &readers) {
  setBf16(value, readers.reshapes);
  for (Operation *castOp : readers.casts) {
    castOp->getResult(0).replaceAllUsesWith(castOp->getOperand(0));
    castOp->erase();
  }
}

} // namespace megatrain
