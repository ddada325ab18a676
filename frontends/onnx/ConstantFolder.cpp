//===- ConstantFolder.cpp - evaluates ONNX nodes on values known at import -===//
//
// One function per op family, each computing in double (floats) or int64
// (integers, bools) and rounding float32 results back to float after every
// op, so a folded f32 table holds what an f32 evaluation would. Shapes are
// checked as the ONNX spec states them; a violation is an error, never a
// guess.
//
//===----------------------------------------------------------------------===//
#include "ConstantFolder.h"
#include "TensorData.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>

using namespace mlir;

namespace megatrain::onnx_import {

//===----------------------------------------------------------------------===//
// ConstTensor
//===----------------------------------------------------------------------===//

static int64_t product(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int64_t ConstTensor::elements() const { return product(shape); }

int64_t ConstTensor::bytes() const {
  switch (kind) {
  case ConstKind::F32:
    return elements() * 4;
  case ConstKind::Bool:
    return elements();
  default:
    return elements() * 8;
  }
}

std::optional<ConstKind> constKindOf(int32_t dtype) {
  switch (dtype) {
  case onnx::TensorProto::FLOAT:
    return ConstKind::F32;
  case onnx::TensorProto::DOUBLE:
    return ConstKind::F64;
  case onnx::TensorProto::INT64:
  case onnx::TensorProto::INT32:
    return ConstKind::I64;
  case onnx::TensorProto::BOOL:
    return ConstKind::Bool;
  default:
    return std::nullopt;
  }
}

const char *kindName(ConstKind kind) {
  switch (kind) {
  case ConstKind::F32:
    return "f32";
  case ConstKind::F64:
    return "f64";
  case ConstKind::I64:
    return "i64";
  case ConstKind::Bool:
    return "bool";
  }
  return "?";
}

Type mlirTypeOf(MLIRContext &context, ConstKind kind) {
  switch (kind) {
  case ConstKind::F32:
    return Float32Type::get(&context);
  case ConstKind::F64:
    return Float64Type::get(&context);
  case ConstKind::I64:
    return IntegerType::get(&context, 64);
  case ConstKind::Bool:
    return IntegerType::get(&context, 1);
  }
  return {};
}

std::optional<ConstKind> constKindOf(Type element) {
  if (element.isF32())
    return ConstKind::F32;
  if (element.isF64())
    return ConstKind::F64;
  if (element.isInteger(64))
    return ConstKind::I64;
  if (element.isInteger(1))
    return ConstKind::Bool;
  return std::nullopt;
}

static double roundTo(ConstKind kind, double x) {
  return kind == ConstKind::F32 ? (double)(float)x : x;
}

bool readConstTensor(const onnx::TensorProto &tensor, ConstTensor &out,
                     std::string &error) {
  std::optional<ConstKind> kind = constKindOf(tensor.data_type());
  if (!kind) {
    error = "has unsupported dtype " + dtypeName(tensor.data_type());
    return false;
  }
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    error = "stores its data externally; it is not read at import time";
    return false;
  }
  out = ConstTensor();
  out.kind = *kind;
  out.shape = dimsOf(tensor);
  for (int64_t d : out.shape)
    if (d < 0) {
      error = "has a negative dim";
      return false;
    }
  int64_t count = out.elements();
  if (count > kMaxFoldElements) {
    error = "has " + std::to_string(count) +
            " elements; values read at import time "
            "are limited to " +
            std::to_string(kMaxFoldElements);
    return false;
  }
  if (*kind == ConstKind::Bool) {
    // BOOL is one byte per element in raw_data, int32_data otherwise.
    if (tensor.has_raw_data()) {
      const std::string &raw = tensor.raw_data();
      if ((int64_t)raw.size() != count) {
        error = "has " + std::to_string(raw.size()) + " bytes of raw data for " +
                std::to_string(count) + " elements";
        return false;
      }
      for (char c : raw)
        out.i.push_back(c != 0);
    } else {
      if (tensor.int32_data_size() != count) {
        error = "has " + std::to_string(tensor.int32_data_size()) + " values for " +
                std::to_string(count) + " elements";
        return false;
      }
      for (int32_t v : tensor.int32_data())
        out.i.push_back(v != 0);
    }
    return true;
  }
  if (*kind == ConstKind::I64)
    return readIntegers(tensor, out.i, error);
  return readReals(tensor, out.f, error);
}

DenseElementsAttr toAttr(MLIRContext &context, const ConstTensor &value) {
  auto type = RankedTensorType::get(value.shape, mlirTypeOf(context, value.kind));
  switch (value.kind) {
  case ConstKind::F32: {
    std::vector<float> data(value.f.begin(), value.f.end());
    return DenseElementsAttr::get(type, llvm::ArrayRef<float>(data));
  }
  case ConstKind::F64:
    return DenseElementsAttr::get(type, llvm::ArrayRef<double>(value.f));
  case ConstKind::I64:
    return DenseElementsAttr::get(type, llvm::ArrayRef<int64_t>(value.i));
  case ConstKind::Bool: {
    llvm::SmallVector<bool> data;
    for (int64_t v : value.i)
      data.push_back(v != 0);
    return DenseElementsAttr::get(type, llvm::ArrayRef<bool>(data));
  }
  }
  return {};
}

static std::vector<int64_t> stridesOf(llvm::ArrayRef<int64_t> shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int d = (int)shape.size() - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

/// An empty tensor of `kind` and `shape`, its storage sized.
static ConstTensor make(ConstKind kind, std::vector<int64_t> shape) {
  ConstTensor t;
  t.kind = kind;
  t.shape = std::move(shape);
  if (t.isFloat())
    t.f.assign(t.elements(), 0.0);
  else
    t.i.assign(t.elements(), 0);
  return t;
}

/// Element `from` of `src` copied to element `to` of `dst` (same kind).
static void copyElement(const ConstTensor &src, int64_t from, ConstTensor &dst,
                        int64_t to) {
  if (src.isFloat())
    dst.f[to] = src.f[from];
  else
    dst.i[to] = src.i[from];
}

bool dropRepeatedDims(const ConstTensor &value, ConstTensor &reduced) {
  ConstTensor current = value;
  bool any = false;
  for (size_t d = 0; d < current.shape.size(); ++d) {
    int64_t n = current.shape[d];
    if (n <= 1)
      continue;
    std::vector<int64_t> strides = stridesOf(current.shape);
    int64_t outer = product(llvm::ArrayRef<int64_t>(current.shape).take_front(d));
    int64_t inner = strides[d];
    bool repeats = true;
    for (int64_t o = 0; repeats && o < outer; ++o)
      for (int64_t k = 1; repeats && k < n; ++k)
        for (int64_t j = 0; j < inner; ++j) {
          int64_t a = o * n * inner + j, b = a + k * inner;
          if (current.isFloat() ? current.f[a] != current.f[b]
                                : current.i[a] != current.i[b]) {
            repeats = false;
            break;
          }
        }
    if (!repeats)
      continue;
    std::vector<int64_t> shape = current.shape;
    shape[d] = 1;
    ConstTensor next = make(current.kind, shape);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < inner; ++j)
        copyElement(current, o * n * inner + j, next, o * inner + j);
    current = std::move(next);
    any = true;
  }
  if (any)
    reduced = std::move(current);
  return any;
}

//===----------------------------------------------------------------------===//
// Shape arithmetic
//===----------------------------------------------------------------------===//

static std::string shapeText(llvm::ArrayRef<int64_t> shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? "x" : "") + std::to_string(shape[i]);
  return out + "]";
}

