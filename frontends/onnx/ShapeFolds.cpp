//===- ShapeFolds.cpp - folds of shape, layout and indexing ops -------------===//
//
// Shape and Size (which need only their input's static shape, so they fold
// on run-time values too), the Reshape family, Concat, Slice, Split,
// Transpose, Expand, Tile, Gather and GatherND on values known at import
// time: the arithmetic on shapes that exported graphs do before every
// Reshape, and the position ids they gather. Result shapes come from
// OnnxShapes.h, as the op importers' do.
//
//===----------------------------------------------------------------------===//
#include "ConstantFolder.h"
#include "OnnxShapes.h"

#include "megatrain/Dialect/MtDialect.h"

#include <algorithm>

using namespace mlir;

namespace megatrain::onnx_import {

namespace {

bool foldShape(Fold &f) {
  const std::vector<int64_t> &shape = f.input(0).shape;
  if (f.node.op_type() == "Size") {
    ConstTensor y = ConstTensor::zeros(ConstKind::I64, {});
    y.i[0] = numElements(shape);
    return f.emit(std::move(y));
  }
  int64_t rank = shape.size();
  int64_t start = f.intAttr("start", 0), end = f.intAttr("end", rank);
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  std::vector<int64_t> dims;
  for (int64_t d = start; d < end; ++d)
    dims.push_back(shape[d]);
  ConstTensor y = ConstTensor::zeros(ConstKind::I64, {(int64_t)dims.size()});
  y.i = dims;
  return f.emit(std::move(y));
}

bool foldReshapeLike(Fold &f) {
  llvm::StringRef op = f.node.op_type();
  const ConstTensor &x = f.value(0);
  std::vector<int64_t> shape;
  if (op == "Identity") {
    shape = x.shape;
  } else if (op == "Reshape") {
    std::vector<int64_t> target;
    if (!f.integers(1, target) ||
        !reshapeTarget(x.shape, target, f.intAttr("allowzero", 0) != 0, shape, f.error))
      return false;
  } else if (op == "Unsqueeze" || op == "Squeeze") {
    std::optional<std::vector<int64_t>> axes = f.intsAttr("axes");
    if (!axes && !f.optionalIntegers(1, axes))
      return false;
    std::vector<int64_t> list = axes.value_or(std::vector<int64_t>());
    if (op == "Unsqueeze" ? !unsqueezeShape(x.shape, list, shape, f.error)
                          : !squeezeShape(x.shape, list, shape, f.error))
      return false;
  } else if (!flattenShape(x.shape, f.intAttr("axis", 1), shape, f.error)) {
    return false;
  }
  ConstTensor y = x;
  y.shape = shape;
  return f.emit(std::move(y));
}

bool foldConcat(Fold &f) {
  const onnx::AttributeProto *a = f.attr("axis");
  if (!a)
    return f.fail("attribute 'axis' is required");
  const ConstTensor *first = nullptr;
  for (int k = 0; k < f.count(); ++k)
    if (f.has(k)) {
      first = &f.value(k);
      break;
    }
  if (!first)
    return f.fail("needs at least one input");
  int64_t axis = a->i();
  if (!normalizeAxis(axis, first->shape.size(), f.error))
    return false;
  std::vector<int64_t> shape = first->shape;
  shape[axis] = 0;
  for (int k = 0; k < f.count(); ++k) {
    if (!f.has(k))
      continue;
    const ConstTensor &x = f.value(k);
    if (x.kind != first->kind)
      return f.fail("inputs have different element types");
    if (!concatCompatible(x.shape, first->shape, axis))
      return f.fail("input " + std::to_string(k) + " " + shapeStr(x.shape) +
                    " does not match " + shapeStr(first->shape) + " off axis " +
                    std::to_string(axis));
    shape[axis] += x.shape[axis];
  }
  if (!f.checkSize(shape))
    return false;
  ConstTensor y = ConstTensor::zeros(first->kind, shape);
  int64_t outer = numElements(llvm::ArrayRef<int64_t>(shape).take_front(axis));
  int64_t inner = numElements(llvm::ArrayRef<int64_t>(shape).drop_front(axis + 1));
  int64_t offset = 0;
  for (int k = 0; k < f.count(); ++k) {
    if (!f.has(k))
      continue;
    const ConstTensor &x = f.value(k);
    int64_t run = x.shape[axis] * inner;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < run; ++j)
        copyElement(x, o * run + j, y, o * shape[axis] * inner + offset + j);
    offset += run;
  }
  return f.emit(std::move(y));
}

bool foldSlice(Fold &f) {
  const ConstTensor &x = f.value(0);
  std::vector<int64_t> starts, ends;
  std::optional<std::vector<int64_t>> axes, steps;
  if (!f.integers(1, starts) || !f.integers(2, ends) || !f.optionalIntegers(3, axes) ||
      !f.optionalIntegers(4, steps))
    return false;
  std::vector<SliceDim> dims;
  if (!sliceDims(x.shape, starts, ends, axes, steps, dims, f.error))
    return false;
  return f.emit(sliceConst(x, dims));
}

bool foldSplit(Fold &f) {
  const ConstTensor &x = f.value(0);
  int64_t axis = f.intAttr("axis", 0);
  if (!normalizeAxis(axis, x.shape.size(), f.error))
    return false;
  std::optional<std::vector<int64_t>> given = f.intsAttr("split");
  if (!given && !f.optionalIntegers(1, given))
    return false;
  std::vector<int64_t> sizes;
  int64_t parts = f.intAttr("num_outputs", f.node.output_size());
  if (!splitSizes(x.shape[axis], given, parts, sizes, f.error))
    return false;
  if ((int)sizes.size() != f.node.output_size())
    return f.fail("splits into " + std::to_string(sizes.size()) + " parts for " +
                  std::to_string(f.node.output_size()) + " outputs");
  for (const std::vector<SliceDim> &piece : splitSlices(x.shape, axis, sizes))
    f.out.push_back(sliceConst(x, piece));
  return true;
}

bool foldTranspose(Fold &f) {
  const ConstTensor &x = f.value(0);
  int64_t rank = x.shape.size();
  std::vector<int64_t> perm;
  if (!transposePerm(rank, f.intsAttr("perm"), perm, f.error))
    return false;
  std::vector<int64_t> shape = permuteShape(x.shape, perm),
                       inStrides = stridesOf(x.shape);
  ConstTensor y = ConstTensor::zeros(x.kind, shape);
  std::vector<int64_t> counter(rank, 0);
  for (int64_t e = 0; e < y.elements(); ++e) {
    int64_t src = 0;
    for (int64_t d = 0; d < rank; ++d)
      src += counter[d] * inStrides[perm[d]];
    copyElement(x, src, y, e);
    for (int d = (int)rank - 1; d >= 0; --d) {
      if (++counter[d] < shape[d])
        break;
      counter[d] = 0;
    }
  }
  return f.emit(std::move(y));
}

bool foldExpand(Fold &f) {
  const ConstTensor &x = f.value(0);
  std::vector<int64_t> target;
  if (!f.integers(1, target))
    return false;
  auto expanded = mt::broadcastShapes(x.shape, target);
  if (failed(expanded))
    return f.fail("cannot expand " + shapeStr(x.shape) + " to " + shapeStr(target));
  std::vector<int64_t> shape(expanded->begin(), expanded->end());
  if (!f.checkSize(shape))
    return false;
  ConstTensor y = ConstTensor::zeros(x.kind, shape);
  BroadcastWalk walk(shape, {x.shape});
  for (int64_t e = 0; e < y.elements(); ++e, walk.next())
    copyElement(x, walk.offset(0), y, e);
  return f.emit(std::move(y));
}

bool foldTile(Fold &f) {
  const ConstTensor &x = f.value(0);
  std::vector<int64_t> repeats;
  if (!f.integers(1, repeats))
    return false;
  if (repeats.size() != x.shape.size())
    return f.fail("repeats " + shapeStr(repeats) + " do not match rank " +
                  std::to_string(x.shape.size()));
  std::vector<int64_t> shape;
  for (size_t d = 0; d < repeats.size(); ++d)
    shape.push_back(x.shape[d] * repeats[d]);
  if (!f.checkSize(shape))
    return false;
  ConstTensor y = ConstTensor::zeros(x.kind, shape);
  std::vector<int64_t> strides = stridesOf(x.shape), counter(shape.size(), 0);
  for (int64_t e = 0; e < y.elements(); ++e) {
    int64_t src = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      src += (counter[d] % x.shape[d]) * strides[d];
    copyElement(x, src, y, e);
    for (int d = (int)shape.size() - 1; d >= 0; --d) {
      if (++counter[d] < shape[d])
        break;
      counter[d] = 0;
    }
  }
  return f.emit(std::move(y));
}

bool foldGather(Fold &f) {
  const ConstTensor &data = f.value(0);
  std::vector<int64_t> indices;
  if (!f.integers(1, indices))
    return false;
  const std::vector<int64_t> &ishape = f.value(1).shape;
  int64_t axis = f.intAttr("axis", 0);
  if (!normalizeAxis(axis, data.shape.size(), f.error))
    return false;
  std::vector<int64_t> shape = gatherShape(data.shape, ishape, axis);
  if (!f.checkSize(shape))
    return false;
  int64_t n = data.shape[axis];
  int64_t outer = numElements(llvm::ArrayRef<int64_t>(data.shape).take_front(axis));
  int64_t inner = numElements(llvm::ArrayRef<int64_t>(data.shape).drop_front(axis + 1));
  ConstTensor y = ConstTensor::zeros(data.kind, shape);
  int64_t e = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t idx : indices) {
      if (idx < -n || idx >= n)
        return f.fail("index " + std::to_string(idx) + " is out of range for a dim of " +
                      std::to_string(n));
      if (idx < 0)
        idx += n;
      for (int64_t j = 0; j < inner; ++j)
        copyElement(data, (o * n + idx) * inner + j, y, e++);
    }
  return f.emit(std::move(y));
}

