//===- ShapeOps.cpp - ONNX Reshape, Transpose, reductions, Gather, Identity -===//
#include "GraphImporter.h"

#include "megatrain/Dialect/MtDialect.h"

using namespace mlir;

namespace megatrain::onnx_import {

/// Reshape with the shape read at import time: 0 copies the input's dim
/// (unless allowzero), -1 is inferred. A reshape to the same shape aliases.
static LogicalResult importReshape(NodeImport &n) {
  FailureOr<Value> x = n.operand(0);
  FailureOr<std::vector<int64_t>> target = failure();
  if (failed(x) || failed(target = n.constantIntegers(1)))
    return failure();
  ArrayRef<int64_t> in = shapeOf(*x);
  bool allowZero = n.intAttr("allowzero", 0) != 0;
  int64_t total = cast<RankedTensorType>(x->getType()).getNumElements();
  SmallVector<int64_t> shape;
  int inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < target->size(); ++i) {
    int64_t d = (*target)[i];
    if (d == 0 && !allowZero) {
      if (i >= in.size())
        return n.error() << "shape " << shapeStr(*target) << " copies dim " << i
                         << " of a rank-" << in.size() << " input";
      d = in[i];
    } else if (d == -1) {
      if (inferred >= 0)
        return n.error() << "shape " << shapeStr(*target) << " has more than one -1";
      inferred = i;
      d = 1;
    } else if (d <= 0) {
      return n.error() << "shape " << shapeStr(*target)
                       << " has a zero or negative dim (zero-sized tensors are "
                          "not supported)";
    }
    shape.push_back(d);
    if ((int)i != inferred)
      known *= d;
  }
  if (inferred >= 0) {
    if (known == 0 || total % known != 0)
      return n.error() << "cannot reshape " << shapeStr(in) << " to "
                       << shapeStr(*target);
    shape[inferred] = total / known;
  }
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  if (count != total)
    return n.error() << "cannot reshape " << shapeStr(in) << " to " << shapeStr(*target)
                     << " (" << shapeStr(shape) << ")";
  if (ArrayRef<int64_t>(shape) == in) {
    n.aliasResult(0, 0);
    return success();
  }
  n.setResult(0, n.builder().create<mt::ReshapeOp>(
                     n.loc(), mt::tensorLike(x->getType(), shape), *x));
  return success();
}

/// Transpose; perm defaults to reversing the dims. The identity aliases.
static LogicalResult importTranspose(NodeImport &n) {
  FailureOr<Value> x = n.operand(0);
  if (failed(x))
    return failure();
  ArrayRef<int64_t> in = shapeOf(*x);
  int64_t rank = in.size();
  std::vector<int64_t> perm;
  if (auto attr = n.intsAttr("perm")) {
    perm = *attr;
  } else {
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  }
  SmallVector<bool> seen(rank, false);
  bool valid = (int64_t)perm.size() == rank;
  for (size_t i = 0; valid && i < perm.size(); ++i) {
    if (perm[i] < 0 || perm[i] >= rank || seen[perm[i]])
      valid = false;
    else
      seen[perm[i]] = true;
  }
  if (!valid)
    return n.error() << "perm " << shapeStr(perm) << " is not a permutation of the "
                     << rank << " dims";
  SmallVector<int64_t> shape;
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) {
    shape.push_back(in[perm[i]]);
    identity &= perm[i] == (int64_t)i;
  }
  if (identity) {
    n.aliasResult(0, 0);
    return success();
  }
  n.setResult(
      0, n.builder().create<mt::TransposeOp>(n.loc(), mt::tensorLike(x->getType(), shape),
                                             *x, n.builder().getDenseI64ArrayAttr(perm)));
  return success();
}

/// ReduceSum/ReduceMean. Axes come from the `axes` attribute (ReduceMean
/// before opset 18) or the second input (ReduceSum from 13, ReduceMean from
/// 18); either form is accepted at any opset. Empty axes reduce everything
/// unless noop_with_empty_axes, which makes the node an alias.
template <typename Op> static LogicalResult importReduce(NodeImport &n) {
  FailureOr<Value> x = n.operand(0);
  if (failed(x))
    return failure();
  if (!isa<FloatType>(elementOf(*x)))
    return n.error() << "input must be floating point, got " << x->getType();
  int64_t rank = shapeOf(*x).size();
  std::vector<int64_t> axes;
  if (auto attr = n.intsAttr("axes")) {
    if (n.hasInput(1))
      return n.error() << "axes are given both as attribute and input";
    axes = *attr;
  } else if (n.hasInput(1)) {
    FailureOr<std::vector<int64_t>> in = n.constantIntegers(1);
    if (failed(in))
      return failure();
    axes = *in;
  }
  if (axes.empty()) {
    if (n.intAttr("noop_with_empty_axes", 0) != 0) {
      n.aliasResult(0, 0);
      return success();
    }
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  for (int64_t &a : axes) {
    if (a < -rank || a >= rank)
      return n.error() << "axis " << a << " is out of range for rank " << rank;
    if (a < 0)
      a += rank;
  }
  llvm::sort(axes);
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    return n.error() << "axes repeat a dim";
  bool keepdims = n.intAttr("keepdims", 1) != 0;
  SmallVector<int64_t> shape = mt::reducedShape(shapeOf(*x), axes, keepdims);
  OpBuilder &b = n.builder();
  n.setResult(0, b.create<Op>(n.loc(), mt::tensorLike(x->getType(), shape), *x,
                              b.getDenseI64ArrayAttr(axes), b.getBoolAttr(keepdims)));
  return success();
}

/// Gather along `axis` (default 0); indices must be i64 (int32 constants are
/// widened when read).
static LogicalResult importGather(NodeImport &n) {
  FailureOr<Value> data = n.operand(0), indices = failure();
  if (failed(data) || failed(indices = n.operand(1)))
    return failure();
  if (!elementOf(*indices).isInteger(64))
    return n.error() << "indices must be INT64 (or INT32 constants), got "
                     << indices->getType();
  ArrayRef<int64_t> ds = shapeOf(*data), is = shapeOf(*indices);
  int64_t rank = ds.size();
  int64_t axis = n.intAttr("axis", 0);
  if (rank == 0 || axis < -rank || axis >= rank)
    return n.error() << "axis " << axis << " is out of range for rank " << rank;
  if (axis < 0)
    axis += rank;
  SmallVector<int64_t> shape(ds.begin(), ds.begin() + axis);
  shape.append(is.begin(), is.end());
  shape.append(ds.begin() + axis + 1, ds.end());
  OpBuilder &b = n.builder();
  n.setResult(0, b.create<mt::GatherOp>(n.loc(), mt::tensorLike(data->getType(), shape),
                                        *data, *indices, b.getI64IntegerAttr(axis)));
  return success();
}

static LogicalResult importIdentity(NodeImport &n) {
  if (!n.hasInput(0))
    return n.error() << "input 0 is required";
  n.aliasResult(0, 0);
  return success();
}

void registerShapeOps(llvm::StringMap<OpImportFn> &table) {
  table["Reshape"] = importReshape;
  table["Transpose"] = importTranspose;
  table["ReduceSum"] = importReduce<mt::ReduceSumOp>;
  table["ReduceMean"] = importReduce<mt::ReduceMeanOp>;
  table["Gather"] = importGather;
  table["Identity"] = importIdentity;
}

} // namespace megatrain::onnx_import