bool broadcastShape(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b,
                    std::vector<int64_t> &out) {
  size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t k = 0; k < rank; ++k) {
    int64_t da = k < rank - a.size() ? 1 : a[k - (rank - a.size())];
    int64_t db = k < rank - b.size() ? 1 : b[k - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return false;
    out[k] = da == 1 ? db : da;
  }
  return true;
}

bool reshapeTarget(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> target,
                   bool allowZero, std::vector<int64_t> &out, std::string &error) {
  out.clear();
  int inferred = -1;
  int64_t known = 1;
  for (size_t k = 0; k < target.size(); ++k) {
    int64_t d = target[k];
    if (d == 0 && !allowZero) {
      if (k >= in.size()) {
        error = "shape " + shapeText(target) + " copies dim " + std::to_string(k) +
                " of a rank-" + std::to_string(in.size()) + " input";
        return false;
      }
      d = in[k];
    } else if (d == -1) {
      if (inferred >= 0) {
        error = "shape " + shapeText(target) + " has more than one -1";
        return false;
      }
      inferred = (int)k;
      d = 1;
    } else if (d <= 0) {
      error = "shape " + shapeText(target) +
              " has a zero or negative dim (zero-sized tensors are not supported)";
      return false;
    }
    out.push_back(d);
    if ((int)k != inferred)
      known *= d;
  }
  int64_t total = product(in);
  if (inferred >= 0) {
    if (known == 0 || total % known != 0) {
      error = "cannot reshape " + shapeText(in) + " to " + shapeText(target);
      return false;
    }
    out[inferred] = total / known;
  }
  if (product(out) != total) {
    error = "cannot reshape " + shapeText(in) + " to " + shapeText(target) + " (" +
            shapeText(out) + ")";
    return false;
  }
  return true;
}

bool unsqueezeShape(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> axes,
                    std::vector<int64_t> &out, std::string &error) {
  int64_t rank = in.size() + axes.size();
  std::vector<bool> inserted(rank, false);
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) {
      error = "axis " + std::to_string(a) + " is out of range for output rank " +
              std::to_string(rank);
      return false;
    }
    if (a < 0)
      a += rank;
    if (inserted[a]) {
      error = "axes repeat a dim";
      return false;
    }
    inserted[a] = true;
  }
  out.clear();
  size_t next = 0;
  for (int64_t d = 0; d < rank; ++d)
    out.push_back(inserted[d] ? 1 : in[next++]);
  return true;
}

bool squeezeShape(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> axes,
                  std::vector<int64_t> &out, std::string &error) {
  int64_t rank = in.size();
  std::vector<bool> dropped(rank, false);
  if (axes.empty()) {
    for (int64_t d = 0; d < rank; ++d)
      dropped[d] = in[d] == 1;
  }
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) {
      error = "axis " + std::to_string(a) + " is out of range for rank " +
              std::to_string(rank);
      return false;
    }
    if (a < 0)
      a += rank;
    if (in[a] != 1) {
      error = "cannot squeeze dim " + std::to_string(a) + " of " + shapeText(in) +
              ": its size is not 1";
      return false;
    }
    dropped[a] = true;
  }
  out.clear();
  for (int64_t d = 0; d < rank; ++d)
    if (!dropped[d])
      out.push_back(in[d]);
  return true;
}

