//===- FusionMatch.cpp - matchers over mt ops shared by the fusion passes -===//
#include "FusionMatch.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>

using namespace mlir;

namespace megatrain::fusion {

std::optional<double> splatValue(Value v) {
  if (auto fill = v.getDefiningOp<mt::FillOp>())
    return fill.getValue().convertToDouble();
  auto constant = v.getDefiningOp<mt::ConstantOp>();
  if (!constant)
    return std::nullopt;
  auto dense = dyn_cast<DenseFPElementsAttr>(constant.getValue());
  if (!dense || !dense.isSplat())
    return std::nullopt;
  return dense.getSplatValue<APFloat>().convertToDouble();
}

bool isScalarShaped(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.getNumElements() == 1;
}

bool isScalarConstant(Value v, double expected) {
  std::optional<double> value = splatValue(v);
  if (!value || !isScalarShaped(v))
    return false;
  return std::abs(*value - expected) <= kConstantTolerance * std::abs(expected);
}

Value matchScalarMultiple(Operation *op, double &c) {
  if (!op || op->getNumResults() != 1)
    return nullptr;
  Type type = op->getResult(0).getType();
  if (auto scale = dyn_cast<mt::ScaleOp>(op)) {
    c = scale.getAlpha().convertToDouble();
    return scale.getX();
  }
  auto scalarOperand = [&](Value x, Value s, bool reciprocal) -> Value {
    std::optional<double> value = splatValue(s);
    if (!value || !isScalarShaped(s) || x.getType() != type)
      return nullptr;
    if (reciprocal && *value == 0.0)
      return nullptr;
    c = reciprocal ? 1.0 / *value : *value;
    return x;
  };
  if (auto mul = dyn_cast<mt::MulOp>(op)) {
    if (Value x = scalarOperand(mul.getLhs(), mul.getRhs(), false))
      return x;
    return scalarOperand(mul.getRhs(), mul.getLhs(), false);
  }
  if (auto div = dyn_cast<mt::DivOp>(op))
    return scalarOperand(div.getLhs(), div.getRhs(), true);
  return nullptr;
}

bool trailingAxes(ArrayRef<int64_t> axes, int64_t rank, int64_t &axis) {
  if (axes.empty())
    return false;
  axis = axes.front();
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] != axis + (int64_t)i)
      return false;
  return axis >= 0 && axes.back() == rank - 1;
}

namespace {

bool isFloatTensor(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && isa<FloatType>(type.getElementType());
}

/// op is y * y or powf(y, 2), of y's type.
bool isSquareOf(Operation *op, Value y) {
  if (!op || op->getNumResults() != 1 || op->getResult(0).getType() != y.getType())
    return false;
  if (auto mul = dyn_cast<mt::MulOp>(op))
    return mul.getLhs() == y && mul.getRhs() == y;
  if (auto pow = dyn_cast<mt::PowfOp>(op))
    return pow.getX() == y && pow.getExponent().convertToDouble() == 2.0;
  return false;
}

/// v = mean(y^2 over trailing axes, keepdims) + eps; appends add, mean and
/// square to m.ops.
bool matchMeanSquarePlusEps(Value v, Value y, RootMeanSquareMatch &m) {
  auto add = singleUseDef<mt::AddOp>(v);
  if (!add)
    return false;
  Value ms = add.getLhs(), eps = add.getRhs();
  if (!splatValue(eps) || !isScalarShaped(eps))
    std::swap(ms, eps);
  std::optional<double> epsilon = splatValue(eps);
  if (!epsilon || !isScalarShaped(eps) || ms.getType() != add.getType())
    return false;
  auto mean = singleUseDef<mt::ReduceMeanOp>(ms);
  if (!mean || !mean.getKeepdims())
    return false;
  int64_t rank = cast<RankedTensorType>(y.getType()).getRank();
  if (!trailingAxes(mean.getAxes(), rank, m.axis))
    return false;
  Value square = mean.getX();
  if (!square.hasOneUse() || !isSquareOf(square.getDefiningOp(), y))
    return false;
  m.epsilon = *epsilon;
  m.ops.append({add, mean, square.getDefiningOp()});
  return true;
}

/// inv = reciprocal(sqrt(v)) or powf(v, -0.5), each single-use; returns v.
Value matchInverseRoot(Value inv, SmallVectorImpl<Operation *> &ops) {
  if (auto reciprocal = singleUseDef<mt::ReciprocalOp>(inv)) {
    if (auto sqrt = singleUseDef<mt::SqrtOp>(reciprocal.getX())) {
      ops.append({reciprocal, sqrt});
      return sqrt.getX();
    }
    return nullptr;
  }
  if (auto pow = singleUseDef<mt::PowfOp>(inv)) {
    if (pow.getExponent().convertToDouble() == -0.5) {
      ops.push_back(pow);
      return pow.getX();
    }
  }
  return nullptr;
}

} // namespace

std::optional<RootMeanSquareMatch> matchRootMeanSquare(Operation *root) {
  auto attempt = [&](Value y, Value denominator, bool divides) -> std::optional<RootMeanSquareMatch> {
    if (!isFloatTensor(y) || y.getType() != root->getResult(0).getType())
      return std::nullopt;
    RootMeanSquareMatch m;
    m.ops.push_back(root);
    Value v;
    if (divides) {
      if (auto sqrt = singleUseDef<mt::SqrtOp>(denominator)) {
        m.ops.push_back(sqrt);
        v = sqrt.getX();
      }
    } else {
      v = matchInverseRoot(denominator, m.ops);
    }
    if (!v || !matchMeanSquarePlusEps(v, y, m))
      return std::nullopt;
    m.y = y;
    return m;
  };
  if (auto mul = dyn_cast<mt::MulOp>(root)) {
    if (auto m = attempt(mul.getLhs(), mul.getRhs(), false))
      return m;
    return attempt(mul.getRhs(), mul.getLhs(), false);
  }
  if (auto div = dyn_cast<mt::DivOp>(root))
    return attempt(div.getLhs(), div.getRhs(), true);
  return std::nullopt;
}

void erasePattern(RewriterBase &rewriter, ArrayRef<Operation *> ops) {
  // The pattern's ops in the order given (users before the values they
  // read), then any literal they read that nothing else reads.
  llvm::SetVector<Operation *> literals;
  for (Operation *op : ops) {
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        if (isa<mt::ConstantOp, mt::FillOp>(def))
          literals.insert(def);
    assert(op->use_empty() && "a matched intermediate has a user outside the pattern");
    rewriter.eraseOp(op);
  }
  for (Operation *literal : literals)
    if (literal->use_empty())
      rewriter.eraseOp(literal);
}

} // namespace megatrain::fusion
