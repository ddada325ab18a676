//===- OpSuggestions.h - what to use instead of an unsupported ONNX op -----===//
//
// Internal to the ONNX importer. An unsupported op is refused, never
// approximated; the error names what to export instead, so a user can
// change the export (GroupQueryAttention -> Attention) rather than guess.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_FRONTEND_OPSUGGESTIONS_H
#define MEGATRAIN_FRONTEND_OPSUGGESTIONS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace megatrain::onnx_import {

/// What to use instead of `op`: a known replacement, else the name in
/// `supported` closest to it (when it is close at all), else where the
/// supported ops are listed.
std::string nearestSupported(llvm::StringRef op,
                             llvm::ArrayRef<llvm::StringRef> supported);

} // namespace megatrain::onnx_import

#endif // MEGATRAIN_FRONTEND_OPSUGGESTIONS_H
