//===- TiedCopies.h - transposed copies of tied weights -------------------===//
//
// Internal to the ONNX importer. torch.onnx.export's optimizer folds the
// transpose of every linear layer's weight into an initializer of its own
// (val_312 = W^T). For a head tied to the token embedding, the Gather still
// reads W while the logits MatMul reads the folded copy: two initializers
// holding one parameter, which would train apart. This finds such copies by
// their values, so the importer can read them as a transpose of the table
// and the tie trains as one parameter, as in PyTorch.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_FRONTEND_TIEDCOPIES_H
#define MEGATRAIN_FRONTEND_TIEDCOPIES_H

#include "onnx/onnx.pb.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <functional>
#include <string>

namespace megatrain::onnx_import {

/// For each 2-D floating initializer among `candidates` that holds exactly the
/// transpose of a table in `tables` (same dtype, [n, m] against [m, n],
/// m != n): copy name -> table name. Values are compared as stored (raw data
/// inline or external, relative to the directory of `modelPath`), stopping at
/// the first difference; tensors whose data cannot be read are skipped.
llvm::StringMap<std::string>
findTransposedCopies(const onnx::GraphProto &graph, const std::string &modelPath,
                     const llvm::StringSet<> &tables,
                     const std::function<bool(const onnx::TensorProto &)> &candidate);

} // namespace megatrain::onnx_import

#endif // MEGATRAIN_FRONTEND_TIEDCOPIES_H
