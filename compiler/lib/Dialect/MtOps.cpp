//===- MtOps.cpp - shape rules and verifiers of the mt ops ---------------===//
#include "megatrain/Dialect/MtDialect.h"
#include "megatrain/plan/PointwiseProgram.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace megatrain::mt;

//===----------------------------------------------------------------------===//
// Shape rules
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<int64_t>>
megatrain::mt::broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return failure();
    out[i] = da == 1 ? db : da;
  }
  return out;
}

FailureOr<SmallVector<int64_t>>
megatrain::mt::matmulShape(ArrayRef<int64_t> a, ArrayRef<int64_t> b,
                           bool transposeA, bool transposeB) {
  if (a.size() < 2 || b.size() < 2)
    return failure();
  int64_t m = a[a.size() - (transposeA ? 1 : 2)];
  int64_t ka = a[a.size() - (transposeA ? 2 : 1)];
  int64_t kb = b[b.size() - (transposeB ? 1 : 2)];
  int64_t n = b[b.size() - (transposeB ? 2 : 1)];
  if (ka != kb)
    return failure();
  auto batch = broadcastShapes(a.drop_back(2), b.drop_back(2));
  if (failed(batch))
    return failure();
  SmallVector<int64_t> out = *batch;
  out.push_back(m);
  out.push_back(n);
  return out;
}

SmallVector<int64_t> megatrain::mt::reducedShape(ArrayRef<int64_t> shape,
                                                 ArrayRef<int64_t> axes,
                                                 bool keepdims) {
  SmallVector<int64_t> out;
  for (int64_t i = 0, e = shape.size(); i < e; ++i) {
    bool reduced = llvm::is_contained(axes, i);
    if (!reduced)
      out.push_back(shape[i]);
    else if (keepdims)
      out.push_back(1);
  }
  return out;
}

FailureOr<SmallVector<int64_t>>
megatrain::mt::sliceShape(ArrayRef<int64_t> shape, ArrayRef<int64_t> starts,
                          ArrayRef<int64_t> ends, ArrayRef<int64_t> steps) {
  if (starts.size() != shape.size() || ends.size() != shape.size() ||
      steps.size() != shape.size())
    return failure();
  SmallVector<int64_t> out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (starts[d] < 0 || starts[d] > shape[d] || ends[d] < 0 ||
        ends[d] > shape[d] || steps[d] < 1)
      return failure();
    int64_t span = ends[d] - starts[d];
    out.push_back(span <= 0 ? 0 : (span + steps[d] - 1) / steps[d]);
  }
  return out;
}

RankedTensorType megatrain::mt::tensorLike(Type like, ArrayRef<int64_t> shape) {
  Type element = like;
  if (auto t = dyn_cast<ShapedType>(like))
    element = t.getElementType();
  return RankedTensorType::get(shape, element);
}

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}
static Type elementOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}
static std::string shapeStr(ArrayRef<int64_t> s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? "x" : "") + std::to_string(s[i]);
  return out + "]";
}

//===----------------------------------------------------------------------===//
// Verifiers
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::verify() {
  auto type = cast<ShapedType>(getValue().getType());
  if (type.getShape() != getType().getShape() ||
      type.getElementType() != getType().getElementType())
    return emitOpError("value type ") << type << " does not match result type "
                                      << getType();
  return success();
}

template <typename BinaryOp> static LogicalResult verifyBinary(BinaryOp op) {
  auto shape = broadcastShapes(shapeOf(op.getLhs()), shapeOf(op.getRhs()));
  if (failed(shape))
    return op.emitOpError("operand shapes ")
           << shapeStr(shapeOf(op.getLhs())) << " and "
           << shapeStr(shapeOf(op.getRhs())) << " do not broadcast";
  if (ArrayRef<int64_t>(*shape) != shapeOf(op.getResult()))
    return op.emitOpError("result shape ")
           << shapeStr(shapeOf(op.getResult())) << " is not the broadcast shape "
           << shapeStr(*shape);
  if (elementOf(op.getLhs()) != elementOf(op.getRhs()) ||
      elementOf(op.getLhs()) != elementOf(op.getResult()))
    return op.emitOpError("operands and result must have one element type");
  return success();
}
LogicalResult AddOp::verify() { return verifyBinary(*this); }
LogicalResult SubOp::verify() { return verifyBinary(*this); }
LogicalResult MulOp::verify() { return verifyBinary(*this); }
LogicalResult DivOp::verify() { return verifyBinary(*this); }

