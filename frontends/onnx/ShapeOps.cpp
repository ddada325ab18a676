//===- ShapeOps.cpp - ONNX shape, indexing, cast and sequence ops -----------===//
//
// Run-time data movement: Reshape and its cousins (Unsqueeze, Squeeze,
// Flatten), Transpose, Expand, Concat, Slice, Split, Gather, Cast, Trilu,
// reductions, and the sequence ops that torch.onnx.export emits for
// torch.split (which never reach the IR: a sequence is a list of names).
// Shape arguments must be known at import time; the ConstantFolder has
// computed them when they come from Shape/Concat/... chains.
//
//===----------------------------------------------------------------------===//
#include "GraphImporter.h"
#include "OnnxShapes.h"

#include "megatrain/Dialect/MtDialect.h"

using namespace mlir;

namespace megatrain::onnx_import {

/// `x` reshaped to `shape`, or `x` itself when the shape is the same.
static Value reshapeTo(NodeImport &n, Value x, ArrayRef<int64_t> shape) {
  if (shapeOf(x) == shape)
    return x;
  return n.builder().create<mt::ReshapeOp>(n.loc(), mt::tensorLike(x.getType(), shape),
                                           x);
}

/// Binds output 0 to `x` reshaped to `shape` (an alias when nothing changes).
static LogicalResult setReshaped(NodeImport &n, Value x, ArrayRef<int64_t> shape) {
  if (shapeOf(x) == shape) {
    return n.aliasResult(0, 0);
  }
  n.setResult(0, reshapeTo(n, x, shape));
  return success();
}

/// Reshape with the shape read at import time: 0 copies the input's dim
/// (unless allowzero), -1 is inferred. A reshape to the same shape aliases.
static LogicalResult importReshape(NodeImport &n) {
  FailureOr<Value> x = n.operand(0);
  FailureOr<std::vector<int64_t>> target = failure();
  if (failed(x) || failed(target = n.constantIntegers(1)))
    return failure();
  std::vector<int64_t> shape;
  std::string problem;
  if (!reshapeTarget(shapeOf(*x), *target, n.intAttr("allowzero", 0) != 0, shape,
                     problem))
    return n.error() << problem;
  return setReshaped(n, *x, shape);
}

/// Axes from the `axes` attribute (before opset 13) or the optional input 1.
static FailureOr<std::vector<int64_t>> axesArgument(NodeImport &n) {
  if (auto attr = n.intsAttr("axes"))
    return *attr;
  if (!n.hasInput(1))
    return std::vector<int64_t>();
  return n.constantIntegers(1);
}

static LogicalResult importUnsqueezeSqueeze(NodeImport &n) {
  FailureOr<Value> x = n.operand(0);
  FailureOr<std::vector<int64_t>> axes = failure();
  if (failed(x) || failed(axes = axesArgument(n)))
    return failure();
  bool unsqueeze = n.node().op_type() == "Unsqueeze";
  std::vector<int64_t> shape;
  std::string problem;
  if (unsqueeze ? !unsqueezeShape(shapeOf(*x), *axes, shape, problem)
                : !squeezeShape(shapeOf(*x), *axes, shape, problem))
    return n.error() << problem;
  return setReshaped(n, *x, shape);
}

static LogicalResult importFlatten(NodeImport &n) {
  FailureOr<Value> x = n.operand(0);
  if (failed(x))
    return failure();
  std::vector<int64_t> shape;
  std::string problem;
  if (!flattenShape(shapeOf(*x), n.intAttr("axis", 1), shape, problem))
    return n.error() << problem;
  return setReshaped(n, *x, shape);
}

/// Transpose; perm defaults to reversing the dims. The identity aliases.
static LogicalResult importTranspose(NodeImport &n) {
  FailureOr<Value> x = n.operand(0);
  if (failed(x))
    return failure();
  std::vector<int64_t> perm;
  std::string problem;
  if (!transposePerm(shapeOf(*x).size(), n.intsAttr("perm"), perm, problem))
    return n.error() << problem;
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i)
    identity &= perm[i] == (int64_t)i;
  if (identity) {
    return n.aliasResult(0, 0);
  }
  std::vector<int64_t> shape = permuteShape(shapeOf(*x), perm);
  n.setResult(
      0, n.builder().create<mt::TransposeOp>(n.loc(), mt::tensorLike(x->getType(), shape),
                                             *x, n.builder().getDenseI64ArrayAttr(perm)));
  return success();
}

