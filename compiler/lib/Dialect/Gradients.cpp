//===- Gradients.cpp - reverse-mode rules of the differentiable mt ops ---===//
//
// Each rule builds, at the builder's insertion point, the gradients of an op's
// operands from the gradient of its result. Every gradient it returns has
// exactly its operand's type: where an operand was broadcast, the gradient is
// reduced back with mt.sum_to. A null result gradient yields null operand
// gradients, and integer operands (indices, labels, tokens) never get one.
//
//===----------------------------------------------------------------------===//
#include "megatrain/Dialect/MtDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace megatrain::mt;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }
ArrayRef<int64_t> shapeOf(Value v) { return typeOf(v).getShape(); }

bool isDifferentiable(Value v) {
  return isa<FloatType>(typeOf(v).getElementType());
}

/// The gradient of a broadcast operand: `grad` summed down to `operand`'s
/// shape (nothing to do when the shapes already agree).
Value sumToOperand(OpBuilder &b, Location loc, Value grad, Value operand) {
  if (grad.getType() == operand.getType())
    return grad;
  return b.create<SumToOp>(loc, operand.getType(), grad);
}

Value scaled(OpBuilder &b, Location loc, Value x, double alpha) {
  return b.create<ScaleOp>(loc, x.getType(), x, b.getF64FloatAttr(alpha));
}

/// Appends `grad` for `operand`, or null when the operand is not
/// differentiable (so rules need not special-case integer operands).
void push(SmallVectorImpl<Value> &grads, Value operand, Value grad) {
  grads.push_back(isDifferentiable(operand) ? grad : Value());
}

/// Shared by every rule: a missing result gradient means no operand gets one.
bool noGradient(ArrayRef<Value> resultGrads, Operation *op,
                SmallVectorImpl<Value> &operandGrads) {
  if (!resultGrads.empty() && resultGrads[0])
    return false;
  operandGrads.append(op->getNumOperands(), Value());
  return true;
}

int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  Value g = resultGrads[0];
  push(operandGrads, getLhs(), sumToOperand(b, getLoc(), g, getLhs()));
  push(operandGrads, getRhs(), sumToOperand(b, getLoc(), g, getRhs()));
  return success();
}

LogicalResult SubOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  Value g = resultGrads[0];
  push(operandGrads, getLhs(), sumToOperand(b, getLoc(), g, getLhs()));
  // Negate after reducing: the reduced tensor is never larger.
  push(operandGrads, getRhs(),
       scaled(b, getLoc(), sumToOperand(b, getLoc(), g, getRhs()), -1.0));
  return success();
}

LogicalResult MulOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  Location loc = getLoc();
  Value g = resultGrads[0];
  Type full = getType();
  Value dl = b.create<MulOp>(loc, full, g, getRhs());
  push(operandGrads, getLhs(), sumToOperand(b, loc, dl, getLhs()));
  Value dr = b.create<MulOp>(loc, full, g, getLhs());
  push(operandGrads, getRhs(), sumToOperand(b, loc, dr, getRhs()));
  return success();
}

LogicalResult DivOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  Location loc = getLoc();
  Value g = resultGrads[0];
  Type full = getType();
  // y = l / r:  dl = g / r,  dr = -g * l / r^2 = -(g * y) / r.
  Value dl = b.create<DivOp>(loc, full, g, getRhs());
  push(operandGrads, getLhs(), sumToOperand(b, loc, dl, getLhs()));
  Value gy = b.create<MulOp>(loc, full, g, getResult());
  Value gyr = b.create<DivOp>(loc, full, gy, getRhs());
  push(operandGrads, getRhs(),
       scaled(b, loc, sumToOperand(b, loc, gyr, getRhs()), -1.0));
  return success();
}

LogicalResult ScaleOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  push(operandGrads, getX(),
       scaled(b, getLoc(), resultGrads[0], getAlpha().convertToDouble()));
  return success();
}

LogicalResult ReluOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  push(operandGrads, getX(),
       b.create<ReluGradOp>(getLoc(), getType(), getX(), resultGrads[0]));
  return success();
}

LogicalResult TanhOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  push(operandGrads, getX(),
       b.create<TanhGradOp>(getLoc(), getType(), getResult(), resultGrads[0]));
  return success();
}

