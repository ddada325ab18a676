//===- GeneratorFolds.cpp - folds of ConstantOfShape, Range, CumSum, Trilu --===//
//
// The ops that make values rather than move them: fills, ranges, running
// sums and triangles. Exported LLMs build their position ids and causal
// masks from these (fed by Shape, finished by comparisons and Where);
// folding them leaves one mask constant instead of a subgraph in the
// training graph.
//
//===----------------------------------------------------------------------===//
#include "ConstantFolder.h"
#include "OnnxShapes.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace megatrain::onnx_import {

namespace {

bool foldConstantOfShape(Fold &f) {
  std::vector<int64_t> shape;
  if (!f.integers(0, shape) || !f.checkSize(shape))
    return false;
  ConstTensor fill = ConstTensor::zeros(ConstKind::F32, {});
  if (const onnx::AttributeProto *a = f.attr("value")) {
    std::string problem;
    if (!readConstTensor(a->t(), fill, problem))
      return f.fail("value " + problem);
    if (fill.elements() != 1)
      return f.fail("value must hold one element");
  }
  ConstTensor y = ConstTensor::zeros(fill.kind, shape);
  for (int64_t e = 0; e < y.elements(); ++e)
    copyElement(fill, 0, y, e);
  return f.emit(std::move(y));
}

bool foldRange(Fold &f) {
  for (int k = 0; k < 3; ++k)
    if (!f.has(k) || f.value(k).elements() != 1)
      return f.fail("start, limit and delta must be scalars");
  const ConstTensor &start = f.value(0);
  ConstKind kind = start.kind;
  if (f.value(1).kind != kind || f.value(2).kind != kind || kind == ConstKind::Bool)
    return f.fail("start, limit and delta must have one numeric type");
  double s = start.real(0), l = f.value(1).real(0), d = f.value(2).real(0);
  if (d == 0)
    return f.fail("delta is 0");
  int64_t n = 0;
  if (kind == ConstKind::I64) {
    // In 128 bits: the int64 bounds' difference and its rounding overflow 64.
    const __int128 si = start.i[0], li = f.value(1).i[0], di = f.value(2).i[0];
    const __int128 count = di > 0 ? (li - si + di - 1) / di : (si - li - di - 1) / -di;
    n = (int64_t)std::clamp<__int128>(count, 0, std::numeric_limits<int64_t>::max());
  } else {
    const double count = std::ceil((l - s) / d);
    if (std::isnan(count))
      return f.fail("start, limit and delta give no length (NaN)");
    n = std::max<int64_t>(floatToInt(count), 0); // saturates: checkSize refuses it
  }
  if (!f.checkSize({n}))
    return false;
  ConstTensor y = ConstTensor::zeros(kind, {n});
  for (int64_t k = 0; k < n; ++k) {
    if (y.isFloat())
      y.f[k] = roundTo(kind, s + k * d);
    else // within the bounds, so no wrap; unsigned keeps the arithmetic defined
      y.i[k] = (int64_t)((uint64_t)start.i[0] + (uint64_t)k * (uint64_t)f.value(2).i[0]);
  }
  return f.emit(std::move(y));
}

bool foldCumSum(Fold &f) {
  const ConstTensor &x = f.value(0);
  std::vector<int64_t> axisValue;
  if (!f.integers(1, axisValue))
    return false;
  if (axisValue.size() != 1)
    return f.fail("axis must be a scalar");
  int64_t axis = axisValue[0];
  if (!normalizeAxis(axis, x.shape.size(), f.error))
    return false;
  if (x.kind == ConstKind::Bool)
    return f.fail("CumSum of bool is not supported");
  bool exclusive = f.intAttr("exclusive", 0) != 0, reverse = f.intAttr("reverse", 0) != 0;
  ConstTensor y = ConstTensor::zeros(x.kind, x.shape);
  int64_t n = x.shape[axis];
  int64_t inner = numElements(llvm::ArrayRef<int64_t>(x.shape).drop_front(axis + 1));
  int64_t outer = numElements(llvm::ArrayRef<int64_t>(x.shape).take_front(axis));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      double accF = 0;
      int64_t accI = 0;
      for (int64_t s = 0; s < n; ++s) {
        int64_t k = reverse ? n - 1 - s : s;
        int64_t e = (o * n + k) * inner + j;
        if (x.isFloat()) {
          if (exclusive) {
            y.f[e] = accF;
            accF = roundTo(x.kind, accF + x.f[e]);
          } else {
            accF = roundTo(x.kind, accF + x.f[e]);
            y.f[e] = accF;
          }
        } else {
          if (exclusive) {
            y.i[e] = accI;
            accI += x.i[e];
          } else {
            accI += x.i[e];
            y.i[e] = accI;
          }
        }
      }
    }
  return f.emit(std::move(y));
}

bool foldTrilu(Fold &f) {
  const ConstTensor &x = f.value(0);
  if (x.shape.size() < 2)
    return f.fail("input must have rank >= 2");
  int64_t k = 0;
  if (f.has(1)) {
    std::vector<int64_t> v;
    if (!f.integers(1, v))
      return false;
    if (v.size() != 1)
      return f.fail("k must be a scalar");
    k = v[0];
  }
  bool upper = f.intAttr("upper", 1) != 0;
  int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back();
  ConstTensor y = x;
  for (int64_t e = 0; e < x.elements(); ++e) {
    int64_t c = e % cols, r = (e / cols) % rows;
    if (!triluKeeps(r, c, k, upper)) {
      if (y.isFloat())
        y.f[e] = 0;
      else
        y.i[e] = 0;
    }
  }
  return f.emit(std::move(y));
}

} // namespace

void registerGeneratorFolds(llvm::StringMap<FoldRule> &table) {
  table["ConstantOfShape"] = {foldConstantOfShape};
  table["Range"] = {foldRange};
  table["CumSum"] = {foldCumSum};
  table["Trilu"] = {foldTrilu};
}

} // namespace megatrain::onnx_import
