//===- CastReaders.h - values read only as their bf16 casts ---------------===//
//
// Shared by the passes that let a producer write the bf16 copy its readers
// cast it to (mt-bf16-attention's rotary, mt-fold-product-casts,
// mt-fold-norm-casts), and by mt-bf16-activations' walk: a value
// whose every reader is an mt.cast to bf16, directly or through reshapes,
// can be written in bf16 in the first place, the casts replaced by what
// they cast and the reshapes moving bf16.
//
//===----------------------------------------------------------------------===//
#ifndef MEGATRAIN_PASSES_CASTREADERS_H
#define MEGATRAIN_PASSES_CASTREADERS_H

#include "megatrain/Dialect/MtDialect.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

namespace megatrain {

/// Whether `op` is an mt.cast of one shape from f32 to bf16 (toBf16) or from
/// bf16 to f32.
bool isBf16Cast(mlir::Operation *op, bool toBf16);

/// The casts to bf16 and the reshapes that read `value`, when every reader
/// of it is such a cast or a reshape whose readers are (recursively); none
/// when some reader is anything else or nothing reads it.
struct CastReaders {
  llvm::SmallVector<mlir::Operation *> casts;
  llvm::SmallVector<mlir::Operation *> reshapes;
  bool any() const { return !casts.empty(); }
};
CastReaders castReadersOf(mlir::Value value);

/// Gives f32 `value` and its reshapes (`readers`, from castReadersOf) bf16
/// element types and replaces each cast by what it casts. The producer of
/// `value` must be able to write bf16 (its verifier decides).
void narrowToBf16(mlir::Value value, const CastReaders &readers);

/// The general walk under castReadersOf (mt-bf16-activations takes the
/// programs instead of the casts): appends to `readers` the ops `isReader`
/// takes and to `reshapes` the reshapes between them and `value`; true when
/// every reader of `value` is such an op or a reshape whose readers are
/// (recursively), false when some reader is anything else or nothing reads it.
bool readersThroughReshapes(mlir::Value value,
                            llvm::function_ref<bool(mlir::Operation *)> isReader,
                            llvm::SmallVectorImpl<mlir::Operation *> &readers,
                            llvm::SmallVectorImpl<mlir::Operation *> &reshapes);

/// Gives `value` and the results of `reshapes` (its reshapes) bf16 element
/// types, their shapes kept.
void setBf16(mlir::Value value, llvm::ArrayRef<mlir::Operation *> reshapes);

} // namespace megatrain

#endif // MEGATRAIN_PASSES_CASTREADERS_H