/// Expand: numpy broadcast of the input and the shape argument (either may
/// stretch the other's 1s), as mt.broadcast_to; no change aliases.
static LogicalResult importExpand(NodeImport &n) {
  FailureOr<Value> x = n.operand(0);
  FailureOr<std::vector<int64_t>> target = failure();
  if (failed(x) || failed(target = n.constantIntegers(1)))
    return failure();
  auto shape = mt::broadcastShapes(shapeOf(*x), *target);
  if (failed(shape))
    return n.error() << "cannot expand " << shapeStr(shapeOf(*x)) << " to "
                     << shapeStr(*target);
  if (ArrayRef<int64_t>(*shape) == shapeOf(*x)) {
    return n.aliasResult(0, 0);
  }
  n.setResult(0, n.builder().create<mt::BroadcastToOp>(
                     n.loc(), mt::tensorLike(x->getType(), *shape), *x));
  return success();
}

/// The runtime takes at most this many operands per concat.
static constexpr size_t kMaxConcatInputs = 8;

static Value concat(NodeImport &n, ArrayRef<Value> inputs, int64_t axis) {
  if (inputs.size() == 1)
    return inputs[0];
  SmallVector<Value> parts(inputs.begin(), inputs.end());
  while (parts.size() > 1) {
    SmallVector<Value> next;
    for (size_t k = 0; k < parts.size(); k += kMaxConcatInputs) {
      ArrayRef<Value> group =
          ArrayRef<Value>(parts).slice(k, std::min(kMaxConcatInputs, parts.size() - k));
      if (group.size() == 1) {
        next.push_back(group[0]);
        continue;
      }
      SmallVector<int64_t> shape(shapeOf(group[0]));
      shape[axis] = 0;
      for (Value v : group)
        shape[axis] += shapeOf(v)[axis];
      next.push_back(n.builder().create<mt::ConcatOp>(
          n.loc(), mt::tensorLike(group[0].getType(), shape), group,
          n.builder().getI64IntegerAttr(axis)));
    }
    parts = std::move(next);
  }
  return parts[0];
}

static LogicalResult importConcat(NodeImport &n) {
  const onnx::AttributeProto *axisAttr = n.attribute("axis");
  if (!axisAttr)
    return n.error() << "attribute 'axis' is required";
  SmallVector<Value> inputs;
  for (int k = 0; k < n.node().input_size(); ++k) {
    if (!n.hasInput(k))
      continue;
    // Empty inputs add nothing (an empty slice; zero-sized tensors never
    // reach the IR).
    if (const ConstTensor *known = n.constant(k); known && known->elements() == 0)
      continue;
    FailureOr<Value> v = n.operand(k);
    if (failed(v))
      return failure();
    inputs.push_back(*v);
  }
  if (inputs.empty())
    return n.error() << "needs at least one input";
  FailureOr<int64_t> axis = n.normalizedAxis(axisAttr->i(), shapeOf(inputs[0]).size());
  if (failed(axis))
    return failure();
  for (size_t k = 0; k < inputs.size(); ++k)
    if (elementOf(inputs[k]) != elementOf(inputs[0]) ||
        !concatCompatible(shapeOf(inputs[k]), shapeOf(inputs[0]), *axis))
      return n.error() << "input " << k << " " << inputs[k].getType()
                       << " does not match " << inputs[0].getType() << " off axis "
                       << *axis;
  n.setResult(0, concat(n, inputs, *axis));
  return success();
}

/// mt.slice of `dims` (normalized, steps >= 1): one range per dim.
static Value slice(NodeImport &n, Value x, const std::vector<SliceDim> &dims) {
  SmallVector<int64_t> starts, ends, steps, shape;
  for (const SliceDim &d : dims) {
    starts.push_back(d.start);
    ends.push_back(d.count == 0 ? d.start : d.start + (d.count - 1) * d.step + 1);
    steps.push_back(d.step);
    shape.push_back(d.count);
  }
  OpBuilder &b = n.builder();
  return b.create<mt::SliceOp>(
      n.loc(), mt::tensorLike(x.getType(), shape), x, b.getDenseI64ArrayAttr(starts),
      b.getDenseI64ArrayAttr(ends), b.getDenseI64ArrayAttr(steps));
}

static bool isWhole(ArrayRef<int64_t> shape, const std::vector<SliceDim> &dims) {
  for (size_t d = 0; d < dims.size(); ++d)
    if (dims[d].start != 0 || dims[d].step != 1 || dims[d].count != shape[d])
      return false;
  return true;
}

