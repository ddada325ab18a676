//===- MathOps.cpp - ONNX MatMul, Gemm, elementwise ops and Softmax ---------===//
#include "GraphImporter.h"

#include "megatrain/Dialect/MtDialect.h"

using namespace mlir;

namespace megatrain::onnx_import {

/// Input `i` as a floating-point tensor.
static FailureOr<Value> floatOperand(NodeImport &n, int i) {
  FailureOr<Value> v = n.operand(i);
  if (failed(v))
    return failure();
  if (!isa<FloatType>(elementOf(*v))) {
    n.error() << "input " << i << " ('" << n.node().input(i)
              << "') must be floating point, got " << v->getType();
    return failure();
  }
  return v;
}

static Value reshape(NodeImport &n, Value x, ArrayRef<int64_t> shape) {
  return n.builder().create<mt::ReshapeOp>(n.loc(), mt::tensorLike(x.getType(), shape),
                                           x);
}

/// numpy matmul: rank >= 2 operands map to mt.matmul directly; a 1-D operand
/// is made a matrix by a reshape and the added dim is dropped afterwards.
static LogicalResult importMatMul(NodeImport &n) {
  FailureOr<Value> a = floatOperand(n, 0), b = failure();
  if (failed(a) || failed(b = floatOperand(n, 1)))
    return failure();
  if (elementOf(*a) != elementOf(*b))
    return n.error() << "operands have different element types";
  ArrayRef<int64_t> as = shapeOf(*a), bs = shapeOf(*b);
  if (as.empty() || bs.empty())
    return n.error() << "operands must have rank >= 1, got " << shapeStr(as) << " and "
                     << shapeStr(bs);
  bool vecA = as.size() == 1, vecB = bs.size() == 1;
  Value lhs = vecA ? reshape(n, *a, {1, as[0]}) : *a;
  Value rhs = vecB ? reshape(n, *b, {bs[0], 1}) : *b;
  auto shape = mt::matmulShape(shapeOf(lhs), shapeOf(rhs), false, false);
  if (failed(shape))
    return n.error() << "cannot multiply " << shapeStr(as) << " by " << shapeStr(bs);
  Value y = n.builder().create<mt::MatMulOp>(
      n.loc(), mt::tensorLike(lhs.getType(), *shape), lhs, rhs, false, false);
  if (vecA || vecB) {
    SmallVector<int64_t> out(shape->begin(), shape->end() - 2);
    if (!vecA)
      out.push_back((*shape)[shape->size() - 2]);
    if (!vecB)
      out.push_back(shape->back());
    y = reshape(n, y, out);
  }
  n.setResult(0, y);
  return success();
}

/// Y = alpha * A' B' + beta * C with A' = transA ? A^T : A, likewise B'.
static LogicalResult importGemm(NodeImport &n) {
  FailureOr<Value> a = floatOperand(n, 0), b = failure();
  if (failed(a) || failed(b = floatOperand(n, 1)))
    return failure();
  if (elementOf(*a) != elementOf(*b))
    return n.error() << "operands have different element types";
  if (shapeOf(*a).size() != 2 || shapeOf(*b).size() != 2)
    return n.error() << "A and B must be matrices, got " << shapeStr(shapeOf(*a))
                     << " and " << shapeStr(shapeOf(*b));
  bool transA = n.intAttr("transA", 0) != 0, transB = n.intAttr("transB", 0) != 0;
  double alpha = n.floatAttr("alpha", 1.0), beta = n.floatAttr("beta", 1.0);
  auto shape = mt::matmulShape(shapeOf(*a), shapeOf(*b), transA, transB);
  if (failed(shape))
    return n.error() << "cannot multiply " << shapeStr(shapeOf(*a))
                     << (transA ? "^T" : "") << " by " << shapeStr(shapeOf(*b))
                     << (transB ? "^T" : "");
  OpBuilder &builder = n.builder();
  Type type = mt::tensorLike(a->getType(), *shape);
  Value y = builder.create<mt::MatMulOp>(n.loc(), type, *a, *b, transA, transB);
  if (alpha != 1.0)
    y = builder.create<mt::ScaleOp>(n.loc(), y, builder.getF64FloatAttr(alpha));
  if (n.hasInput(2) && beta != 0.0) {
    FailureOr<Value> c = floatOperand(n, 2);
    if (failed(c))
      return failure();
    auto full = mt::broadcastShapes(shapeOf(*c), *shape);
    if (failed(full) || ArrayRef<int64_t>(*full) != ArrayRef<int64_t>(*shape))
      return n.error() << "C " << shapeStr(shapeOf(*c)) << " does not broadcast to "
                       << shapeStr(*shape);
    if (elementOf(*c) != elementOf(y))
      return n.error() << "C has a different element type";
    Value bias = *c;
    if (beta != 1.0)
      bias = builder.create<mt::ScaleOp>(n.loc(), bias, builder.getF64FloatAttr(beta));
    y = builder.create<mt::AddOp>(n.loc(), type, y, bias);
  }
  n.setResult(0, y);
  return success();
}

template <typename Op> static LogicalResult importBinary(NodeImport &n) {
  FailureOr<Value> a = floatOperand(n, 0), b = failure();
  if (failed(a) || failed(b = floatOperand(n, 1)))
    return failure();
  if (elementOf(*a) != elementOf(*b))
    return n.error() << "operands have different element types (" << a->getType()
                     << " and " << b->getType() << ")";
  auto shape = mt::broadcastShapes(shapeOf(*a), shapeOf(*b));
  if (failed(shape))
    return n.error() << "operand shapes " << shapeStr(shapeOf(*a)) << " and "
                     << shapeStr(shapeOf(*b)) << " do not broadcast";
  n.setResult(
      0, n.builder().create<Op>(n.loc(), mt::tensorLike(a->getType(), *shape), *a, *b));
  return success();
}

template <typename Op> static LogicalResult importUnary(NodeImport &n) {
  FailureOr<Value> x = floatOperand(n, 0);
  if (failed(x))
    return failure();
  n.setResult(0, n.builder().create<Op>(n.loc(), *x));
  return success();
}

/// Softmax along one axis (opset 13 semantics; axis defaults to -1).
static LogicalResult importSoftmax(NodeImport &n) {
  FailureOr<Value> x = floatOperand(n, 0);
  if (failed(x))
    return failure();
  int64_t rank = shapeOf(*x).size();
  int64_t axis = n.intAttr("axis", -1);
  if (axis < -rank || axis >= rank || rank == 0)
    return n.error() << "axis " << axis << " is out of range for rank " << rank;
  if (axis < 0)
    axis += rank;
  n.setResult(0, n.builder().create<mt::SoftmaxOp>(n.loc(), *x,
                                                   n.builder().getI64IntegerAttr(axis)));
  return success();
}

void registerMathOps(llvm::StringMap<OpImportFn> &table) {
  table["MatMul"] = importMatMul;
  table["Gemm"] = importGemm;
  table["Add"] = importBinary<mt::AddOp>;
  table["Sub"] = importBinary<mt::SubOp>;
  table["Mul"] = importBinary<mt::MulOp>;
  table["Div"] = importBinary<mt::DivOp>;
  table["Relu"] = importUnary<mt::ReluOp>;
  table["Tanh"] = importUnary<mt::TanhOp>;
  table["Sigmoid"] = importUnary<mt::SigmoidOp>;
  table["Softmax"] = importSoftmax;
}

} // namespace megatrain::onnx_import