LogicalResult MaxOp::verify() { return verifyBinary(*this); }
LogicalResult MinOp::verify() { return verifyBinary(*this); }

template <typename MinMaxGradOp>
static LogicalResult verifyMinMaxGrad(MinMaxGradOp op) {
  auto shape = broadcastShapes(shapeOf(op.getLhs()), shapeOf(op.getRhs()));
  if (failed(shape) || ArrayRef<int64_t>(*shape) != shapeOf(op.getDy()))
    return op.emitOpError("dy shape ")
           << shapeStr(shapeOf(op.getDy())) << " is not the broadcast of "
           << shapeStr(shapeOf(op.getLhs())) << " and "
           << shapeStr(shapeOf(op.getRhs()));
  if (op.getDlhs().getType() != op.getDy().getType() ||
      op.getDrhs().getType() != op.getDy().getType())
    return op.emitOpError("both results must have dy's type ")
           << op.getDy().getType();
  return success();
}
LogicalResult MaxGradOp::verify() { return verifyMinMaxGrad(*this); }
LogicalResult MinGradOp::verify() { return verifyMinMaxGrad(*this); }

LogicalResult IsNanOp::verify() {
  if (shapeOf(getResult()) != shapeOf(getX()))
    return emitOpError("result shape ") << shapeStr(shapeOf(getResult()))
                                        << " must be the input's "
                                        << shapeStr(shapeOf(getX()));
  return success();
}

LogicalResult WhereOp::verify() {
  auto xy = broadcastShapes(shapeOf(getX()), shapeOf(getY()));
  FailureOr<SmallVector<int64_t>> shape = failure();
  if (succeeded(xy))
    shape = broadcastShapes(shapeOf(getCond()), *xy);
  if (failed(shape))
    return emitOpError("shapes ") << shapeStr(shapeOf(getCond())) << ", "
                                  << shapeStr(shapeOf(getX())) << " and "
                                  << shapeStr(shapeOf(getY()))
                                  << " do not broadcast";
  if (ArrayRef<int64_t>(*shape) != shapeOf(getResult()))
    return emitOpError("result shape ")
           << shapeStr(shapeOf(getResult())) << " is not the broadcast shape "
           << shapeStr(*shape);
  if (elementOf(getX()) != elementOf(getY()) ||
      elementOf(getX()) != elementOf(getResult()))
    return emitOpError("x, y and the result must have one element type");
  return success();
}

LogicalResult ConcatOp::verify() {
  OperandRange inputs = getInputs();
  if (inputs.empty() || inputs.size() > 8)
    return emitOpError("takes 1 to 8 inputs (the runtime's operand limit; "
                       "nest concats for more), got ")
           << inputs.size();
  ArrayRef<int64_t> first = shapeOf(inputs[0]);
  int64_t rank = first.size(), axis = getAxis();
  if (axis < 0 || axis >= rank)
    return emitOpError("axis ") << axis << " out of range for rank " << rank;
  SmallVector<int64_t> expect(first.begin(), first.end());
  expect[axis] = 0;
  for (auto [i, input] : llvm::enumerate(inputs)) {
    ArrayRef<int64_t> shape = shapeOf(input);
    if (elementOf(input) != elementOf(getResult()))
      return emitOpError("input #") << i << " has element type "
                                    << elementOf(input) << ", the result "
                                    << elementOf(getResult());
    bool agrees = (int64_t)shape.size() == rank;
    for (int64_t d = 0; agrees && d < rank; ++d)
      agrees = d == axis || shape[d] == first[d];
    if (!agrees)
      return emitOpError("input #")
             << i << " shape " << shapeStr(shape) << " differs from input #0 "
             << shapeStr(first) << " outside axis " << axis;
    expect[axis] += shape[axis];
  }
  if (ArrayRef<int64_t>(expect) != shapeOf(getResult()))
    return emitOpError("result shape ") << shapeStr(shapeOf(getResult()))
                                        << ", expected " << shapeStr(expect);
  return success();
}