/// Slice (opset 10+: bounds as inputs, known at import time). Negative steps
/// are refused at run time (mt.slice has none); zero-sized results too.
static LogicalResult importSlice(NodeImport &n) {
  FailureOr<Value> x = n.operand(0);
  if (failed(x))
    return failure();
  FailureOr<std::vector<int64_t>> starts = n.constantIntegers(1), ends = failure();
  if (failed(starts) || failed(ends = n.constantIntegers(2)))
    return failure();
  std::optional<std::vector<int64_t>> axes, steps;
  if (n.hasInput(3)) {
    FailureOr<std::vector<int64_t>> v = n.constantIntegers(3);
    if (failed(v))
      return failure();
    axes = *v;
  }
  if (n.hasInput(4)) {
    FailureOr<std::vector<int64_t>> v = n.constantIntegers(4);
    if (failed(v))
      return failure();
    steps = *v;
  }
  std::vector<SliceDim> dims;
  std::string problem;
  if (!sliceDims(shapeOf(*x), *starts, *ends, axes, steps, dims, problem))
    return n.error() << problem;
  for (const SliceDim &d : dims) {
    if (d.step < 0)
      return n.error() << "negative steps are supported only on values known at import "
                          "time";
  }
  // An empty slice (Phi-3's pass-through part when the whole head rotates)
  // holds no data, so it is known: a zero-element value that Concat drops.
  // Anything else that reads it refuses it by name.
  if (llvm::any_of(dims, [](const SliceDim &d) { return d.count == 0; })) {
    std::optional<ConstKind> kind = constKindOf(elementOf(*x));
    if (!kind)
      return n.error() << "the slice is empty (zero-sized tensors are not supported)";
    std::vector<int64_t> shape;
    for (const SliceDim &d : dims)
      shape.push_back(d.count);
    n.setFolded(0, ConstTensor::zeros(*kind, shape));
    return success();
  }
  if (isWhole(shapeOf(*x), dims)) {
    return n.aliasResult(0, 0);
  }
  n.setResult(0, slice(n, *x, dims));
  return success();
}

/// The pieces of a split along `axis` with `sizes`, as slices of `x`.
static SmallVector<Value> splitPieces(NodeImport &n, Value x, int64_t axis,
                                      ArrayRef<int64_t> sizes) {
  SmallVector<Value> pieces;
  for (const std::vector<SliceDim> &dims : splitSlices(shapeOf(x), axis, sizes))
    pieces.push_back(isWhole(shapeOf(x), dims) ? x : slice(n, x, dims));
  return pieces;
}

/// Split: sizes from input 1 (opset 13+) or the `split` attribute, else
/// `num_outputs` (opset 18) or the number of outputs, in equal chunks.
static LogicalResult importSplit(NodeImport &n) {
  FailureOr<Value> x = n.operand(0);
  if (failed(x))
    return failure();
  FailureOr<int64_t> axis = n.normalizedAxis(n.intAttr("axis", 0), shapeOf(*x).size());
  if (failed(axis))
    return failure();
  std::optional<std::vector<int64_t>> given = n.intsAttr("split");
  if (!given && n.hasInput(1)) {
    FailureOr<std::vector<int64_t>> v = n.constantIntegers(1);
    if (failed(v))
      return failure();
    given = *v;
  }
  std::vector<int64_t> sizes;
  std::string problem;
  int64_t parts = n.intAttr("num_outputs", n.node().output_size());
  if (!splitSizes(shapeOf(*x)[*axis], given, parts, sizes, problem))
    return n.error() << problem;
  if ((int)sizes.size() != n.node().output_size())
    return n.error() << "splits into " << sizes.size() << " parts for "
                     << n.node().output_size() << " outputs";
  for (int64_t size : sizes)
    if (size == 0)
      return n.error() << "a part is empty (zero-sized tensors are not supported)";
  SmallVector<Value> pieces = splitPieces(n, *x, *axis, sizes);
  for (size_t k = 0; k < pieces.size(); ++k)
    n.setResult(k, pieces[k]);
  return success();
}