bool sliceDims(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> starts,
               llvm::ArrayRef<int64_t> ends, std::optional<std::vector<int64_t>> axes,
               std::optional<std::vector<int64_t>> steps, std::vector<SliceDim> &out,
               std::string &error) {
  int64_t rank = shape.size();
  if (starts.size() != ends.size()) {
    error = "starts and ends have different lengths";
    return false;
  }
  size_t n = starts.size();
  if (!axes) {
    axes.emplace();
    for (size_t k = 0; k < n; ++k)
      axes->push_back(k);
  }
  if (!steps)
    steps.emplace(n, 1);
  if (axes->size() != n || steps->size() != n) {
    error = "starts, ends, axes and steps must have one length";
    return false;
  }
  out.assign(rank, SliceDim());
  std::vector<bool> seen(rank, false);
  for (int64_t d = 0; d < rank; ++d)
    out[d] = {0, 1, shape[d]};
  for (size_t k = 0; k < n; ++k) {
    int64_t axis = (*axes)[k];
    if (axis < -rank || axis >= rank) {
      error = "axis " + std::to_string(axis) + " is out of range for rank " +
              std::to_string(rank);
      return false;
    }
    if (axis < 0)
      axis += rank;
    if (seen[axis]) {
      error = "axes repeat a dim";
      return false;
    }
    seen[axis] = true;
    int64_t dim = shape[axis], step = (*steps)[k];
    if (step == 0) {
      error = "a step is 0";
      return false;
    }
    // Bounds are clamped as the spec says: to [0, dim] for positive steps,
    // [-1, dim - 1] for negative ones. Huge values (INT64_MAX) mean "to the end".
    auto clampIndex = [&](int64_t v, int64_t lo, int64_t hi) {
      if (v < 0)
        v = v < -dim ? -dim - 1 : v;
      if (v < 0)
        v += dim;
      return std::clamp(v, lo, hi);
    };
    int64_t s, e;
    if (step > 0) {
      s = clampIndex(starts[k], 0, dim);
      e = clampIndex(ends[k], 0, dim);
    } else {
      s = clampIndex(starts[k], -1, dim - 1);
      e = clampIndex(ends[k], -1, dim - 1);
    }
    int64_t count =
        step > 0 ? (e - s + step - 1) / step : (s - e + (-step) - 1) / (-step);
    out[axis] = {s, step, std::max<int64_t>(count, 0)};
  }
  return true;
}