/// Shared by slice and slice_grad: `in` sliced by the ranges must be `out`.
static LogicalResult verifySlice(Operation *op, ArrayRef<int64_t> in,
                                 ArrayRef<int64_t> out, ArrayRef<int64_t> starts,
                                 ArrayRef<int64_t> ends, ArrayRef<int64_t> steps) {
  if (starts.size() != in.size() || ends.size() != in.size() ||
      steps.size() != in.size())
    return op->emitOpError("starts, ends and steps need one entry per dim of ")
           << shapeStr(in);
  for (size_t d = 0; d < in.size(); ++d) {
    if (steps[d] < 1)
      return op->emitOpError("step ")
             << steps[d] << " of dim " << d
             << " must be >= 1 (negative steps are not supported)";
    if (starts[d] < 0 || starts[d] > in[d] || ends[d] < 0 || ends[d] > in[d])
      return op->emitOpError("range [")
             << starts[d] << ", " << ends[d] << ") of dim " << d
             << " is not normalized to [0, " << in[d] << "]";
  }
  SmallVector<int64_t> expect = *sliceShape(in, starts, ends, steps);
  if (ArrayRef<int64_t>(expect) != out)
    return op->emitOpError("sliced shape ")
           << shapeStr(out) << ", expected " << shapeStr(expect);
  return success();
}

LogicalResult SliceOp::verify() {
  if (elementOf(getX()) != elementOf(getResult()))
    return emitOpError("slice cannot change the element type");
  return verifySlice(*this, shapeOf(getX()), shapeOf(getResult()), getStarts(),
                     getEnds(), getSteps());
}

LogicalResult SliceGradOp::verify() {
  if (elementOf(getDy()) != elementOf(getResult()))
    return emitOpError("slice_grad cannot change the element type");
  return verifySlice(*this, shapeOf(getResult()), shapeOf(getDy()), getStarts(),
                     getEnds(), getSteps());
}

LogicalResult CastOp::verify() {
  if (shapeOf(getResult()) != shapeOf(getX()))
    return emitOpError("result shape ") << shapeStr(shapeOf(getResult()))
                                        << " must be the input's "
                                        << shapeStr(shapeOf(getX()));
  // bf16 converts to and from f32 and f64 only.
  Type from = cast<RankedTensorType>(getX().getType()).getElementType();
  Type to = cast<RankedTensorType>(getResult().getType()).getElementType();
  auto floating = [](Type t) { return t.isF32() || t.isF64() || t.isBF16(); };
  if ((from.isBF16() || to.isBF16()) && !(floating(from) && floating(to)))
    return emitOpError("bf16 casts only to and from f32 and f64, not ")
           << (from.isBF16() ? to : from);
  return success();
}

/// The discardable compute precision attribute (mt-precision), when
/// present, names one.
static LogicalResult verifyPrecision(Operation *op) {
  Attribute attr = op->getAttr("precision");
  if (!attr)
    return success();
  auto precision = dyn_cast<StringAttr>(attr);
  if (!precision)
    return op->emitOpError("precision must be a string");
  if (precision.getValue() != "fp32" &&
      precision.getValue() != "tf32" && precision.getValue() != "bf16")
    return op->emitOpError("precision must be fp32, tf32 or bf16, got '")
           << precision.getValue() << "'";
  return success();
}

/// The product rules shared by mt.matmul, mt.matmul_add, mt.matmul_bias_gelu
/// and mt.matmul_gelu_grad (`result` the product's): shapes, one element type or
/// two bf16 operands accumulated into f32, the precision.
template <typename ProductOp>
static LogicalResult verifyProduct(ProductOp op, Value result) {
  auto shape = matmulShape(shapeOf(op.getA()), shapeOf(op.getB()),
                           op.getTransposeA(), op.getTransposeB());
  if (failed(shape))
    return op.emitOpError("cannot multiply ")
           << shapeStr(shapeOf(op.getA())) << (op.getTransposeA() ? "^T" : "")
           << " by " << shapeStr(shapeOf(op.getB()))
           << (op.getTransposeB() ? "^T" : "");
  if (ArrayRef<int64_t>(*shape) != shapeOf(result))
    return op.emitOpError("result shape ") << shapeStr(shapeOf(result))
                                           << ", expected " << shapeStr(*shape);
  Type a = cast<RankedTensorType>(op.getA().getType()).getElementType();
  Type b = cast<RankedTensorType>(op.getB().getType()).getElementType();
  Type y = cast<RankedTensorType>(result.getType()).getElementType();
  if (a != b)
    return op.emitOpError("operands have element types ") << a << " and " << b;
  if (y != a && !(a.isBF16() && y.isF32()))
    return op.emitOpError("result element type ")
           << y << " with " << a << " operands (only bf16 operands may give f32)";
  return verifyPrecision(op);
}

LogicalResult MatMulOp::verify() { return verifyProduct(*this, getResult()); }

