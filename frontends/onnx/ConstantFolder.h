//===- ConstantFolder.h - evaluates ONNX nodes on values known at import ---===//
//
// Internal to the ONNX importer. Exported LLM graphs compute their causal
// masks, position ids and rotary tables from shapes, constants and buffers
// (rotary_emb.inv_freq); none of that depends on the data fed at run time.
// The importer evaluates such nodes here, on int64/float/double/bool data,
// so the training graph holds only compute on activations and parameters.
//
// The folds live one file per op family (ElementwiseFolds.cpp, ShapeFolds.cpp,
// GeneratorFolds.cpp, ReductionFolds.cpp), each registering its ops in the
// table ConstantFolder.cpp dispatches on; the values they compute are
// ConstTensors (ConstTensor.h) and their shapes follow OnnxShapes.h, as the
// op importers' do.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_FRONTEND_CONSTANTFOLDER_H
#define MEGATRAIN_FRONTEND_CONSTANTFOLDER_H

#include "ConstTensor.h"

#include "onnx/onnx.pb.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

namespace megatrain::onnx_import {

//===----------------------------------------------------------------------===//
// Evaluating a node
//===----------------------------------------------------------------------===//

/// What the folder knows of one node input.
struct FoldInput {
  bool present = false;
  /// Null when only the input's type is known (a run-time value).
  const ConstTensor *value = nullptr;
  std::vector<int64_t> shape;
  std::optional<ConstKind> kind;
};

/// Whether the folder evaluates `opType` (default domain).
bool canFold(llvm::StringRef opType);
/// Whether input `i` of `opType` is read only for its type (Shape's input,
/// CastLike's target): such an input need not be known for the node to fold.
bool foldReadsTypeOnly(llvm::StringRef opType, int i);

/// Evaluates `node` (whose inputs the folder has, per foldReadsTypeOnly) into
/// one ConstTensor per output; false with `error` saying why not.
bool foldNode(const onnx::NodeProto &node, int64_t opset,
              llvm::ArrayRef<FoldInput> inputs, std::vector<ConstTensor> &outputs,
              std::string &error);

//===----------------------------------------------------------------------===//
// The fold families
//===----------------------------------------------------------------------===//

/// Thrown by Fold::input and Fold::value when a fold reads input `index` and
/// the node has none there (too few inputs, or "" for an omitted optional
/// one), or only its type is known. foldNode catches it and reports it as
/// the node's error; it never leaves foldNode.
struct MissingFoldInput {
  int index;
  bool typeOnly; // present, but only its type is known
};

/// What one fold sees of its node: the inputs, the attributes, where its
/// outputs and its error go.
struct Fold {
  const onnx::NodeProto &node;
  int64_t opset;
  /// Read through input(), value() and has() only: they are checked.
  llvm::ArrayRef<FoldInput> inputs;
  std::vector<ConstTensor> &out;
  std::string &error;

  /// The node's input count, absent ones included.
  int count() const { return (int)inputs.size(); }
  bool has(int k) const { return k >= 0 && k < count() && inputs[k].present; }
  /// Input k; MissingFoldInput when absent. Every read of an input goes
  /// through here or value(), so a fold that assumes an input the file
  /// omits fails with the node's name instead of reading past the list.
  const FoldInput &input(int k) const {
    if (!has(k))
      throw MissingFoldInput{k, false};
    return inputs[k];
  }
  /// Input k's value; MissingFoldInput when absent or only typed.
  const ConstTensor &value(int k) const {
    const FoldInput &in = input(k);
    if (!in.value)
      throw MissingFoldInput{k, true};
    return *in.value;
  }

  const onnx::AttributeProto *attr(llvm::StringRef name) const;
  int64_t intAttr(llvm::StringRef name, int64_t fallback) const;
  std::optional<std::vector<int64_t>> intsAttr(llvm::StringRef name) const;

  bool fail(const std::string &message) {
    error = message;
    return false;
  }
  /// Input k's values as integers (shape, axes, indices arguments).
  bool integers(int k, std::vector<int64_t> &values);
  /// Optional integer list from input k, or nullopt when absent.
  bool optionalIntegers(int k, std::optional<std::vector<int64_t>> &values);
  /// Refuses a result shape over kMaxFoldElements (or one that overflows).
  bool checkSize(const std::vector<int64_t> &shape);
  bool emit(ConstTensor t) {
    out.push_back(std::move(t));
    return true;
  }
};

using FoldFn = bool (*)(Fold &);

/// How the folder evaluates one op.
struct FoldRule {
  FoldFn fold = nullptr;
  /// The input read only for its type (Shape's input, CastLike's target),
  /// which need not be known for the node to fold; -1 when none.
  int typeOnlyInput = -1;
};

/// Registers the folds of each family (one function per source file).
void registerElementwiseFolds(llvm::StringMap<FoldRule> &table);
void registerShapeFolds(llvm::StringMap<FoldRule> &table);
void registerGeneratorFolds(llvm::StringMap<FoldRule> &table);
void registerReductionFolds(llvm::StringMap<FoldRule> &table);

} // namespace megatrain::onnx_import

#endif // MEGATRAIN_FRONTEND_CONSTANTFOLDER_H