LogicalResult SigmoidOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  push(operandGrads, getX(),
       b.create<SigmoidGradOp>(getLoc(), getType(), getResult(), resultGrads[0]));
  return success();
}

LogicalResult SoftplusOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  // y = log(1 + exp(x)):  dx = dy * sigmoid(x), from forward kernels.
  Value s = b.create<SigmoidOp>(getLoc(), getType(), getX());
  push(operandGrads, getX(), b.create<MulOp>(getLoc(), getType(), resultGrads[0], s));
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise math: compositions of forward kernels, except erf
//===----------------------------------------------------------------------===//

namespace {

Value mul(OpBuilder &b, Location loc, Value x, Value y) {
  return b.create<MulOp>(loc, x.getType(), x, y);
}

} // namespace

LogicalResult NegOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  push(operandGrads, getX(), scaled(b, getLoc(), resultGrads[0], -1.0));
  return success();
}

LogicalResult SqrtOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  // y = sqrt(x):  dx = dy / (2 y).
  Value q = b.create<DivOp>(getLoc(), getType(), resultGrads[0], getResult());
  push(operandGrads, getX(), scaled(b, getLoc(), q, 0.5));
  return success();
}

LogicalResult ReciprocalOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                           SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  // y = 1 / x:  dx = -dy / x^2 = -(dy * y) * y.
  Location loc = getLoc();
  Value gyy = mul(b, loc, mul(b, loc, resultGrads[0], getResult()), getResult());
  push(operandGrads, getX(), scaled(b, loc, gyy, -1.0));
  return success();
}

LogicalResult ExpOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  push(operandGrads, getX(), mul(b, getLoc(), resultGrads[0], getResult()));
  return success();
}

LogicalResult LogOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  push(operandGrads, getX(),
       b.create<DivOp>(getLoc(), getType(), resultGrads[0], getX()));
  return success();
}

LogicalResult ErfOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  // One kernel instead of five (x^2, negate, exp, scale, mul): erf is GELU's
  // core, on the widest activations of a transformer.
  push(operandGrads, getX(),
       b.create<ErfGradOp>(getLoc(), getType(), getX(), resultGrads[0]));
  return success();
}

LogicalResult CosOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  Location loc = getLoc();
  Value s = b.create<SinOp>(loc, getType(), getX());
  push(operandGrads, getX(), scaled(b, loc, mul(b, loc, resultGrads[0], s), -1.0));
  return success();
}

LogicalResult SinOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  Location loc = getLoc();
  Value c = b.create<CosOp>(loc, getType(), getX());
  push(operandGrads, getX(), mul(b, loc, resultGrads[0], c));
  return success();
}

LogicalResult PowfOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  // y = x^e:  dx = e * x^(e-1) * dy, skipping the kernels that would be
  // identities (e = 1, e = 2) and the whole product when e = 0.
  Location loc = getLoc();
  double e = getExponent().convertToDouble();
  if (e == 0.0) {
    push(operandGrads, getX(),
         b.create<FillOp>(loc, getType(), b.getF64FloatAttr(0.0)));
    return success();
  }
  Value g = resultGrads[0];
  if (e != 1.0) {
    Value base = e == 2.0 ? getX()
                          : b.create<PowfOp>(loc, getType(), getX(),
                                             b.getF64FloatAttr(e - 1.0))
                                .getResult();
    g = scaled(b, loc, mul(b, loc, g, base), e);
  }
  push(operandGrads, getX(), g);
  return success();
}

LogicalResult MaxOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  Location loc = getLoc();
  auto grad = b.create<MaxGradOp>(loc, getType(), getType(), getLhs(), getRhs(),
                                  resultGrads[0]);
  push(operandGrads, getLhs(), sumToOperand(b, loc, grad.getDlhs(), getLhs()));
  push(operandGrads, getRhs(), sumToOperand(b, loc, grad.getDrhs(), getRhs()));
  return success();
}

LogicalResult MinOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  Location loc = getLoc();
  auto grad = b.create<MinGradOp>(loc, getType(), getType(), getLhs(), getRhs(),
                                  resultGrads[0]);
  push(operandGrads, getLhs(), sumToOperand(b, loc, grad.getDlhs(), getLhs()));
  push(operandGrads, getRhs(), sumToOperand(b, loc, grad.getDrhs(), getRhs()));
  return success();
}

