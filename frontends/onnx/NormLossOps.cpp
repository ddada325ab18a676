//===- NormLossOps.cpp - ONNX LayerNormalization and SoftmaxCrossEntropyLoss -===//
#include "GraphImporter.h"
#include "OnnxShapes.h"

#include "megatrain/Dialect/MtDialect.h"

using namespace mlir;

namespace megatrain::onnx_import {

/// Refuses a node whose optional output `i` (`what`) is read by anything:
/// mt ops compute only the first output.
static LogicalResult refuseUsedOutput(NodeImport &n, int i, const char *what) {
  if (n.outputUsed(i))
    return n.error() << "output " << i << " (" << what << ", '" << n.node().output(i)
                     << "') is used; only output 0 is supported";
  return success();
}

/// LayerNormalization over dims [axis, rank); scale and bias must have shape
/// x.shape[axis:] exactly. A missing bias becomes mt.fill 0.
static LogicalResult importLayerNorm(NodeImport &n) {
  if (failed(refuseUsedOutput(n, 1, "Mean")) ||
      failed(refuseUsedOutput(n, 2, "InvStdDev")))
    return failure();
  FailureOr<Value> x = n.operand(0), scale = failure();
  if (failed(x) || failed(scale = n.operand(1)))
    return failure();
  if (!isa<FloatType>(elementOf(*x)))
    return n.error() << "X must be floating point, got " << x->getType();
  ArrayRef<int64_t> xs = shapeOf(*x);
  FailureOr<int64_t> axis = n.normalizedAxis(n.intAttr("axis", -1), xs.size());
  if (failed(axis))
    return failure();
  ArrayRef<int64_t> norm = xs.drop_front(*axis);
  if (shapeOf(*scale) != norm || elementOf(*scale) != elementOf(*x))
    return n.error() << "Scale must be " << mt::tensorLike(x->getType(), norm) << ", got "
                     << scale->getType();
  OpBuilder &b = n.builder();
  Value bias;
  if (n.hasInput(2)) {
    FailureOr<Value> given = n.operand(2);
    if (failed(given))
      return failure();
    if (shapeOf(*given) != norm || elementOf(*given) != elementOf(*x))
      return n.error() << "B must be " << mt::tensorLike(x->getType(), norm) << ", got "
                       << given->getType();
    bias = *given;
  } else {
    bias = b.create<mt::FillOp>(n.loc(), mt::tensorLike(x->getType(), norm),
                                b.getF64FloatAttr(0.0));
  }
  n.setResult(0, b.create<mt::LayerNormOp>(
                     n.loc(), x->getType(), *x, *scale, bias, b.getI64IntegerAttr(*axis),
                     b.getF64FloatAttr(n.floatAttr("epsilon", 1e-5))));
  return success();
}

/// RMSNormalization (opset 23) as the composition torch's RMSNorm modules
/// export: y = x * reciprocal(sqrt(mean(x^2 over [axis, rank)) + epsilon))
/// * scale, with scale broadcasting over the normalized dims.
static LogicalResult importRMSNorm(NodeImport &n) {
  FailureOr<Value> x = n.operand(0), scale = failure();
  if (failed(x) || failed(scale = n.operand(1)))
    return failure();
  if (!isa<FloatType>(elementOf(*x)))
    return n.error() << "X must be floating point, got " << x->getType();
  if (elementOf(*scale) != elementOf(*x))
    return n.error() << "Scale must have X's element type, got " << scale->getType();
  ArrayRef<int64_t> xs = shapeOf(*x);
  int64_t rank = xs.size();
  FailureOr<int64_t> axis = n.normalizedAxis(n.intAttr("axis", -1), rank);
  if (failed(axis))
    return failure();
  auto full = mt::broadcastShapes(xs, shapeOf(*scale));
  if (failed(full) || ArrayRef<int64_t>(*full) != xs ||
      shapeOf(*scale).size() > (size_t)(rank - *axis))
    return n.error() << "Scale " << shapeStr(shapeOf(*scale))
                     << " does not broadcast to the normalized dims "
                     << shapeStr(xs.drop_front(*axis));
  OpBuilder &b = n.builder();
  Location loc = n.loc();
  Type type = x->getType();
  SmallVector<int64_t> axes;
  for (int64_t d = *axis; d < rank; ++d)
    axes.push_back(d);
  Value square = b.create<mt::MulOp>(loc, type, *x, *x);
  Value mean = b.create<mt::ReduceMeanOp>(
      loc, mt::tensorLike(type, mt::reducedShape(xs, axes, true)), square,
      b.getDenseI64ArrayAttr(axes), b.getBoolAttr(true));
  Value epsilon = b.create<mt::FillOp>(loc, mt::tensorLike(type, {}),
                                       b.getF64FloatAttr(n.floatAttr("epsilon", 1e-5)));
  Value shifted = b.create<mt::AddOp>(loc, mean.getType(), mean, epsilon);
  Value inverse = b.create<mt::ReciprocalOp>(loc, b.create<mt::SqrtOp>(loc, shifted));
  Value normalized = b.create<mt::MulOp>(loc, type, *x, inverse);
  n.setResult(0, b.create<mt::MulOp>(loc, type, normalized, *scale));
  return success();
}

/// ONNX leaves ignore_index unset to ignore nothing; mt.softmax_ce needs a
/// value, and no valid label (in [0, C)) is negative.
static constexpr int64_t kNoIgnoreIndex = -100;

/// SoftmaxCrossEntropyLoss, reduction mean or sum, without weights.
static LogicalResult importSoftmaxCrossEntropy(NodeImport &n) {
  if (n.hasInput(2))
    return n.error() << "the weights input is not supported";
  if (failed(refuseUsedOutput(n, 1, "log_prob")))
    return failure();
  std::string reduction = n.stringAttr("reduction", "mean");
  if (reduction != "mean" && reduction != "sum")
    return n.error() << "reduction '" << reduction << "' is not supported (mean or sum)";
  FailureOr<Value> logits = n.operand(0), labels = failure();
  if (failed(logits) || failed(labels = n.operand(1)))
    return failure();
  if (!isa<FloatType>(elementOf(*logits)))
    return n.error() << "scores must be floating point, got " << logits->getType();
  if (!elementOf(*labels).isInteger(64))
    return n.error() << "labels must be INT64, got " << labels->getType();
  ArrayRef<int64_t> x = shapeOf(*logits), y = shapeOf(*labels);
  if (x.size() < 2 || y.size() != x.size() - 1 || y[0] != x[0] ||
      y.drop_front() != x.drop_front(2))
    return n.error() << "scores " << shapeStr(x) << " and labels " << shapeStr(y)
                     << " must be [N, C, D...] and [N, D...]";
  OpBuilder &b = n.builder();
  n.setResult(0, b.create<mt::SoftmaxCrossEntropyOp>(
                     n.loc(), mt::tensorLike(logits->getType(), {}), *logits, *labels,
                     b.getI64IntegerAttr(n.intAttr("ignore_index", kNoIgnoreIndex)),
                     b.getStringAttr(reduction)));
  return success();
}

void registerNormLossOps(llvm::StringMap<OpImportFn> &table) {
  table["LayerNormalization"] = importLayerNorm;
  table["RMSNormalization"] = importRMSNorm;
  table["SoftmaxCrossEntropyLoss"] = importSoftmaxCrossEntropy;
}

} // namespace megatrain::onnx_import