LogicalResult MatMulAddOp::verify() {
  // r has the result's type, or is a bias over its last dim.
  auto r = cast<RankedTensorType>(getR().getType());
  auto y = cast<RankedTensorType>(getResult().getType());
  bool bias = r.getRank() == 1 && y.getRank() >= 1 &&
              r.getDimSize(0) == y.getShape().back() &&
              r.getElementType() == y.getElementType();
  if (r != y && !bias)
    return emitOpError("addend type ")
           << r << " is neither the result type " << y
           << " nor a bias over its last dim";
  return verifyProduct(*this, getResult());
}

/// A GELU epilogue's pre-activation z and its result: one f32 tensor type.
static LogicalResult verifyPreActivation(Operation *op, Value z, Value result) {
  auto type = cast<RankedTensorType>(result.getType());
  if (z.getType() != type)
    return op->emitOpError("pre-activation type ") << z.getType() << " differs from the result type " << type;
  if (!type.getElementType().isF32())
    return op->emitOpError("result element type ") << type.getElementType() << ", expected f32";
  return success();
}

LogicalResult MatMulBiasGeluOp::verify() {
  // y and z are one f32 tensor type; the bias is f32 [n], n y's last dim.
  if (failed(verifyPreActivation(*this, getZ(), getY())))
    return failure();
  auto y = cast<RankedTensorType>(getY().getType());
  auto bias = cast<RankedTensorType>(getBias().getType());
  if (y.getRank() < 1 || bias.getRank() != 1 || bias.getDimSize(0) != y.getShape().back() ||
      !bias.getElementType().isF32())
    return emitOpError("bias type ") << bias << " is not an f32 bias over the last dim of " << y;
  return verifyProduct(*this, getY());
}

LogicalResult MatMulGeluGradOp::verify() {
  // dz and the pre-activation z are one f32 tensor type.
  if (failed(verifyPreActivation(*this, getZ(), getDz())))
    return failure();
  return verifyProduct(*this, getDz());
}

LogicalResult SoftmaxOp::verify() {
  int64_t rank = shapeOf(getX()).size();
  // The attribute is read back as unsigned; a negative axis must fail as out of range.
  int64_t axis = static_cast<int64_t>(getAxis());
  if (axis < 0 || axis >= rank)
    return emitOpError("axis ") << axis << " out of range for rank " << rank;
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = cast<RankedTensorType>(getX().getType());
  auto out = cast<RankedTensorType>(getResult().getType());
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ") << shapeStr(in.getShape()) << " to "
                                          << shapeStr(out.getShape());
  if (in.getElementType() != out.getElementType())
    return emitOpError("reshape cannot change the element type");
  return success();
}

LogicalResult TransposeOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getX()), out = shapeOf(getResult());
  ArrayRef<int64_t> perm = getPerm();
  if (perm.size() != in.size() || out.size() != in.size())
    return emitOpError("perm size must equal the rank");
  SmallVector<bool> seen(in.size(), false);
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] < 0 || perm[i] >= (int64_t)in.size() || seen[perm[i]])
      return emitOpError("perm is not a permutation");
    seen[perm[i]] = true;
    if (out[i] != in[perm[i]])
      return emitOpError("result dim ") << i << " must be " << in[perm[i]];
  }
  return success();
}

template <typename ReduceOp> static LogicalResult verifyReduce(ReduceOp op) {
  ArrayRef<int64_t> in = shapeOf(op.getX());
  ArrayRef<int64_t> axes = op.getAxes();
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] < 0 || axes[i] >= (int64_t)in.size() ||
        (i > 0 && axes[i] <= axes[i - 1]))
      return op.emitOpError("axes must be sorted, unique and in [0, rank)");
  if (ArrayRef<int64_t>(reducedShape(in, axes, op.getKeepdims())) !=
      shapeOf(op.getResult()))
    return op.emitOpError("result shape does not match the reduction");
  return success();
}
LogicalResult ReduceSumOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceMeanOp::verify() { return verifyReduce(*this); }

static LogicalResult verifyBroadcastPair(Operation *op, ArrayRef<int64_t> small,
                                         ArrayRef<int64_t> big) {
  auto shape = broadcastShapes(small, big);
  if (failed(shape) || ArrayRef<int64_t>(*shape) != big)
    return op->emitOpError("shape ") << shapeStr(small)
                                     << " does not broadcast to " << shapeStr(big);
  return success();
}
LogicalResult BroadcastToOp::verify() {
  return verifyBroadcastPair(*this, shapeOf(getX()), shapeOf(getResult()));
}
LogicalResult SumToOp::verify() {
  return verifyBroadcastPair(*this, shapeOf(getResult()), shapeOf(getX()));
}

