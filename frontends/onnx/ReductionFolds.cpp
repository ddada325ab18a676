//===- ReductionFolds.cpp - folds of MatMul and the Reduce ops --------------===//
//
// The folds that sum over a dim: MatMul (a rotary table is inv_freq times
// positions) and ReduceSum/Mean/Max/Min. Sums accumulate in double or int64
// and are rounded once at the end, as a wider accumulator would.
//
//===----------------------------------------------------------------------===//
#include "ConstantFolder.h"
#include "OnnxShapes.h"

#include "megatrain/Dialect/MtDialect.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir;

namespace megatrain::onnx_import {

namespace {

bool foldMatMul(Fold &f) {
  const ConstTensor &a = f.value(0), &b = f.value(1);
  if (a.kind != b.kind || a.kind == ConstKind::Bool)
    return f.fail("operands must have one numeric element type");
  if (a.shape.empty() || b.shape.empty())
    return f.fail("operands must have rank >= 1");
  std::vector<int64_t> as = a.shape, bs = b.shape;
  bool vecA = as.size() == 1, vecB = bs.size() == 1;
  if (vecA)
    as.insert(as.begin(), 1);
  if (vecB)
    bs.push_back(1);
  int64_t m = as[as.size() - 2], k = as.back(), k2 = bs[bs.size() - 2], n = bs.back();
  if (k != k2)
    return f.fail("cannot multiply " + shapeStr(a.shape) + " by " + shapeStr(b.shape));
  llvm::ArrayRef<int64_t> ab(as), bb(bs);
  auto broadcast = mt::broadcastShapes(ab.drop_back(2), bb.drop_back(2));
  if (failed(broadcast))
    return f.fail("batch dims of " + shapeStr(a.shape) + " and " + shapeStr(b.shape) +
                  " do not broadcast");
  std::vector<int64_t> batch(broadcast->begin(), broadcast->end());
  std::vector<int64_t> full = batch;
  full.push_back(m);
  full.push_back(n);
  if (!f.checkSize(full))
    return false;
  ConstTensor y = ConstTensor::zeros(a.kind, full);
  BroadcastWalk walk(batch, {ab.drop_back(2), bb.drop_back(2)});
  std::vector<int64_t> ia, ib;
  for (int64_t p = 0, count = numElements(batch); p < count; ++p, walk.next()) {
    ia.push_back(walk.offset(0));
    ib.push_back(walk.offset(1));
  }
  for (size_t p = 0; p < ia.size(); ++p)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c) {
        double accF = 0;
        int64_t accI = 0;
        for (int64_t j = 0; j < k; ++j) {
          int64_t ea = ia[p] * m * k + r * k + j, eb = ib[p] * k * n + j * n + c;
          if (a.isFloat())
            accF += a.f[ea] * b.f[eb];
          else
            accI += a.i[ea] * b.i[eb];
        }
        int64_t e = (p * m + r) * n + c;
        if (a.isFloat())
          y.f[e] = roundTo(a.kind, accF);
        else
          y.i[e] = accI;
      }
  std::vector<int64_t> shape = batch;
  if (!vecA)
    shape.push_back(m);
  if (!vecB)
    shape.push_back(n);
  y.shape = shape;
  return f.emit(std::move(y));
}

bool foldReduce(Fold &f) {
  llvm::StringRef op = f.node.op_type();
  const ConstTensor &x = f.value(0);
  if (x.kind == ConstKind::Bool)
    return f.fail("reductions of bool are not supported");
  int64_t rank = x.shape.size();
  std::optional<std::vector<int64_t>> axes = f.intsAttr("axes");
  if (!axes && !f.optionalIntegers(1, axes))
    return false;
  std::vector<bool> reduced(rank, false);
  if (!axes || axes->empty()) {
    if (f.intAttr("noop_with_empty_axes", 0) != 0)
      return f.emit(x);
    reduced.assign(rank, true);
  } else {
    for (int64_t a : *axes) {
      if (!normalizeAxis(a, rank, f.error))
        return false;
      reduced[a] = true;
    }
  }
  bool keep = f.intAttr("keepdims", 1) != 0;
  std::vector<int64_t> kept, shape;
  for (int64_t d = 0; d < rank; ++d) {
    kept.push_back(reduced[d] ? 1 : x.shape[d]);
    if (!reduced[d] || keep)
      shape.push_back(kept.back());
  }
  int64_t outCount = numElements(kept),
          groupSize = x.elements() / std::max<int64_t>(outCount, 1);
  std::vector<double> accF(outCount, op == "ReduceMax"   ? -INFINITY
                                     : op == "ReduceMin" ? INFINITY
                                                         : 0.0);
  std::vector<int64_t> accI(outCount,
                            op == "ReduceMax"   ? std::numeric_limits<int64_t>::min()
                            : op == "ReduceMin" ? std::numeric_limits<int64_t>::max()
                                                : 0);
  std::vector<int64_t> outStrides = stridesOf(kept), counter(rank, 0);
  for (int64_t e = 0; e < x.elements(); ++e) {
    int64_t o = 0;
    for (int64_t d = 0; d < rank; ++d)
      o += (reduced[d] ? 0 : counter[d]) * outStrides[d];
    if (x.isFloat()) {
      double v = x.f[e];
      if (op == "ReduceMax")
        accF[o] = std::max(accF[o], v);
      else if (op == "ReduceMin")
        accF[o] = std::min(accF[o], v);
      else
        accF[o] += v;
    } else {
      int64_t v = x.i[e];
      if (op == "ReduceMax")
        accI[o] = std::max(accI[o], v);
      else if (op == "ReduceMin")
        accI[o] = std::min(accI[o], v);
      else
        accI[o] += v;
    }
    for (int d = (int)rank - 1; d >= 0; --d) {
      if (++counter[d] < x.shape[d])
        break;
      counter[d] = 0;
    }
  }
  ConstTensor y = ConstTensor::zeros(x.kind, shape);
  for (int64_t o = 0; o < outCount; ++o) {
    if (x.isFloat())
      y.f[o] = roundTo(x.kind, op == "ReduceMean" ? accF[o] / groupSize : accF[o]);
    else
      y.i[o] = op == "ReduceMean" ? accI[o] / groupSize : accI[o];
  }
  return f.emit(std::move(y));
}

} // namespace

void registerReductionFolds(llvm::StringMap<FoldRule> &table) {
  table["MatMul"] = {foldMatMul};
  for (const char *op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"})
    table[op] = {foldReduce};
}

} // namespace megatrain::onnx_import