bool splitSizes(int64_t dim, std::optional<std::vector<int64_t>> sizes, int64_t parts,
                std::vector<int64_t> &out, std::string &error) {
  if (sizes) {
    int64_t total = 0;
    for (int64_t s : *sizes) {
      if (s < 0) {
        error = "split sizes must not be negative";
        return false;
      }
      total += s;
    }
    if (total != dim) {
      error = "split sizes " + shapeText(*sizes) + " do not sum to the dim " +
              std::to_string(dim);
      return false;
    }
    out = *sizes;
    return true;
  }
  if (parts <= 0) {
    error = "the number of outputs must be positive";
    return false;
  }
  int64_t chunk = (dim + parts - 1) / parts;
  out.clear();
  for (int64_t k = 0, left = dim; k < parts; ++k) {
    out.push_back(std::min(chunk, left));
    left -= out.back();
  }
  if (out.back() <= 0) {
    error = "cannot split a dim of " + std::to_string(dim) + " into " +
            std::to_string(parts) + " non-empty parts";
    return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Folding helpers
//===----------------------------------------------------------------------===//

namespace {

/// What one op folder sees.
struct Fold {
  const onnx::NodeProto &node;
  int64_t opset;
  llvm::ArrayRef<FoldInput> in;
  std::vector<ConstTensor> &out;
  std::string &error;

  bool has(int k) const { return k < (int)in.size() && in[k].present; }
  const ConstTensor &value(int k) const { return *in[k].value; }

  const onnx::AttributeProto *attr(llvm::StringRef name) const {
    for (const onnx::AttributeProto &a : node.attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  }
  int64_t intAttr(llvm::StringRef name, int64_t fallback) const {
    const onnx::AttributeProto *a = attr(name);
    return a ? a->i() : fallback;
  }
  std::optional<std::vector<int64_t>> intsAttr(llvm::StringRef name) const {
    const onnx::AttributeProto *a = attr(name);
    if (!a)
      return std::nullopt;
    return std::vector<int64_t>(a->ints().begin(), a->ints().end());
  }

  bool fail(const std::string &message) {
    error = message;
    return false;
  }
  /// Input k's values as integers (shape, axes, indices arguments).
  bool integers(int k, std::vector<int64_t> &values) {
    if (!has(k))
      return fail("input " + std::to_string(k) + " is required");
    const ConstTensor &t = value(k);
    if (t.isFloat())
      return fail("input " + std::to_string(k) + " must be integer, got " +
                  kindName(t.kind));
    values = t.i;
    return true;
  }
  /// Optional integer list from input k, or nullopt when absent.
  bool optionalIntegers(int k, std::optional<std::vector<int64_t>> &values) {
    values.reset();
    if (!has(k))
      return true;
    std::vector<int64_t> v;
    if (!integers(k, v))
      return false;
    values = std::move(v);
    return true;
  }
  bool checkSize(const std::vector<int64_t> &shape) {
    int64_t n = 1;
    for (int64_t d : shape) {
      if (d < 0)
        return fail("result shape " + shapeText(shape) + " has a negative dim");
      if (__builtin_mul_overflow(n, d, &n))
        return fail("the result " + shapeText(shape) +
                    " is too large to evaluate at import time");
    }
    if (n > kMaxFoldElements)
      return fail("the result " + shapeText(shape) + " has " + std::to_string(n) +
                  " elements; values evaluated at import time are limited to " +
                  std::to_string(kMaxFoldElements));
    return true;
  }
  bool emit(ConstTensor t) {
    out.push_back(std::move(t));
    return true;
  }
};

/// Walks the elements of `outShape` in order, tracking for each input shape
/// the offset of the element it reads under numpy broadcasting (no index
/// arrays: a [B, 1, T, T] mask is folded in place).
class BroadcastWalk {
public:
  BroadcastWalk(llvm::ArrayRef<int64_t> outShape,
                std::initializer_list<llvm::ArrayRef<int64_t>> inShapes)
      : shape_(outShape.begin(), outShape.end()), counter_(outShape.size(), 0),
        offsets_(inShapes.size(), 0) {
    size_t rank = outShape.size();
    for (llvm::ArrayRef<int64_t> in : inShapes) {
      std::vector<int64_t> strides(rank, 0), own = stridesOf(in);
      for (size_t k = 0; k < in.size(); ++k)
        strides[rank - in.size() + k] = in[k] == 1 ? 0 : own[k];
      strides_.push_back(std::move(strides));
    }
  }
  int64_t offset(size_t input) const { return offsets_[input]; }
  void next() {
    for (int d = (int)shape_.size() - 1; d >= 0; --d) {
      if (++counter_[d] < shape_[d]) {
        for (size_t k = 0; k < offsets_.size(); ++k)
          offsets_[k] += strides_[k][d];
        return;
      }
      for (size_t k = 0; k < offsets_.size(); ++k)
        offsets_[k] -= strides_[k][d] * (shape_[d] - 1);
      counter_[d] = 0;
    }
  }

private:
  std::vector<int64_t> shape_, counter_, offsets_;
  std::vector<std::vector<int64_t>> strides_;
};

/// The common broadcast shape of every present input.
bool broadcastAll(Fold &f, std::vector<int64_t> &shape) {
  shape.clear();
  for (size_t k = 0; k < f.in.size(); ++k) {
    if (!f.has(k))
      continue;
    std::vector<int64_t> next;
    if (!broadcastShape(shape, f.value(k).shape, next))
      return f.fail("operand shapes " + shapeText(shape) + " and " +
                    shapeText(f.value(k).shape) + " do not broadcast");
    shape = next;
  }
  return f.checkSize(shape);
}

int64_t floatToInt(double x) {
  if (std::isnan(x))
    return 0;
  if (x >= 9.2233720368547758e18)
    return std::numeric_limits<int64_t>::max();
  if (x <= -9.2233720368547758e18)
    return std::numeric_limits<int64_t>::min();
  return (int64_t)x;
}

ConstTensor convert(const ConstTensor &x, ConstKind to) {
  ConstTensor y = make(to, x.shape);
  for (int64_t k = 0; k < x.elements(); ++k) {
    switch (to) {
    case ConstKind::F32:
    case ConstKind::F64:
      y.f[k] = roundTo(to, x.real(k));
      break;
    case ConstKind::I64:
      y.i[k] = x.isFloat() ? floatToInt(x.f[k]) : x.i[k];
      break;
    case ConstKind::Bool:
      y.i[k] = x.isFloat() ? x.f[k] != 0.0 : x.i[k] != 0;
      break;
    }
  }
  return y;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

enum class Family { Arithmetic, Compare, Logical };

struct BinaryFn {
  Family family;
  std::function<double(double, double)> real;
  std::function<bool(int64_t, int64_t, int64_t &)> integer; // false: error
};

const BinaryFn *binaryFn(llvm::StringRef op) {
  static const llvm::StringMap<BinaryFn> table = [] {
    llvm::StringMap<BinaryFn> t;
    auto ok = [](auto fn) {
      return [fn](int64_t a, int64_t b, int64_t &r) {
        r = fn(a, b);
        return true;
      };
    };
    t["Add"] = {
        Family::Arithmetic, [](double a, double b) { return a + b; },
        ok([](int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); })};
    t["Sub"] = {
        Family::Arithmetic, [](double a, double b) { return a - b; },
        ok([](int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); })};
    t["Mul"] = {
        Family::Arithmetic, [](double a, double b) { return a * b; },
        ok([](int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); })};
    t["Div"] = {Family::Arithmetic, [](double a, double b) { return a / b; },
                [](int64_t a, int64_t b, int64_t &r) {
                  if (b == 0)
                    return false;
                  r = a / b; // truncation, as onnxruntime
                  return true;
                }};
    t["Mod"] = {Family::Arithmetic, [](double a, double b) { return std::fmod(a, b); },
                [](int64_t a, int64_t b, int64_t &r) {
                  if (b == 0)
                    return false;
                  r = a % b;
                  if (r != 0 && ((r < 0) != (b < 0)))
                    r += b; // fmod=0: the sign of the divisor, as Python
                  return true;
                }};
    t["Pow"] = {Family::Arithmetic, [](double a, double b) { return std::pow(a, b); },
                ok([](int64_t a, int64_t b) {
                  int64_t r = 1;
                  for (int64_t k = 0; k < b; ++k)
                    r *= a;
                  return r;
                })};
    t["Max"] = {Family::Arithmetic,
                [](double a, double b) { return std::isnan(a) || a >= b ? a : b; },
                ok([](int64_t a, int64_t b) { return std::max(a, b); })};
    t["Min"] = {Family::Arithmetic,
                [](double a, double b) { return std::isnan(a) || a <= b ? a : b; },
                ok([](int64_t a, int64_t b) { return std::min(a, b); })};
    t["Equal"] = {Family::Compare, [](double a, double b) { return double(a == b); },
                  ok([](int64_t a, int64_t b) { return int64_t(a == b); })};
    t["Less"] = {Family::Compare, [](double a, double b) { return double(a < b); },
                 ok([](int64_t a, int64_t b) { return int64_t(a < b); })};
    t["LessOrEqual"] = {Family::Compare,
                        [](double a, double b) { return double(a <= b); },
                        ok([](int64_t a, int64_t b) { return int64_t(a <= b); })};
    t["Greater"] = {Family::Compare, [](double a, double b) { return double(a > b); },
                    ok([](int64_t a, int64_t b) { return int64_t(a > b); })};
    t["GreaterOrEqual"] = {Family::Compare,
                           [](double a, double b) { return double(a >= b); },
                           ok([](int64_t a, int64_t b) { return int64_t(a >= b); })};
    t["And"] = {Family::Logical, nullptr,
                ok([](int64_t a, int64_t b) { return a && b; })};
    t["Or"] = {Family::Logical, nullptr, ok([](int64_t a, int64_t b) { return a || b; })};
    t["Xor"] = {Family::Logical, nullptr,
                ok([](int64_t a, int64_t b) { return int64_t((a != 0) != (b != 0)); })};
    return t;
  }();
  auto it = table.find(op);
  return it == table.end() ? nullptr : &it->second;
}

/// Binary (and variadic Max/Min/Sum/Mean) elementwise ops with broadcasting.
bool foldBinary(Fold &f) {
  llvm::StringRef op = f.node.op_type();
  bool variadic = op == "Max" || op == "Min" || op == "Sum" || op == "Mean";
  const BinaryFn *fn = binaryFn(op == "Sum" || op == "Mean" ? "Add" : op);
  int count = 0;
  for (size_t k = 0; k < f.in.size(); ++k)
    count += f.has(k);
  if (count == 0 || (!variadic && (count != 2 || !f.has(0) || !f.has(1))))
    return f.fail(variadic ? "needs at least one input" : "needs two inputs");
  std::vector<int64_t> shape;
  if (!broadcastAll(f, shape))
    return false;
  ConstKind kind = f.value(0).kind;
  for (size_t k = 1; k < f.in.size(); ++k)
    if (f.has(k) && f.value(k).kind != kind && op != "Pow")
      return f.fail(std::string("operands have different element types (") +
                    kindName(kind) + " and " + kindName(f.value(k).kind) + ")");
  if (fn->family == Family::Logical && kind != ConstKind::Bool)
    return f.fail(std::string("operands must be bool, got ") + kindName(kind));
  ConstKind outKind = fn->family == Family::Arithmetic ? kind : ConstKind::Bool;
  if (fn->family == Family::Arithmetic && kind == ConstKind::Bool)
    return f.fail("arithmetic on bool operands is not supported");
  bool real = kind == ConstKind::F32 || kind == ConstKind::F64;
  ConstTensor acc;
  bool first = true;
  for (size_t k = 0; k < f.in.size(); ++k) {
    if (!f.has(k))
      continue;
    const ConstTensor &x = f.value(k);
    int64_t total = product(shape);
    BroadcastWalk walk(shape, {x.shape});
    if (first) {
      acc = make(x.kind, shape);
      for (int64_t e = 0; e < total; ++e, walk.next())
        copyElement(x, walk.offset(0), acc, e);
      first = false;
      continue;
    }
    ConstTensor next = make(outKind, shape);
    for (int64_t e = 0; e < total; ++e, walk.next()) {
      int64_t at = walk.offset(0);
      if (real) {
        double r = fn->real(acc.f[e], x.real(at));
        if (outKind == ConstKind::Bool)
          next.i[e] = r != 0.0;
        else
          next.f[e] = roundTo(outKind, r);
      } else {
        int64_t r;
        int64_t b = x.isFloat() ? floatToInt(x.f[at]) : x.i[at];
        if (!fn->integer(acc.i[e], b, r))
          return f.fail("integer division by zero");
        next.i[e] = r;
      }
    }
    acc = std::move(next);
  }
  if (op == "Mean") {
    if (!real)
      return f.fail("Mean of integers is not supported");
    for (double &v : acc.f)
      v = roundTo(kind, v / count);
  }
  return f.emit(std::move(acc));
}

bool foldUnary(Fold &f) {
  llvm::StringRef op = f.node.op_type();
  if (!f.has(0))
    return f.fail("input 0 is required");
  const ConstTensor &x = f.value(0);
  if (op == "Not") {
    if (x.kind != ConstKind::Bool)
      return f.fail(std::string("Not needs a bool operand, got ") + kindName(x.kind));
    ConstTensor y = x;
    for (int64_t &v : y.i)
      v = !v;
    return f.emit(std::move(y));
  }
  if (op == "IsNaN" || op == "IsInf") {
    ConstTensor y = make(ConstKind::Bool, x.shape);
    bool positive = f.intAttr("detect_positive", 1) != 0;
    bool negative = f.intAttr("detect_negative", 1) != 0;
    for (int64_t k = 0; k < x.elements(); ++k) {
      double v = x.real(k);
      y.i[k] = op == "IsNaN"
                   ? std::isnan(v)
                   : std::isinf(v) && ((v > 0 && positive) || (v < 0 && negative));
    }
    return f.emit(std::move(y));
  }
  if (x.kind == ConstKind::Bool)
    return f.fail(std::string(op) + " of a bool operand is not supported");
  if (!x.isFloat()) {
    ConstTensor y = x;
    if (op == "Neg") {
      for (int64_t &v : y.i)
        v = (int64_t)(0 - (uint64_t)v);
    } else if (op == "Abs") {
      for (int64_t &v : y.i)
        v = v < 0 ? -v : v;
    } else if (op == "Relu") {
      for (int64_t &v : y.i)
        v = std::max<int64_t>(v, 0);
    } else if (op == "Sign") {
      for (int64_t &v : y.i)
        v = (v > 0) - (v < 0);
    } else if (op != "Floor" && op != "Ceil" && op != "Round") {
      return f.fail(std::string(op) + " of an integer operand is not supported");
    }
    return f.emit(std::move(y));
  }
  std::function<double(double)> fn =
      llvm::StringSwitch<std::function<double(double)>>(op)
          .Case("Neg", [](double v) { return -v; })
          .Case("Abs", [](double v) { return std::fabs(v); })
          .Case("Sqrt", [](double v) { return std::sqrt(v); })
          .Case("Reciprocal", [](double v) { return 1.0 / v; })
          .Case("Exp", [](double v) { return std::exp(v); })
          .Case("Log", [](double v) { return std::log(v); })
          .Case("Cos", [](double v) { return std::cos(v); })
          .Case("Sin", [](double v) { return std::sin(v); })
          .Case("Tanh", [](double v) { return std::tanh(v); })
          .Case("Sigmoid", [](double v) { return 1.0 / (1.0 + std::exp(-v)); })
          .Case("Erf", [](double v) { return std::erf(v); })
          .Case("Floor", [](double v) { return std::floor(v); })
          .Case("Ceil", [](double v) { return std::ceil(v); })
          .Case("Round", [](double v) { return std::nearbyint(v); })
          .Case("Relu", [](double v) { return v > 0 ? v : 0.0; })
          .Case("Sign", [](double v) { return double((v > 0) - (v < 0)); })
          .Default(nullptr);
  if (!fn)
    return f.fail("not foldable");
  ConstTensor y = x;
  for (double &v : y.f)
    v = roundTo(x.kind, fn(v));
  return f.emit(std::move(y));
}

bool foldWhere(Fold &f) {
  if (!f.has(0) || !f.has(1) || !f.has(2))
    return f.fail("needs three inputs");
  const ConstTensor &c = f.value(0), &x = f.value(1), &y = f.value(2);
  if (c.kind != ConstKind::Bool)
    return f.fail(std::string("the condition must be bool, got ") + kindName(c.kind));
  if (x.kind != y.kind)
    return f.fail(std::string("X and Y have different element types (") +
                  kindName(x.kind) + " and " + kindName(y.kind) + ")");
  std::vector<int64_t> shape;
  if (!broadcastAll(f, shape))
    return false;
  ConstTensor out = make(x.kind, shape);
  BroadcastWalk walk(shape, {c.shape, x.shape, y.shape});
  for (int64_t e = 0; e < out.elements(); ++e, walk.next()) {
    if (c.i[walk.offset(0)])
      copyElement(x, walk.offset(1), out, e);
    else
      copyElement(y, walk.offset(2), out, e);
  }
  return f.emit(std::move(out));
}

//===----------------------------------------------------------------------===//
// Type and shape ops
//===----------------------------------------------------------------------===//

bool foldShape(Fold &f) {
  const std::vector<int64_t> &shape = f.in[0].shape;
  if (f.node.op_type() == "Size") {
    ConstTensor y = make(ConstKind::I64, {});
    y.i[0] = product(shape);
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
  ConstTensor y = make(ConstKind::I64, {(int64_t)dims.size()});
  y.i = dims;
  return f.emit(std::move(y));
}

bool foldCast(Fold &f) {
  std::optional<ConstKind> to;
  if (f.node.op_type() == "CastLike") {
    if (!f.has(1) || !f.in[1].kind)
      return f.fail("the target type (input 1) is not f32, f64, i64 or bool");
    to = f.in[1].kind;
  } else {
    const onnx::AttributeProto *a = f.attr("to");
    if (!a)
      return f.fail("attribute 'to' is required");
    to = constKindOf((int32_t)a->i());
    if (!to)
      return f.fail("cast to " + dtypeName((int32_t)a->i()) +
                    " is not supported (FLOAT, DOUBLE, INT64, INT32 or BOOL)");
  }
  return f.emit(convert(f.value(0), *to));
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
  } else { // Flatten
    int64_t rank = x.shape.size(), axis = f.intAttr("axis", 1);
    if (axis < -rank || axis > rank)
      return f.fail("axis " + std::to_string(axis) + " is out of range for rank " +
                    std::to_string(rank));
    if (axis < 0)
      axis += rank;
    llvm::ArrayRef<int64_t> s(x.shape);
    shape = {product(s.take_front(axis)), product(s.drop_front(axis))};
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
  for (size_t k = 0; k < f.in.size(); ++k)
    if (f.has(k)) {
      first = &f.value(k);
      break;
    }
  if (!first)
    return f.fail("needs at least one input");
  int64_t rank = first->shape.size(), axis = a->i();
  if (rank == 0 || axis < -rank || axis >= rank)
    return f.fail("axis " + std::to_string(axis) + " is out of range for rank " +
                  std::to_string(rank));
  if (axis < 0)
    axis += rank;
  std::vector<int64_t> shape = first->shape;
  shape[axis] = 0;
  for (size_t k = 0; k < f.in.size(); ++k) {
    if (!f.has(k))
      continue;
    const ConstTensor &x = f.value(k);
    if (x.kind != first->kind)
      return f.fail("inputs have different element types");
    bool match = (int64_t)x.shape.size() == rank;
    for (int64_t d = 0; match && d < rank; ++d)
      match = d == axis || x.shape[d] == first->shape[d];
    if (!match)
      return f.fail("input " + std::to_string(k) + " " + shapeText(x.shape) +
                    " does not match " + shapeText(first->shape) + " off axis " +
                    std::to_string(axis));
    shape[axis] += x.shape[axis];
  }
  if (!f.checkSize(shape))
    return false;
  ConstTensor y = make(first->kind, shape);
  int64_t outer = product(llvm::ArrayRef<int64_t>(shape).take_front(axis));
  int64_t inner = product(llvm::ArrayRef<int64_t>(shape).drop_front(axis + 1));
  int64_t offset = 0;
  for (size_t k = 0; k < f.in.size(); ++k) {
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

} // namespace

ConstTensor sliceConst(const ConstTensor &x, const std::vector<SliceDim> &dims) {
  std::vector<int64_t> shape;
  for (const SliceDim &d : dims)
    shape.push_back(d.count);
  ConstTensor y = make(x.kind, shape);
  std::vector<int64_t> strides = stridesOf(x.shape);
  int64_t total = y.elements();
  std::vector<int64_t> counter(shape.size(), 0);
  for (int64_t e = 0; e < total; ++e) {
    int64_t src = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      src += (dims[d].start + counter[d] * dims[d].step) * strides[d];
    copyElement(x, src, y, e);
    for (int d = (int)shape.size() - 1; d >= 0; --d) {
      if (++counter[d] < shape[d])
        break;
      counter[d] = 0;
    }
  }
  return y;
}

namespace {

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
  int64_t rank = x.shape.size(), axis = f.intAttr("axis", 0);
  if (rank == 0 || axis < -rank || axis >= rank)
    return f.fail("axis " + std::to_string(axis) + " is out of range for rank " +
                  std::to_string(rank));
  if (axis < 0)
    axis += rank;
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
  int64_t start = 0;
  for (int64_t size : sizes) {
    std::vector<SliceDim> dims;
    for (int64_t d = 0; d < rank; ++d)
      dims.push_back(d == axis ? SliceDim{start, 1, size} : SliceDim{0, 1, x.shape[d]});
    f.out.push_back(sliceConst(x, dims));
    start += size;
  }
  return true;
}

bool foldTranspose(Fold &f) {
  const ConstTensor &x = f.value(0);
  int64_t rank = x.shape.size();
  std::vector<int64_t> perm;
  if (auto p = f.intsAttr("perm"))
    perm = *p;
  else
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  std::vector<bool> seen(rank, false);
  bool valid = (int64_t)perm.size() == rank;
  for (size_t k = 0; valid && k < perm.size(); ++k) {
    valid = perm[k] >= 0 && perm[k] < rank && !seen[perm[k]];
    if (valid)
      seen[perm[k]] = true;
  }
  if (!valid)
    return f.fail("perm " + shapeText(perm) + " is not a permutation of the " +
                  std::to_string(rank) + " dims");
  std::vector<int64_t> shape, inStrides = stridesOf(x.shape);
  for (int64_t p : perm)
    shape.push_back(x.shape[p]);
  ConstTensor y = make(x.kind, shape);
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
  std::vector<int64_t> target, shape;
  if (!f.integers(1, target))
    return false;
  if (!broadcastShape(x.shape, target, shape))
    return f.fail("cannot expand " + shapeText(x.shape) + " to " + shapeText(target));
  if (!f.checkSize(shape))
    return false;
  ConstTensor y = make(x.kind, shape);
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
    return f.fail("repeats " + shapeText(repeats) + " do not match rank " +
                  std::to_string(x.shape.size()));
  std::vector<int64_t> shape;
  for (size_t d = 0; d < repeats.size(); ++d)
    shape.push_back(x.shape[d] * repeats[d]);
  if (!f.checkSize(shape))
    return false;
  ConstTensor y = make(x.kind, shape);
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

bool foldConstantOfShape(Fold &f) {
  std::vector<int64_t> shape;
  if (!f.integers(0, shape) || !f.checkSize(shape))
    return false;
  ConstTensor fill = make(ConstKind::F32, {});
  if (const onnx::AttributeProto *a = f.attr("value")) {
    std::string problem;
    if (!readConstTensor(a->t(), fill, problem))
      return f.fail("value " + problem);
    if (fill.elements() != 1)
      return f.fail("value must hold one element");
  }
  ConstTensor y = make(fill.kind, shape);
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
  int64_t n = std::max<int64_t>((int64_t)std::ceil((l - s) / d), 0);
  if (kind == ConstKind::I64) {
    int64_t si = start.i[0], li = f.value(1).i[0], di = f.value(2).i[0];
    n = di > 0 ? (li - si + di - 1) / di : (si - li - di - 1) / -di;
    n = std::max<int64_t>(n, 0);
  }
  if (!f.checkSize({n}))
    return false;
  ConstTensor y = make(kind, {n});
  for (int64_t k = 0; k < n; ++k) {
    if (y.isFloat())
      y.f[k] = roundTo(kind, s + k * d);
    else
      y.i[k] = start.i[0] + k * f.value(2).i[0];
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
  int64_t rank = x.shape.size(), axis = axisValue[0];
  if (rank == 0 || axis < -rank || axis >= rank)
    return f.fail("axis " + std::to_string(axis) + " is out of range for rank " +
                  std::to_string(rank));
  if (axis < 0)
    axis += rank;
  if (x.kind == ConstKind::Bool)
    return f.fail("CumSum of bool is not supported");
  bool exclusive = f.intAttr("exclusive", 0) != 0, reverse = f.intAttr("reverse", 0) != 0;
  ConstTensor y = make(x.kind, x.shape);
  int64_t n = x.shape[axis];
  int64_t inner = product(llvm::ArrayRef<int64_t>(x.shape).drop_front(axis + 1));
  int64_t outer = product(llvm::ArrayRef<int64_t>(x.shape).take_front(axis));
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
    bool keep = upper ? c - r >= k : c - r <= k;
    if (!keep) {
      if (y.isFloat())
        y.f[e] = 0;
      else
        y.i[e] = 0;
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
  int64_t rank = data.shape.size(), axis = f.intAttr("axis", 0);
  if (rank == 0 || axis < -rank || axis >= rank)
    return f.fail("axis " + std::to_string(axis) + " is out of range for rank " +
                  std::to_string(rank));
  if (axis < 0)
    axis += rank;
  std::vector<int64_t> shape(data.shape.begin(), data.shape.begin() + axis);
  shape.insert(shape.end(), ishape.begin(), ishape.end());
  shape.insert(shape.end(), data.shape.begin() + axis + 1, data.shape.end());
  if (!f.checkSize(shape))
    return false;
  int64_t n = data.shape[axis];
  int64_t outer = product(llvm::ArrayRef<int64_t>(data.shape).take_front(axis));
  int64_t inner = product(llvm::ArrayRef<int64_t>(data.shape).drop_front(axis + 1));
  ConstTensor y = make(data.kind, shape);
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
  int64_t inner = product(llvm::ArrayRef<int64_t>(data.shape).drop_front(depth));
  int64_t tuples = product(llvm::ArrayRef<int64_t>(ishape).drop_back());
  ConstTensor y = make(data.kind, shape);
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
    return f.fail("cannot multiply " + shapeText(a.shape) + " by " + shapeText(b.shape));
  std::vector<int64_t> batch;
  llvm::ArrayRef<int64_t> ab(as), bb(bs);
  if (!broadcastShape(ab.drop_back(2), bb.drop_back(2), batch))
    return f.fail("batch dims of " + shapeText(a.shape) + " and " + shapeText(b.shape) +
                  " do not broadcast");
  std::vector<int64_t> full = batch;
  full.push_back(m);
  full.push_back(n);
  if (!f.checkSize(full))
    return false;
  ConstTensor y = make(a.kind, full);
  BroadcastWalk walk(batch, {ab.drop_back(2), bb.drop_back(2)});
  std::vector<int64_t> ia, ib;
  for (int64_t p = 0, count = product(batch); p < count; ++p, walk.next()) {
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
      if (a < -rank || a >= rank)
        return f.fail("axis " + std::to_string(a) + " is out of range for rank " +
                      std::to_string(rank));
      reduced[a < 0 ? a + rank : a] = true;
    }
  }
  bool keep = f.intAttr("keepdims", 1) != 0;
  std::vector<int64_t> kept, shape;
  for (int64_t d = 0; d < rank; ++d) {
    kept.push_back(reduced[d] ? 1 : x.shape[d]);
    if (!reduced[d] || keep)
      shape.push_back(kept.back());
  }
  int64_t outCount = product(kept),
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
  ConstTensor y = make(x.kind, shape);
  for (int64_t o = 0; o < outCount; ++o) {
    if (x.isFloat())
      y.f[o] = roundTo(x.kind, op == "ReduceMean" ? accF[o] / groupSize : accF[o]);
    else
      y.i[o] = op == "ReduceMean" ? accI[o] / groupSize : accI[o];
  }
  return f.emit(std::move(y));
}

using FoldFn = bool (*)(Fold &);

const llvm::StringMap<FoldFn> &foldTable() {
  static const llvm::StringMap<FoldFn> table = [] {
    llvm::StringMap<FoldFn> t;
    for (const char *op :
         {"Add", "Sub", "Mul", "Div", "Mod", "Pow", "Max", "Min", "Sum", "Mean", "Equal",
          "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor"})
      t[op] = foldBinary;
    for (const char *op : {"Neg", "Abs", "Sqrt", "Reciprocal", "Exp", "Log", "Cos", "Sin",
                           "Tanh", "Sigmoid", "Erf", "Floor", "Ceil", "Round", "Relu",
                           "Sign", "Not", "IsNaN", "IsInf"})
      t[op] = foldUnary;
    t["Where"] = foldWhere;
    t["Shape"] = foldShape;
    t["Size"] = foldShape;
    t["Cast"] = foldCast;
    t["CastLike"] = foldCast;
    for (const char *op : {"Identity", "Reshape", "Unsqueeze", "Squeeze", "Flatten"})
      t[op] = foldReshapeLike;
    t["Concat"] = foldConcat;
    t["Slice"] = foldSlice;
    t["Split"] = foldSplit;
    t["Transpose"] = foldTranspose;
    t["Expand"] = foldExpand;
    t["Tile"] = foldTile;
    t["ConstantOfShape"] = foldConstantOfShape;
    t["Range"] = foldRange;
    t["CumSum"] = foldCumSum;
    t["Trilu"] = foldTrilu;
    t["Gather"] = foldGather;
    t["GatherND"] = foldGatherND;
    t["MatMul"] = foldMatMul;
    for (const char *op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"})
      t[op] = foldReduce;
    return t;
  }();
  return table;
}

} // namespace

bool canFold(llvm::StringRef opType) { return foldTable().count(opType) != 0; }

bool foldReadsTypeOnly(llvm::StringRef opType, int i) {
  return ((opType == "Shape" || opType == "Size") && i == 0) ||
         (opType == "CastLike" && i == 1);
}

bool foldNode(const onnx::NodeProto &node, int64_t opset,
              llvm::ArrayRef<FoldInput> inputs, std::vector<ConstTensor> &outputs,
              std::string &error) {
  auto it = foldTable().find(node.op_type());
  if (it == foldTable().end()) {
    error = "not foldable";
    return false;
  }
  outputs.clear();
  Fold f{node, opset, inputs, outputs, error};
  if (!it->second(f))
    return false;
  if ((int)outputs.size() < node.output_size()) {
    error = "computes " + std::to_string(outputs.size()) + " outputs, the node has " +
            std::to_string(node.output_size());
    return false;
  }
  return true;
}

} // namespace megatrain::onnx_import