LogicalResult GatherOp::verify() {
  ArrayRef<int64_t> data = shapeOf(getData()), idx = shapeOf(getIndices());
  int64_t axis = getAxis();
  if (axis < 0 || axis >= (int64_t)data.size())
    return emitOpError("axis ") << axis << " out of range";
  if (!elementOf(getIndices()).isInteger(64))
    return emitOpError("indices must be i64");
  SmallVector<int64_t> expect(data.begin(), data.begin() + axis);
  expect.append(idx.begin(), idx.end());
  expect.append(data.begin() + axis + 1, data.end());
  if (ArrayRef<int64_t>(expect) != shapeOf(getResult()))
    return emitOpError("result shape must be ") << shapeStr(expect);
  return success();
}

LogicalResult LayerNormOp::verify() {
  ArrayRef<int64_t> x = shapeOf(getX());
  int64_t axis = getAxis();
  if (axis < 0 || axis >= (int64_t)x.size())
    return emitOpError("axis ") << axis << " out of range";
  ArrayRef<int64_t> norm = x.drop_front(axis);
  if (shapeOf(getScale()) != norm || shapeOf(getBias()) != norm)
    return emitOpError("scale and bias must have shape ") << shapeStr(norm);
  if (shapeOf(getResult()) != x)
    return emitOpError("result must have the input's shape");
  return success();
}

LogicalResult SoftmaxCrossEntropyOp::verify() {
  ArrayRef<int64_t> x = shapeOf(getLogits()), y = shapeOf(getLabels());
  if (x.size() < 2 || y.size() != x.size() - 1 || y[0] != x[0] ||
      y.drop_front() != x.drop_front(2))
    return emitOpError("logits ") << shapeStr(x) << " and labels " << shapeStr(y)
                                  << " must be [N, C, D...] and [N, D...]";
  if (getReduction() != "mean" && getReduction() != "sum")
    return emitOpError("reduction must be \"mean\" or \"sum\"");
  if (!shapeOf(getResult()).empty())
    return emitOpError("result must be a scalar");
  return success();
}

LogicalResult NextTokenCrossEntropyOp::verify() {
  ArrayRef<int64_t> x = shapeOf(getLogits()), t = shapeOf(getTokens());
  if (x.size() != 3 || t.size() != 2 || x[0] != t[0] || x[1] != t[1])
    return emitOpError("logits ") << shapeStr(x) << " and tokens " << shapeStr(t)
                                  << " must be [B, T, V] and [B, T]";
  if (!elementOf(getTokens()).isInteger(64))
    return emitOpError("tokens must be i64");
  if (!shapeOf(getResult()).empty())
    return emitOpError("result must be a scalar");
  return success();
}

LogicalResult LinearCrossEntropyOp::verify() {
  ArrayRef<int64_t> h = shapeOf(getHidden()), w = shapeOf(getWeight()),
                    t = shapeOf(getTokens());
  if (h.size() != 3 || w.size() != 2 || t.size() != 2 || h[0] != t[0] ||
      h[1] != t[1] || w[1] != h[2])
    return emitOpError("hidden ") << shapeStr(h) << ", weight " << shapeStr(w)
                                  << " and tokens " << shapeStr(t)
                                  << " must be [B, T, H], [V, H] and [B, T]";
  if (elementOf(getHidden()) != elementOf(getWeight()))
    return emitOpError("hidden and weight must have one element type");
  if (!elementOf(getTokens()).isInteger(64))
    return emitOpError("tokens must be i64");
  if (getChunk() < 1)
    return emitOpError("chunk must be at least 1, got ") << getChunk();
  if (!shapeOf(getResult()).empty())
    return emitOpError("result must be a scalar");
  if (shapeOf(getLse()) != t)
    return emitOpError("lse must have the tokens' shape ") << shapeStr(t);
  return success();
}

LogicalResult LossOp::verify() {
  if (!shapeOf(getValue()).empty())
    return emitOpError("the loss must be a scalar, got ")
           << shapeStr(shapeOf(getValue()));
  return success();
}

//===----------------------------------------------------------------------===//
// Verifiers: fused attention and rotary embedding
//===----------------------------------------------------------------------===//