LogicalResult WhereOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  // dx = where(cond, dy, 0) and dy' = where(cond, 0, dy), with a scalar 0
  // that where broadcasts; each then summed down to its operand.
  Location loc = getLoc();
  Value g = resultGrads[0];
  Value zero = b.create<FillOp>(loc, tensorLike(getType(), {}),
                                b.getF64FloatAttr(0.0));
  Value dx = b.create<WhereOp>(loc, getType(), getCond(), g, zero);
  Value dy = b.create<WhereOp>(loc, getType(), getCond(), zero, g);
  operandGrads.push_back(Value()); // cond
  push(operandGrads, getX(), sumToOperand(b, loc, dx, getX()));
  push(operandGrads, getY(), sumToOperand(b, loc, dy, getY()));
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

namespace {

/// matmul(x, y) with transpose flags and its inferred result type.
Value buildMatmul(OpBuilder &b, Location loc, Value x, Value y, bool tx, bool ty) {
  auto shape = matmulShape(shapeOf(x), shapeOf(y), tx, ty);
  assert(succeeded(shape) && "gradient matmul of a verified matmul");
  return b.create<MatMulOp>(loc, tensorLike(x.getType(), *shape), x, y, tx, ty);
}

Value reshaped(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> shape) {
  return b.create<ReshapeOp>(loc, tensorLike(x.getType(), shape), x);
}

} // namespace

// With y = A B (A = a or a^T, B = b or b^T on the last two dims):
//   dA = g B^T  and  dB = A^T g,
// which, written in terms of a and b, is one matmul with transpose flags:
//   a:  ta=0: g * op(b)^T          ta=1: (g * op(b)^T)^T = op(b) * g^T
//   b:  tb=0: op(a)^T * g          tb=1: (op(a)^T * g)^T = g^T * op(a)
// A matmul that broadcast an operand's batch dims yields a gradient with the
// full batch shape, summed back down with sum_to.
LogicalResult MatMulOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  Location loc = getLoc();
  Value g = resultGrads[0];
  Value lhs = getA(), rhs = getB();
  bool ta = getTransposeA(), tb = getTransposeB();

  Value da = ta ? buildMatmul(b, loc, rhs, g, /*tx=*/tb, /*ty=*/true)
                : buildMatmul(b, loc, g, rhs, /*tx=*/false, /*ty=*/!tb);
  push(operandGrads, lhs, sumToOperand(b, loc, da, lhs));

  ArrayRef<int64_t> aShape = shapeOf(lhs), bShape = shapeOf(rhs);
  int64_t bBatch = product(bShape.drop_back(2));
  Value db;
  if (!ta && aShape.size() > 2 && bBatch == 1) {
    // A weight shared across a batch (the common x @ W): fold the batch into
    // the rows so dB is one 2-D matmul instead of a batched product that
    // sum_to must then reduce.
    int64_t rows = product(aShape.drop_back());
    Value a2 = reshaped(b, loc, lhs, {rows, aShape.back()});
    Value g2 = reshaped(b, loc, g, {rows, shapeOf(g).back()});
    db = tb ? buildMatmul(b, loc, g2, a2, true, false)
            : buildMatmul(b, loc, a2, g2, true, false);
    if (db.getType() != rhs.getType())
      db = reshaped(b, loc, db, bShape);
  } else {
    db = tb ? buildMatmul(b, loc, g, lhs, /*tx=*/true, /*ty=*/ta)
            : buildMatmul(b, loc, lhs, g, /*tx=*/!ta, /*ty=*/false);
    db = sumToOperand(b, loc, db, rhs);
  }
  push(operandGrads, rhs, db);
  return success();
}

LogicalResult SoftmaxOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  push(operandGrads, getX(),
       b.create<SoftmaxGradOp>(getLoc(), getType(), getResult(), resultGrads[0],
                               getAxisAttr()));
  return success();
}

//===----------------------------------------------------------------------===//
// Shapes and reductions
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  push(operandGrads, getX(),
       b.create<ReshapeOp>(getLoc(), getX().getType(), resultGrads[0]));
  return success();
}

LogicalResult TransposeOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  ArrayRef<int64_t> perm = getPerm();
  SmallVector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = i;
  push(operandGrads, getX(),
       b.create<TransposeOp>(getLoc(), getX().getType(), resultGrads[0],
                             b.getDenseI64ArrayAttr(inverse)));
  return success();
}