/// SplitToSequence: the sequence's elements are slices (or, for a value
/// known at import time, folded values); the sequence itself never reaches
/// the IR. No split input means pieces of 1, squeezed unless keepdims.
static LogicalResult importSplitToSequence(NodeImport &n) {
  std::vector<int64_t> inShape;
  std::optional<ConstKind> kind;
  if (failed(n.inputType(0, inShape, kind)))
    return failure();
  FailureOr<int64_t> axis = n.normalizedAxis(n.intAttr("axis", 0), inShape.size());
  if (failed(axis))
    return failure();
  int64_t dim = inShape[*axis];
  std::vector<int64_t> sizes;
  bool squeeze = false;
  // Every piece becomes a value of its own: as many as the inliner allows nodes.
  constexpr int64_t kMaxPieces = 1 << 16;
  if (!n.hasInput(1)) {
    if (dim > kMaxPieces)
      return n.error() << "splitting a dim of " << dim << " into pieces of 1 gives more than "
                       << kMaxPieces << " pieces";
    sizes.assign(dim, 1);
    squeeze = n.intAttr("keepdims", 1) == 0;
  } else {
    const ConstTensor *split = n.constant(1);
    if (!split || split->isFloat())
      return n.error() << n.inputLabel(1) << " must be integers known at import time";
    if (split->shape.empty()) {
      int64_t chunk = split->i[0];
      if (chunk <= 0)
        return n.error() << "split " << chunk << " must be positive";
      if (dim / chunk + (dim % chunk != 0) > kMaxPieces)
        return n.error() << "splitting a dim of " << dim << " into pieces of " << chunk
                         << " gives more than " << kMaxPieces << " pieces";
      for (int64_t left = dim; left > 0; left -= chunk)
        sizes.push_back(std::min(chunk, left));
    } else {
      std::string problem;
      if (!splitSizes(dim, split->i, 0, sizes, problem))
        return n.error() << problem;
    }
  }
  std::vector<GraphValue> elements;
  if (const ConstTensor *value = n.constant(0)) {
    for (const std::vector<SliceDim> &dims : splitSlices(inShape, *axis, sizes)) {
      GraphValue element;
      ConstTensor piece = sliceConst(*value, dims);
      if (squeeze)
        piece.shape.erase(piece.shape.begin() + *axis);
      element.folded = std::make_shared<const ConstTensor>(std::move(piece));
      elements.push_back(element);
    }
  } else {
    FailureOr<Value> x = n.operand(0);
    if (failed(x))
      return failure();
    for (Value piece : splitPieces(n, *x, *axis, sizes)) {
      if (squeeze) {
        SmallVector<int64_t> shape(shapeOf(piece));
        shape.erase(shape.begin() + *axis);
        piece = reshapeTo(n, piece, shape);
      }
      GraphValue element;
      element.value = piece;
      elements.push_back(element);
    }
  }
  n.setSequence(0, std::move(elements));
  return success();
}

static LogicalResult importSequenceConstruct(NodeImport &n) {
  std::vector<GraphValue> elements;
  for (int k = 0; k < n.node().input_size(); ++k) {
    FailureOr<GraphValue> v = n.input(k);
    if (failed(v))
      return failure();
    if (v->sequence)
      return n.error() << "input " << k
                       << " is a sequence; sequences of sequences are "
                          "not supported";
    elements.push_back(*v);
  }
  n.setSequence(0, std::move(elements));
  return success();
}

/// SequenceAt with a position known at import time (negative counts from
/// the end): the output is that element.
static LogicalResult importSequenceAt(NodeImport &n) {
  FailureOr<std::vector<GraphValue>> elements = n.sequence(0);
  FailureOr<std::vector<int64_t>> position = failure();
  if (failed(elements) || failed(position = n.constantIntegers(1)))
    return failure();
  int64_t count = elements->size();
  if (position->size() != 1)
    return n.error() << "position must be a scalar";
  int64_t at = (*position)[0];
  if (at < -count || at >= count)
    return n.error() << "position " << at << " is out of range for a sequence of "
                     << count;
  n.bindResult(0, (*elements)[at < 0 ? at + count : at]);
  return success();
}

static LogicalResult importSequenceLength(NodeImport &n) {
  FailureOr<std::vector<GraphValue>> elements = n.sequence(0);
  if (failed(elements))
    return failure();
  ConstTensor length;
  length.kind = ConstKind::I64;
  length.i = {(int64_t)elements->size()};
  n.setFolded(0, std::move(length));
  return success();
}

/// The element kind `to` names for Cast / the kind of CastLike's input 1.
static FailureOr<ConstKind> castTarget(NodeImport &n) {
  if (n.node().op_type() == "CastLike") {
    std::vector<int64_t> shape;
    std::optional<ConstKind> kind;
    if (failed(n.inputType(1, shape, kind)))
      return failure();
    if (!kind) {
      n.error()
          << "the target type (input 1) must be FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT64, INT32 or BOOL";
      return failure();
    }
    return *kind;
  }
  const onnx::AttributeProto *to = n.attribute("to");
  if (!to) {
    n.error() << "attribute 'to' is required";
    return failure();
  }
  std::optional<ConstKind> kind = constKindOf((int32_t)to->i());
  if (!kind) {
    n.error() << "cast to dtype " << to->i()
              << " is not supported (FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT64, INT32 or BOOL)";
    return failure();
  }
  return *kind;
}