/// The [B, H, S, D] shape of an attention or rotary operand that lies as
/// [B, S, H, D] when `bshd` (its dims 1 and 2 swapped back); `shape` itself
/// otherwise, or when it is not of rank 4.
static SmallVector<int64_t> headMajor(ArrayRef<int64_t> shape, bool bshd) {
  SmallVector<int64_t> out(shape);
  if (bshd && out.size() == 4)
    std::swap(out[1], out[2]);
  return out;
}

/// The attention operands' layout bits: q, k, v, y, dy.
enum AttentionLayoutBit : int64_t { kBshdQ = 1, kBshdK = 2, kBshdV = 4, kBshdY = 8, kBshdDy = 16 };

/// Shapes, element types and the causal bound shared by attention and its
/// gradient, read through the `bshd` bits (`roles`: the bits the op takes).
template <typename Op>
static LogicalResult verifyAttentionOperands(Op op, int64_t roles) {
  const int64_t bits = op.getBshd();
  if (bits < 0 || (bits & ~roles) != 0)
    return op.emitOpError("bshd ") << bits << " has bits outside " << roles
                                   << " (q 1, k 2, v 4, y 8"
                                   << (roles & kBshdDy ? ", dy 16)" : ")");
  for (Value operand : op->getOperands())
    if (shapeOf(operand).size() != (operand == op.getLse() ? 3u : 4u))
      return op.emitOpError("q, k, v and y must have rank 4 and lse rank 3");
  SmallVector<int64_t> q = headMajor(shapeOf(op.getQ()), bits & kBshdQ);
  SmallVector<int64_t> k = headMajor(shapeOf(op.getK()), bits & kBshdK);
  SmallVector<int64_t> v = headMajor(shapeOf(op.getV()), bits & kBshdV);
  if (k != v || k[0] != q[0] || k[3] != q[3] || k[1] <= 0 || q[1] % k[1] != 0)
    return op.emitOpError("q ") << shapeStr(q) << ", k " << shapeStr(k) << " and v "
                                << shapeStr(v)
                                << " must be [B, Hq, Sq, D] and [B, Hkv, Skv, D] with "
                                   "Hkv dividing Hq (read through bshd "
                                << bits << ")";
  // One element type throughout, or bf16 tensors with an f32 lse under
  // precision "bf16" (mt-bf16-attention).
  const bool bf16 = elementOf(op.getQ()).isBF16();
  auto expected = [&](Value value) {
    return bf16 && value == op.getLse() ? Type(Float32Type::get(op.getContext()))
                                        : elementOf(op.getQ());
  };
  SmallVector<Value> values(op->getOperands());
  llvm::append_range(values, op->getResults());
  for (Value value : values)
    if (elementOf(value) != expected(value))
      return op.emitOpError(bf16 ? "with bf16 q, every operand and result but lse (f32) must be bf16"
                                 : "operands and results must share one element type");
  if (bf16) {
    auto precision = op->template getAttrOfType<StringAttr>("precision");
    if (!precision || precision.getValue() != "bf16")
      return op.emitOpError("bf16 operands need precision = \"bf16\"");
  }
  if (shapeOf(op.getLse()) != ArrayRef<int64_t>(q).drop_back())
    return op.emitOpError("lse must have shape ")
           << shapeStr(ArrayRef<int64_t>(q).drop_back());
  if (op.getCausal() && q[2] > k[2])
    return op.emitOpError("causal attention needs Sq <= Skv, got ")
           << q[2] << " and " << k[2];
  return success();
}

LogicalResult AttentionOp::verify() {
  if (shapeOf(getResult()).size() != 4)
    return emitOpError("result must have rank 4");
  if (failed(verifyAttentionOperands(*this, kBshdQ | kBshdK | kBshdV | kBshdY)))
    return failure();
  const int64_t bits = getBshd();
  SmallVector<int64_t> q = headMajor(shapeOf(getQ()), bits & kBshdQ);
  if (headMajor(shapeOf(getResult()), bits & kBshdY) != q)
    return emitOpError("result must have q's shape ")
           << shapeStr(q) << " (read through bshd " << bits << ")";
  return verifyPrecision(*this);
}