namespace {

/// The gradient of a sum over `axes`: g with the reduced dims restored as
/// size 1 (when keepdims dropped them), times `factor`, broadcast back to x.
Value spreadReduction(OpBuilder &b, Location loc, Value g, Value x,
                      ArrayRef<int64_t> axes, double factor) {
  SmallVector<int64_t> kept = reducedShape(shapeOf(x), axes, /*keepdims=*/true);
  if (shapeOf(g) != ArrayRef<int64_t>(kept))
    g = reshaped(b, loc, g, kept);
  if (factor != 1.0)
    g = scaled(b, loc, g, factor);
  if (g.getType() != x.getType())
    g = b.create<BroadcastToOp>(loc, x.getType(), g);
  return g;
}

} // namespace

LogicalResult ReduceSumOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  push(operandGrads, getX(),
       spreadReduction(b, getLoc(), resultGrads[0], getX(), getAxes(), 1.0));
  return success();
}

LogicalResult ReduceMeanOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                           SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  int64_t count = 1;
  for (int64_t axis : getAxes())
    count *= shapeOf(getX())[axis];
  push(operandGrads, getX(),
       spreadReduction(b, getLoc(), resultGrads[0], getX(), getAxes(),
                       1.0 / double(count)));
  return success();
}

LogicalResult BroadcastToOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                            SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  push(operandGrads, getX(), sumToOperand(b, getLoc(), resultGrads[0], getX()));
  return success();
}

LogicalResult SumToOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  Value g = resultGrads[0];
  if (g.getType() != getX().getType())
    g = b.create<BroadcastToOp>(getLoc(), getX().getType(), g);
  push(operandGrads, getX(), g);
  return success();
}

LogicalResult ConcatOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  // Each input's gradient is its own stretch of dy along the axis.
  ArrayRef<int64_t> full = shapeOf(getResult());
  uint64_t axis = getAxis();
  SmallVector<int64_t> starts(full.size(), 0), ends(full), steps(full.size(), 1);
  int64_t offset = 0;
  for (Value input : getInputs()) {
    int64_t size = shapeOf(input)[axis];
    starts[axis] = offset;
    ends[axis] = offset + size;
    offset += size;
    push(operandGrads, input,
         b.create<SliceOp>(getLoc(), input.getType(), resultGrads[0],
                           b.getDenseI64ArrayAttr(starts),
                           b.getDenseI64ArrayAttr(ends),
                           b.getDenseI64ArrayAttr(steps)));
  }
  return success();
}

LogicalResult SliceOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  push(operandGrads, getX(),
       b.create<SliceGradOp>(getLoc(), getX().getType(), resultGrads[0],
                             getStartsAttr(), getEndsAttr(), getStepsAttr()));
  return success();
}

LogicalResult CastOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  // Only a float-to-float cast is differentiable: cast the gradient back.
  if (!isDifferentiable(getX()) || !isDifferentiable(getResult())) {
    operandGrads.push_back(Value());
    return success();
  }
  push(operandGrads, getX(),
       b.create<CastOp>(getLoc(), getX().getType(), resultGrads[0]));
  return success();
}

LogicalResult GatherOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  push(operandGrads, getData(),
       b.create<GatherGradOp>(getLoc(), getData().getType(), getIndices(),
                              resultGrads[0], getAxisAttr()));
  operandGrads.push_back(Value()); // indices
  return success();
}

//===----------------------------------------------------------------------===//
// Normalization and losses
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  auto grad = b.create<LayerNormGradOp>(
      getLoc(), getX().getType(), getScale().getType(), getBias().getType(),
      getX(), getScale(), resultGrads[0], getAxisAttr(), getEpsilonAttr());
  push(operandGrads, getX(), grad.getDx());
  push(operandGrads, getScale(), grad.getDscale());
  push(operandGrads, getBias(), grad.getDbias());
  return success();
}

LogicalResult
SoftmaxCrossEntropyOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  push(operandGrads, getLogits(),
       b.create<SoftmaxCrossEntropyGradOp>(
           getLoc(), getLogits().getType(), getLogits(), getLabels(),
           resultGrads[0], getIgnoreIndexAttr(), getReductionAttr()));
  operandGrads.push_back(Value()); // labels
  return success();
}

