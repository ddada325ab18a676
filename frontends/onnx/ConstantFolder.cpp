//===- ConstantFolder.cpp - evaluates ONNX nodes on values known at import -===//
//
// The dispatch: one table from op type to FoldRule, filled by the fold
// families, and what every fold shares (reading integer arguments, the size
// limit). The folds compute in double (floats) or int64 (integers, bools)
// and round float32 results back to float after every op, so a folded f32
// table holds what an f32 evaluation would. Shapes are checked as the ONNX
// spec states them; a violation is an error, never a guess.
//
//===----------------------------------------------------------------------===//
#include "ConstantFolder.h"
#include "OnnxShapes.h"

namespace megatrain::onnx_import {

const onnx::AttributeProto *Fold::attr(llvm::StringRef name) const {
  for (const onnx::AttributeProto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t Fold::intAttr(llvm::StringRef name, int64_t fallback) const {
  const onnx::AttributeProto *a = attr(name);
  return a ? a->i() : fallback;
}

std::optional<std::vector<int64_t>> Fold::intsAttr(llvm::StringRef name) const {
  const onnx::AttributeProto *a = attr(name);
  if (!a)
    return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

bool Fold::integers(int k, std::vector<int64_t> &values) {
  if (!has(k))
    return fail("input " + std::to_string(k) + " is required");
  const ConstTensor &t = value(k);
  if (t.isFloat())
    return fail("input " + std::to_string(k) + " must be integer, got " +
                kindName(t.kind));
  values = t.i;
  return true;
}

bool Fold::optionalIntegers(int k, std::optional<std::vector<int64_t>> &values) {
  values.reset();
  if (!has(k))
    return true;
  std::vector<int64_t> v;
  if (!integers(k, v))
    return false;
  values = std::move(v);
  return true;
}

bool Fold::checkSize(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return fail("result shape " + shapeStr(shape) + " has a negative dim");
    if (__builtin_mul_overflow(n, d, &n))
      return fail("the result " + shapeStr(shape) +
                  " is too large to evaluate at import time");
  }
  if (n > kMaxFoldElements)
    return fail("the result " + shapeStr(shape) + " has " + std::to_string(n) +
                " elements; values evaluated at import time are limited to " +
                std::to_string(kMaxFoldElements));
  return true;
}

static const llvm::StringMap<FoldRule> &foldTable() {
  static const llvm::StringMap<FoldRule> table = [] {
    llvm::StringMap<FoldRule> t;
    registerElementwiseFolds(t);
    registerShapeFolds(t);
    registerGeneratorFolds(t);
    registerReductionFolds(t);
    return t;
  }();
  return table;
}

bool canFold(llvm::StringRef opType) { return foldTable().count(opType) != 0; }

bool foldReadsTypeOnly(llvm::StringRef opType, int i) {
  auto it = foldTable().find(opType);
  return it != foldTable().end() && it->second.typeOnlyInput == i;
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
  // The folds read inputs by reference in many places; checking each read
  // where it happens is what went wrong before (a node with "" for an input
  // crashed some twenty of them), so Fold::input/value check and throw, and
  // this is the one place that turns it into the node's error.
  try {
    if (!it->second.fold(f))
      return false;
  } catch (const MissingFoldInput &missing) {
    error = "input " + std::to_string(missing.index) +
            (missing.typeOnly ? " must be known at import time"
             : missing.index < node.input_size()
                 ? " is required but is empty"
                 : " is required but the node has " +
                       std::to_string(node.input_size()) + " input" +
                       (node.input_size() == 1 ? "" : "s"));
    return false;
  }
  if ((int)outputs.size() < node.output_size()) {
    error = "computes " + std::to_string(outputs.size()) + " outputs, the node has " +
            std::to_string(node.output_size());
    return false;
  }
  return true;
}

} // namespace megatrain::onnx_import