LogicalResult AttentionGradOp::verify() {
  for (Value result : getResults())
    if (shapeOf(result).size() != 4)
      return emitOpError("dq, dk and dv must have rank 4");
  if (failed(verifyAttentionOperands(*this, kBshdQ | kBshdK | kBshdV | kBshdY | kBshdDy)))
    return failure();
  const int64_t bits = getBshd();
  SmallVector<int64_t> q = headMajor(shapeOf(getQ()), bits & kBshdQ);
  if (headMajor(shapeOf(getY()), bits & kBshdY) != q ||
      headMajor(shapeOf(getDy()), bits & kBshdDy) != q)
    return emitOpError("y and dy must have q's shape ")
           << shapeStr(q) << " (read through bshd " << bits << ")";
  if (getDq().getType() != getQ().getType() || getDk().getType() != getK().getType() ||
      getDv().getType() != getV().getType())
    return emitOpError("dq, dk and dv must have the types of q, k and v");
  return success();
}

/// rotary and rotary_grad: `x` (x or dy) and the tables, through `bshd`.
template <typename Op>
static LogicalResult verifyRotary(Op op, Value x) {
  ArrayRef<int64_t> stored = shapeOf(x);
  if (stored.empty() || stored.back() % 2 != 0)
    return op.emitOpError("x ") << shapeStr(stored) << " must have an even last dim";
  if (op.getBshd() && stored.size() != 4)
    return op.emitOpError("bshd needs x of rank 4, got ") << shapeStr(stored);
  SmallVector<int64_t> logical = headMajor(stored, op.getBshd());
  for (Value table : {op.getCos(), op.getSin()}) {
    ArrayRef<int64_t> t = shapeOf(table);
    auto shape = broadcastShapes(t, logical);
    if (t.empty() || t.back() != logical.back() || failed(shape) ||
        ArrayRef<int64_t>(*shape) != ArrayRef<int64_t>(logical))
      return op.emitOpError("cos and sin ")
             << shapeStr(t) << " must broadcast to x " << shapeStr(logical)
             << (op.getBshd() ? " (x read as [B, H, S, D])" : "")
             << " and keep its last dim";
  }
  // One element type throughout, or x and the result each f32 or bf16 with
  // f32 tables (mt-bf16-attention, mt-fold-norm-casts).
  Type xe = elementOf(x), ye = elementOf(op.getResult());
  auto narrow = [](Type t) { return t.isF32() || t.isBF16(); };
  const bool mixed = narrow(xe) && narrow(ye) && elementOf(op.getCos()).isF32() &&
                     elementOf(op.getSin()).isF32();
  const bool uniform = xe == ye && elementOf(op.getCos()) == xe && elementOf(op.getSin()) == xe;
  if (!uniform && !mixed)
    return op.emitOpError("x, cos, sin and the result must share one element type, or x and the "
                          "result be f32 or bf16 with f32 cos and sin");
  if (shapeOf(op.getResult()) != stored)
    return op.emitOpError("result must have x's shape ") << shapeStr(stored);
  return success();
}

LogicalResult RotaryOp::verify() { return verifyRotary(*this, getX()); }

LogicalResult RotaryGradOp::verify() { return verifyRotary(*this, getDy()); }

