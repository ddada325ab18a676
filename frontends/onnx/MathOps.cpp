//===- MathOps.cpp - ONNX MatMul, Gemm, elementwise math, Softmax, Gelu -----===//
//
// Run-time math. Nodes whose inputs are all known at import time never get
// here: the ConstantFolder evaluates them (GraphImporter::tryFold).
//
//===----------------------------------------------------------------------===//
#include "GraphImporter.h"
#include "OnnxShapes.h"

#include "megatrain/Dialect/MtDialect.h"

#include <cmath>

using namespace mlir;

namespace megatrain::onnx_import {

/// Input `i` as a floating-point tensor.
static FailureOr<Value> floatOperand(NodeImport &n, int i) {
  FailureOr<Value> v = n.operand(i);
  if (failed(v))
    return failure();
  if (!isa<FloatType>(elementOf(*v))) {
    n.error() << n.inputLabel(i) << " must be floating point, got " << v->getType();
    return failure();
  }
  return v;
}

static Value reshape(NodeImport &n, Value x, ArrayRef<int64_t> shape) {
  return n.builder().create<mt::ReshapeOp>(n.loc(), mt::tensorLike(x.getType(), shape),
                                           x);
}

/// A scalar of x's element type (for compositions such as Gelu).
static Value scalarLike(NodeImport &n, Value x, double value) {
  OpBuilder &b = n.builder();
  return b.create<mt::FillOp>(n.loc(), mt::tensorLike(x.getType(), {}),
                              b.getF64FloatAttr(value));
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

template <typename Op> static FailureOr<Value> binary(NodeImport &n, Value a, Value b) {
  if (elementOf(a) != elementOf(b)) {
    n.error() << "operands have different element types (" << a.getType() << " and "
              << b.getType() << ")";
    return failure();
  }
  auto shape = mt::broadcastShapes(shapeOf(a), shapeOf(b));
  if (failed(shape)) {
    n.error() << "operand shapes " << shapeStr(shapeOf(a)) << " and "
              << shapeStr(shapeOf(b)) << " do not broadcast";
    return failure();
  }
  return n.builder()
      .create<Op>(n.loc(), mt::tensorLike(a.getType(), *shape), a, b)
      .getResult();
}

template <typename Op> static LogicalResult importBinary(NodeImport &n) {
  FailureOr<Value> a = floatOperand(n, 0), b = failure();
  if (failed(a) || failed(b = floatOperand(n, 1)))
    return failure();
  FailureOr<Value> y = binary<Op>(n, *a, *b);
  if (failed(y))
    return failure();
  n.setResult(0, *y);
  return success();
}

/// Max and Min are variadic in ONNX: folded left to right.
template <typename Op> static LogicalResult importVariadic(NodeImport &n) {
  FailureOr<Value> acc = floatOperand(n, 0);
  if (failed(acc))
    return failure();
  for (int k = 1; k < n.node().input_size(); ++k) {
    if (!n.hasInput(k))
      continue;
    FailureOr<Value> next = floatOperand(n, k);
    if (failed(next) || failed(acc = binary<Op>(n, *acc, *next)))
      return failure();
  }
  n.setResult(0, *acc);
  return success();
}

template <typename Op> static LogicalResult importUnary(NodeImport &n) {
  FailureOr<Value> x = floatOperand(n, 0);
  if (failed(x))
    return failure();
  n.setResult(0, n.builder().create<Op>(n.loc(), *x));
  return success();
}

/// Pow with an exponent known at import time: 1 is the base itself, 2 is
/// x * x (bitwise what torch computes for x ** 2, gradient included), any
/// other exponent mt.powf.
static LogicalResult importPow(NodeImport &n) {
  FailureOr<Value> x = floatOperand(n, 0);
  if (failed(x))
    return failure();
  const ConstTensor *exponent = n.constant(1);
  if (!exponent || exponent->elements() != 1)
    return n.error() << "the exponent, " << n.inputLabel(1)
                     << ", must be a scalar known at import time; a run-time exponent "
                     << "is not supported (nearest supported: Exp and Log)";
  double e = exponent->real(0);
  if (e == 1.0) {
    return n.aliasResult(0, 0);
  }
  OpBuilder &b = n.builder();
  if (e == 2.0)
    n.setResult(0, b.create<mt::MulOp>(n.loc(), x->getType(), *x, *x));
  else
    n.setResult(0, b.create<mt::PowfOp>(n.loc(), *x, b.getF64FloatAttr(e)));
  return success();
}

/// Softmax along one axis (opset 13 semantics; axis defaults to -1).
static LogicalResult importSoftmax(NodeImport &n) {
  FailureOr<Value> x = floatOperand(n, 0);
  if (failed(x))
    return failure();
  FailureOr<int64_t> axis = n.normalizedAxis(n.intAttr("axis", -1), shapeOf(*x).size());
  if (failed(axis))
    return failure();
  n.setResult(0, n.builder().create<mt::SoftmaxOp>(n.loc(), *x,
                                                   n.builder().getI64IntegerAttr(*axis)));
  return success();
}

static LogicalResult importIsNaN(NodeImport &n) {
  FailureOr<Value> x = floatOperand(n, 0);
  if (failed(x))
    return failure();
  OpBuilder &b = n.builder();
  auto type = RankedTensorType::get(shapeOf(*x), b.getI1Type());
  n.setResult(0, b.create<mt::IsNanOp>(n.loc(), type, *x));
  return success();
}

/// Where with numpy broadcasting of all three; the condition must be bool.
static LogicalResult importWhere(NodeImport &n) {
  FailureOr<Value> cond = n.operand(0), x = failure(), y = failure();
  if (failed(cond) || failed(x = n.operand(1)) || failed(y = n.operand(2)))
    return failure();
  if (!elementOf(*cond).isInteger(1))
    return n.error() << "the condition must be BOOL, got " << cond->getType();
  if (elementOf(*x) != elementOf(*y))
    return n.error() << "X and Y have different element types (" << x->getType()
                     << " and " << y->getType() << ")";
  auto xy = mt::broadcastShapes(shapeOf(*x), shapeOf(*y));
  FailureOr<SmallVector<int64_t>> shape = failure();
  if (failed(xy) || failed(shape = mt::broadcastShapes(shapeOf(*cond), *xy)))
    return n.error() << "shapes " << shapeStr(shapeOf(*cond)) << ", "
                     << shapeStr(shapeOf(*x)) << " and " << shapeStr(shapeOf(*y))
                     << " do not broadcast";
  n.setResult(0, n.builder().create<mt::WhereOp>(
                     n.loc(), mt::tensorLike(x->getType(), *shape), *cond, *x, *y));
  return success();
}

/// Gelu (opset 20) as a composition: exact, 0.5 x (1 + erf(x / sqrt 2)), or
/// with approximate = "tanh", 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
static LogicalResult importGelu(NodeImport &n) {
  FailureOr<Value> x = floatOperand(n, 0);
  if (failed(x))
    return failure();
  std::string approximate = n.stringAttr("approximate", "none");
  OpBuilder &b = n.builder();
  Location loc = n.loc();
  Type type = x->getType();
  Value inner;
  if (approximate == "none") {
    Value scaled = b.create<mt::ScaleOp>(loc, *x, b.getF64FloatAttr(M_SQRT1_2));
    inner = b.create<mt::ErfOp>(loc, scaled);
  } else if (approximate == "tanh") {
    Value cube = b.create<mt::PowfOp>(loc, *x, b.getF64FloatAttr(3.0));
    Value term = b.create<mt::ScaleOp>(loc, cube, b.getF64FloatAttr(0.044715));
    Value sum = b.create<mt::AddOp>(loc, type, *x, term);
    Value arg = b.create<mt::ScaleOp>(loc, sum, b.getF64FloatAttr(std::sqrt(2.0 / M_PI)));
    inner = b.create<mt::TanhOp>(loc, arg);
  } else {
    return n.error() << "approximate '" << approximate
                     << "' is not supported (none or tanh)";
  }
  Value onePlus = b.create<mt::AddOp>(loc, type, inner, scalarLike(n, *x, 1.0));
  Value half = b.create<mt::ScaleOp>(loc, *x, b.getF64FloatAttr(0.5));
  n.setResult(0, b.create<mt::MulOp>(loc, type, half, onePlus));
  return success();
}

/// Dropout in inference mode (what an eval-mode export holds) is the identity.
static LogicalResult importDropout(NodeImport &n) {
  if (n.hasInput(2)) {
    const ConstTensor *training = n.constant(2);
    if (!training || training->elements() != 1 || training->integer(0) != 0)
      return n.error() << "training_mode must be false (export the model in eval mode)";
  }
  if (n.outputUsed(1))
    return n.error() << "output 1 (mask) is used; only inference-mode Dropout is "
                        "supported";
  return n.aliasResult(0, 0);
}

void registerMathOps(llvm::StringMap<OpImportFn> &table) {
  table["MatMul"] = importMatMul;
  table["Gemm"] = importGemm;
  table["Add"] = importBinary<mt::AddOp>;
  table["Sub"] = importBinary<mt::SubOp>;
  table["Mul"] = importBinary<mt::MulOp>;
  table["Div"] = importBinary<mt::DivOp>;
  table["Max"] = importVariadic<mt::MaxOp>;
  table["Min"] = importVariadic<mt::MinOp>;
  table["Pow"] = importPow;
  table["Relu"] = importUnary<mt::ReluOp>;
  table["Tanh"] = importUnary<mt::TanhOp>;
  table["Sigmoid"] = importUnary<mt::SigmoidOp>;
  table["Softplus"] = importUnary<mt::SoftplusOp>;
  table["Neg"] = importUnary<mt::NegOp>;
  table["Sqrt"] = importUnary<mt::SqrtOp>;
  table["Reciprocal"] = importUnary<mt::ReciprocalOp>;
  table["Exp"] = importUnary<mt::ExpOp>;
  table["Log"] = importUnary<mt::LogOp>;
  table["Erf"] = importUnary<mt::ErfOp>;
  table["Cos"] = importUnary<mt::CosOp>;
  table["Sin"] = importUnary<mt::SinOp>;
  table["Softmax"] = importSoftmax;
  table["IsNaN"] = importIsNaN;
  table["Where"] = importWhere;
  table["Gelu"] = importGelu;
  table["Dropout"] = importDropout;
}

} // namespace megatrain::onnx_import