bool foldGatherND(Fold &f) {
  const ConstTensor &data = f.value(0);
  std::vector<int64_t> indices;
  if (!f.integers(1, indices))
    return false;
  if (f.intAttr("batch_dims", 0) != 0)
    return f.fail("batch_dims other than 0 is not supported");
  const std::vector<int64_t> &ishape = f.value(1).shape;
  if (ishape.empty())
    return f.fail("indices must have rank >= 1");
  int64_t depth = ishape.back(), rank = data.shape.size();
  if (depth < 1 || depth > rank)
    return f.fail("the last dim of indices (" + std::to_string(depth) +
                  ") must be in [1, data rank]");
  std::vector<int64_t> shape(ishape.begin(), ishape.end() - 1);
  shape.insert(shape.end(), data.shape.begin() + depth, data.shape.end());
  if (!f.checkSize(shape))
    return false;
  std::vector<int64_t> strides = stridesOf(data.shape);
  int64_t inner = numElements(llvm::ArrayRef<int64_t>(data.shape).drop_front(depth));
  int64_t tuples = numElements(llvm::ArrayRef<int64_t>(ishape).drop_back());
  ConstTensor y = ConstTensor::zeros(data.kind, shape);
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t base = 0;
    for (int64_t d = 0; d < depth; ++d) {
      int64_t idx = indices[t * depth + d], n = data.shape[d];
      if (idx < -n || idx >= n)
        return f.fail("index " + std::to_string(idx) + " is out of range for a dim of " +
                      std::to_string(n));
      base += (idx < 0 ? idx + n : idx) * strides[d];
    }
    for (int64_t j = 0; j < inner; ++j)
      copyElement(data, base + j, y, t * inner + j);
  }
  return f.emit(std::move(y));
}

} // namespace

void registerShapeFolds(llvm::StringMap<FoldRule> &table) {
  table["Shape"] = {foldShape, /*typeOnlyInput=*/0};
  table["Size"] = {foldShape, /*typeOnlyInput=*/0};
  for (const char *op : {"Identity", "Reshape", "Unsqueeze", "Squeeze", "Flatten"})
    table[op] = {foldReshapeLike};
  table["Concat"] = {foldConcat};
  table["Slice"] = {foldSlice};
  table["Split"] = {foldSplit};
  table["Transpose"] = {foldTranspose};
  table["Expand"] = {foldExpand};
  table["Tile"] = {foldTile};
  table["Gather"] = {foldGather};
  table["GatherND"] = {foldGatherND};
}

} // namespace megatrain::onnx_import