LogicalResult PointwiseOp::verify() {
  std::string wrong = megatrain::pointwise::checkProgram(
      static_cast<int>(getInputs().size()), getCode().data(), getCode().size(),
      getConstants().size(), getOutputs().data(), getOutputs().size());
  if (wrong.empty() && getOutputs().size() != getResults().size())
    wrong = "'outputs' names " + std::to_string(getOutputs().size()) +
            " registers for " + std::to_string(getResults().size()) + " results";
  if (!wrong.empty())
    return emitOpError(wrong);
  ArrayRef<int64_t> shape = shapeOf(getResults().front());
  Type compute;
  for (Value value : getInputs()) {
    auto broadcast = broadcastShapes(shapeOf(value), shape);
    if (failed(broadcast) || ArrayRef<int64_t>(*broadcast) != shape)
      return emitOpError("input ") << shapeStr(shapeOf(value))
                                   << " does not broadcast to the result shape "
                                   << shapeStr(shape);
  }
  for (Value value : getResults())
    if (shapeOf(value) != shape)
      return emitOpError("results must share one shape, not ")
             << shapeStr(shapeOf(value)) << " and " << shapeStr(shape);
  SmallVector<Value> operands(getInputs());
  llvm::append_range(operands, getResults());
  for (Value value : operands) {
    Type element = elementOf(value);
    if (element.isBF16())
      continue;
    if (!element.isF32() && !element.isF64())
      return emitOpError("operands are f32, f64 or bf16, not ") << element;
    if (compute && element != compute)
      return emitOpError("computes in one of f32 and f64, not both");
    compute = element;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Memory tiers
//===----------------------------------------------------------------------===//

LogicalResult OffloadOp::verify() {
  if (getValue().getDefiningOp<OffloadOp>())
    return emitOpError("operand is already a host value (an mt.offload result)");
  for (Operation *user : getResult().getUsers())
    if (!isa<PrefetchOp>(user))
      return emitOpError("result is a host value; only mt.prefetch may read it, not ")
             << user->getName();
  return success();
}

LogicalResult PrefetchOp::verify() {
  if (!getHost().getDefiningOp<OffloadOp>())
    return emitOpError("operand must be an mt.offload result (a host value)");
  return success();
}

// Fused normalizations and activations
//===----------------------------------------------------------------------===//

/// rms_norm and rms_norm_grad: an axis inside x and a weight of the
/// normalized shape x.shape[axis:].
static LogicalResult verifyRmsNorm(Operation *op, Value x, Value weight, int64_t axis) {
  ArrayRef<int64_t> xs = shapeOf(x);
  if (axis < 0 || axis >= (int64_t)xs.size())
    return op->emitOpError("axis ") << axis << " out of range";
  ArrayRef<int64_t> norm = xs.drop_front(axis);
  if (shapeOf(weight) != norm)
    return op->emitOpError("weight must have shape ") << shapeStr(norm);
  if (elementOf(weight) != elementOf(x))
    return op->emitOpError("weight must have x's element type");
  return success();
}

LogicalResult RmsNormOp::verify() {
  if (failed(verifyRmsNorm(*this, getX(), getWeight(), getAxis())))
    return failure();
  // The result has x's type, or is its bf16 copy when x is f32
  // (mt-fold-norm-casts).
  auto x = cast<RankedTensorType>(getX().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  const bool narrowed = x.getElementType().isF32() && result.getElementType().isBF16() &&
                        result.getShape() == x.getShape();
  if (result != x && !narrowed)
    return emitOpError("result must have the input's type (or its shape in bf16 when x is f32)");
  return success();
}

LogicalResult RmsNormGradOp::verify() {
  if (failed(verifyRmsNorm(*this, getX(), getWeight(), getAxis())))
    return failure();
  if (getDy().getType() != getX().getType() || getDx().getType() != getX().getType())
    return emitOpError("dy and dx must have x's type");
  if (getDweight().getType() != getWeight().getType())
    return emitOpError("dweight must have the weight's type");
  return success();
}

LogicalResult RmsNormGradAddOp::verify() {
  if (failed(verifyRmsNorm(*this, getX(), getWeight(), getAxis())))
    return failure();
  if (getDy().getType() != getX().getType() || getAddend().getType() != getX().getType() ||
      getDx().getType() != getX().getType())
    return emitOpError("dy, addend and dx must have x's type");
  if (getDweight().getType() != getWeight().getType())
    return emitOpError("dweight must have the weight's type");
  if (Value copy = getDxBf16()) {
    auto x = cast<RankedTensorType>(getX().getType());
    auto bf16 = cast<RankedTensorType>(copy.getType());
    if (!x.getElementType().isF32() || !bf16.getElementType().isBF16() || bf16.getShape() != x.getShape())
      return emitOpError("dx_bf16 must be x's shape in bf16, and x f32");
  }
  return success();
}

static LogicalResult verifyGeluApproximation(Operation *op, StringRef approximate) {
  if (approximate != "none" && approximate != "tanh")
    return op->emitOpError("approximate must be \"none\" or \"tanh\", got \"")
           << approximate << "\"";
  return success();
}

LogicalResult GeluOp::verify() { return verifyGeluApproximation(*this, getApproximate()); }

LogicalResult GeluGradOp::verify() { return verifyGeluApproximation(*this, getApproximate()); }

// Micro-batch gradient parts (mt-microbatch).

LogicalResult GradPartOp::verify() {
  // I64Attr getters are unsigned; the attributes are signed.
  int64_t count = static_cast<int64_t>(getCount());
  int64_t index = static_cast<int64_t>(getIndex());
  if (count < 2)
    return emitOpError("count must be >= 2 (one micro-batch has no parts), got ")
           << count;
  if (index < 0 || index > count - 2)
    return emitOpError("index must lie in [0, count - 2] (the last part is the "
                       "mt.param_grad), got ")
           << index << " with count " << count;
  return success();
}

// End of micro-batch gradient parts.

#define GET_OP_CLASSES
#include "megatrain/Dialect/MtOps.cpp.inc"
