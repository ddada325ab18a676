//===- ElementwiseFolds.cpp - folds of elementwise math, comparisons, casts -===//
//
// Arithmetic (Add ... Pow, variadic Max/Min/Sum/Mean), comparisons, logic,
// the unary functions, Where and Cast/CastLike, on values known at import
// time. One binary table serves arithmetic, comparisons and logic: they
// differ only in the element types they accept and return.
//
//===----------------------------------------------------------------------===//
#include "ConstantFolder.h"
#include "OnnxShapes.h"
#include "TensorData.h"

#include "megatrain/Dialect/MtDialect.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>
#include <functional>

using namespace mlir;

namespace megatrain::onnx_import {

namespace {

/// The common broadcast shape of every present input.
bool broadcastAll(Fold &f, std::vector<int64_t> &shape) {
  shape.clear();
  for (int k = 0; k < f.count(); ++k) {
    if (!f.has(k))
      continue;
    auto next = mt::broadcastShapes(shape, f.value(k).shape);
    if (failed(next))
      return f.fail("operand shapes " + shapeStr(shape) + " and " +
                    shapeStr(f.value(k).shape) + " do not broadcast");
    shape.assign(next->begin(), next->end());
  }
  return f.checkSize(shape);
}

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
                  // Two's complement wrapping, as numpy's int64 power, by
                  // squaring (an exponent near 2^63 must not loop that
                  // often). A negative exponent truncates 1/a^|b| toward 0.
                  if (b < 0)
                    return a == 1 ? int64_t{1} : a == -1 ? (b % 2 ? int64_t{-1} : int64_t{1}) : int64_t{0};
                  uint64_t r = 1, base = static_cast<uint64_t>(a);
                  for (uint64_t e = static_cast<uint64_t>(b); e; e >>= 1) {
                    if (e & 1)
                      r *= base;
                    base *= base;
                  }
                  return static_cast<int64_t>(r);
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
  for (int k = 0; k < f.count(); ++k)
    count += f.has(k);
  if (count == 0 || (!variadic && (count != 2 || !f.has(0) || !f.has(1))))
    return f.fail(variadic ? "needs at least one input" : "needs two inputs");
  std::vector<int64_t> shape;
  if (!broadcastAll(f, shape))
    return false;
  ConstKind kind = f.value(0).kind;
  for (int k = 1; k < f.count(); ++k)
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
  for (int k = 0; k < f.count(); ++k) {
    if (!f.has(k))
      continue;
    const ConstTensor &x = f.value(k);
    int64_t total = numElements(shape);
    BroadcastWalk walk(shape, {x.shape});
    if (first) {
      acc = ConstTensor::zeros(x.kind, shape);
      for (int64_t e = 0; e < total; ++e, walk.next())
        copyElement(x, walk.offset(0), acc, e);
      first = false;
      continue;
    }
    ConstTensor next = ConstTensor::zeros(outKind, shape);
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
    ConstTensor y = ConstTensor::zeros(ConstKind::Bool, x.shape);
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
  ConstTensor out = ConstTensor::zeros(x.kind, shape);
  BroadcastWalk walk(shape, {c.shape, x.shape, y.shape});
  for (int64_t e = 0; e < out.elements(); ++e, walk.next()) {
    if (c.i[walk.offset(0)])
      copyElement(x, walk.offset(1), out, e);
    else
      copyElement(y, walk.offset(2), out, e);
  }
  return f.emit(std::move(out));
}

ConstTensor convert(const ConstTensor &x, ConstKind to) {
  ConstTensor y = ConstTensor::zeros(to, x.shape);
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

bool foldCast(Fold &f) {
  std::optional<ConstKind> to;
  if (f.node.op_type() == "CastLike") {
    if (!f.has(1) || !f.input(1).kind)
      return f.fail("the target type (input 1) is not f32, f64, i64 or bool");
    to = f.input(1).kind;
  } else {
    const onnx::AttributeProto *a = f.attr("to");
    if (!a)
      return f.fail("attribute 'to' is required");
    to = constKindOf((int32_t)a->i());
    if (!to)
      return f.fail("cast to " + dtypeName((int32_t)a->i()) +
                    " is not supported (FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT64, INT32 or BOOL)");
  }
  return f.emit(convert(f.value(0), *to));
}

} // namespace

void registerElementwiseFolds(llvm::StringMap<FoldRule> &table) {
  for (const char *op :
       {"Add", "Sub", "Mul", "Div", "Mod", "Pow", "Max", "Min", "Sum", "Mean", "Equal",
        "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor"})
    table[op] = {foldBinary};
  for (const char *op :
       {"Neg", "Abs", "Sqrt", "Reciprocal", "Exp", "Log", "Cos", "Sin", "Tanh", "Sigmoid",
        "Erf", "Floor", "Ceil", "Round", "Relu", "Sign", "Not", "IsNaN", "IsInf"})
    table[op] = {foldUnary};
  table["Where"] = {foldWhere};
  table["Cast"] = {foldCast};
  table["CastLike"] = {foldCast, /*typeOnlyInput=*/1};
}

} // namespace megatrain::onnx_import