/// Cast and CastLike: to the same type an alias, otherwise mt.cast.
static LogicalResult importCast(NodeImport &n) {
  FailureOr<Value> x = n.operand(0);
  FailureOr<ConstKind> to = failure();
  if (failed(x) || failed(to = castTarget(n)))
    return failure();
  Type element = mlirTypeOf(*n.context(), *to);
  if (element == elementOf(*x)) {
    return n.aliasResult(0, 0);
  }
  if (!constKindOf(elementOf(*x)))
    return n.error() << "cannot cast " << x->getType();
  n.setResult(0, n.builder().create<mt::CastOp>(
                     n.loc(), RankedTensorType::get(shapeOf(*x), element), *x));
  return success();
}

/// Trilu on a run-time value: mt.where with the triangle (known at import
/// time) as the condition, so masked entries are exactly 0 even where x is
/// infinite.
static LogicalResult importTrilu(NodeImport &n) {
  FailureOr<Value> x = n.operand(0);
  if (failed(x))
    return failure();
  ArrayRef<int64_t> shape = shapeOf(*x);
  if (shape.size() < 2)
    return n.error() << "input must have rank >= 2, got " << shapeStr(shape);
  int64_t k = 0;
  if (n.hasInput(1)) {
    FailureOr<std::vector<int64_t>> v = n.constantIntegers(1);
    if (failed(v))
      return failure();
    if (v->size() != 1)
      return n.error() << "k must be a scalar";
    k = (*v)[0];
  }
  bool upper = n.intAttr("upper", 1) != 0;
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  ConstTensor mask;
  mask.kind = ConstKind::Bool;
  mask.shape = {rows, cols};
  if (failed(n.checkComputedSize(mask, n.node().output(0) + "/mask")))
    return failure();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      mask.i.push_back(triluKeeps(r, c, k, upper));
  FailureOr<Value> cond = n.computedConstant(mask, n.node().output(0) + "/mask");
  if (failed(cond))
    return failure();
  OpBuilder &b = n.builder();
  Value zero = b.create<mt::FillOp>(n.loc(), mt::tensorLike(x->getType(), {}),
                                    b.getF64FloatAttr(0.0));
  n.setResult(0, b.create<mt::WhereOp>(n.loc(), x->getType(), *cond, *x, zero));
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
      return n.aliasResult(0, 0);
    }
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  for (int64_t &a : axes) {
    FailureOr<int64_t> axis = n.normalizedAxis(a, rank);
    if (failed(axis))
      return failure();
    a = *axis;
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
  FailureOr<int64_t> axis = n.normalizedAxis(n.intAttr("axis", 0), shapeOf(*data).size());
  if (failed(axis))
    return failure();
  std::vector<int64_t> shape = gatherShape(shapeOf(*data), shapeOf(*indices), *axis);
  OpBuilder &b = n.builder();
  n.setResult(0, b.create<mt::GatherOp>(n.loc(), mt::tensorLike(data->getType(), shape),
                                        *data, *indices, b.getI64IntegerAttr(*axis)));
  return success();
}

static LogicalResult importIdentity(NodeImport &n) {
  if (!n.hasInput(0))
    return n.error() << "input 0 is required";
  return n.aliasResult(0, 0);
}

void registerShapeOps(llvm::StringMap<OpImportFn> &table) {
  table["Reshape"] = importReshape;
  table["Unsqueeze"] = importUnsqueezeSqueeze;
  table["Squeeze"] = importUnsqueezeSqueeze;
  table["Flatten"] = importFlatten;
  table["Transpose"] = importTranspose;
  table["Expand"] = importExpand;
  table["Concat"] = importConcat;
  table["Slice"] = importSlice;
  table["Split"] = importSplit;
  table["SplitToSequence"] = importSplitToSequence;
  table["SequenceConstruct"] = importSequenceConstruct;
  table["SequenceAt"] = importSequenceAt;
  table["SequenceLength"] = importSequenceLength;
  table["Cast"] = importCast;
  table["CastLike"] = importCast;
  table["Trilu"] = importTrilu;
  table["ReduceSum"] = importReduce<mt::ReduceSumOp>;
  table["ReduceMean"] = importReduce<mt::ReduceMeanOp>;
  table["Gather"] = importGather;
  table["Identity"] = importIdentity;
}

} // namespace megatrain::onnx_import