LogicalResult
NextTokenCrossEntropyOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  push(operandGrads, getLogits(),
       b.create<NextTokenCrossEntropyGradOp>(getLoc(), getLogits().getType(),
                                             getLogits(), getTokens(),
                                             resultGrads[0], getIgnoreIndexAttr()));
  operandGrads.push_back(Value()); // tokens
  return success();
}

LogicalResult
LinearCrossEntropyOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  // The logsumexp is an internal of the fused op, read only by its gradient.
  if (resultGrads.size() > 1 && resultGrads[1])
    return emitOpError("the logsumexp result has no gradient rule");
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  auto grad = b.create<LinearCrossEntropyGradOp>(
      getLoc(), getHidden().getType(), getWeight().getType(), getHidden(), getWeight(),
      getTokens(), getLse(), resultGrads[0], getIgnoreIndexAttr(), getChunkAttr());
  push(operandGrads, getHidden(), grad.getDhidden());
  push(operandGrads, getWeight(), grad.getDweight());
  operandGrads.push_back(Value()); // tokens
  return success();
}

//===----------------------------------------------------------------------===//
// Fused attention and rotary embedding
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  // The logsumexp is an internal of the fused op, read only by its gradient.
  if (resultGrads.size() > 1 && resultGrads[1])
    return emitOpError("the logsumexp result has no gradient rule");
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  // Layouts (bshd) as the forward's; dy has y's type, so y's bit (8) and
  // dy's (16) go together.
  int64_t bshd = getBshd() | ((getBshd() & 8) ? 16 : 0);
  auto grad = b.create<AttentionGradOp>(
      getLoc(), getQ().getType(), getK().getType(), getV().getType(), getQ(), getK(),
      getV(), getResult(), getLse(), resultGrads[0], getScaleAttr(), getCausalAttr(),
      bshd ? b.getI64IntegerAttr(bshd) : IntegerAttr());
  push(operandGrads, getQ(), grad.getDq());
  push(operandGrads, getK(), grad.getDk());
  push(operandGrads, getV(), grad.getDv());
  return success();
}

/// True if `v` depends on no trainable parameter, so that it needs no
/// gradient (cos/sin tables built from positions, constants, frozen weights).
static bool isFixed(Value v) {
  SmallVector<Value> work{v};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *op = work.pop_back_val().getDefiningOp();
    if (!op || !seen.insert(op).second)
      continue;
    if (auto param = dyn_cast<ParamOp>(op); param && param.getTrainable())
      return false;
    work.append(op->operand_begin(), op->operand_end());
  }
  return true;
}

LogicalResult RotaryOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  if (!isFixed(getCos()) || !isFixed(getSin()))
    return emitOpError("cos and sin depend on a trainable parameter: rotary has no "
                       "gradient with respect to them");
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  push(operandGrads, getX(),
       b.create<RotaryGradOp>(getLoc(), getX().getType(), resultGrads[0], getCos(),
                              getSin(), getBshd() ? getBshdAttr() : BoolAttr()));
  operandGrads.push_back(Value()); // cos
  operandGrads.push_back(Value()); // sin
  return success();
}

//===----------------------------------------------------------------------===//
// Fused normalizations and activations: one gradient kernel each
//===----------------------------------------------------------------------===//

LogicalResult RmsNormOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  auto grad = b.create<RmsNormGradOp>(getLoc(), getX().getType(), getWeight().getType(),
                                      getX(), getWeight(), resultGrads[0], getAxisAttr(),
                                      getEpsilonAttr());
  push(operandGrads, getX(), grad.getDx());
  push(operandGrads, getWeight(), grad.getDweight());
  return success();
}

LogicalResult SiluOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  push(operandGrads, getX(),
       b.create<SiluGradOp>(getLoc(), getType(), getX(), resultGrads[0]));
  return success();
}

LogicalResult SwigluOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  // Both gradients in one pass over gate, up and dy.
  auto grad = b.create<SwigluGradOp>(getLoc(), getType(), getType(), getGate(), getUp(),
                                     resultGrads[0]);
  push(operandGrads, getGate(), grad.getDgate());
  push(operandGrads, getUp(), grad.getDup());
  return success();
}

LogicalResult GeluOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  if (noGradient(resultGrads, *this, operandGrads))
    return success();
  push(operandGrads, getX(),
       b.create<GeluGradOp>(getLoc(), getType(), getX(), resultGrads[0],
                            getApproximateAttr()));
  return success();
}
