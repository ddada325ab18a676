//===- MtDialect.h - the mt dialect and its ops --------------------------===//
#ifndef MEGATRAIN_DIALECT_MTDIALECT_H
#define MEGATRAIN_DIALECT_MTDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "megatrain/Dialect/MtDialect.h.inc"
#include "megatrain/Dialect/GradientInterface.h.inc"

#define GET_OP_CLASSES
#include "megatrain/Dialect/MtOps.h.inc"

namespace megatrain::mt {

/// The numpy broadcast of two shapes, or failure when they do not broadcast.
mlir::FailureOr<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

/// The result shape of mt.matmul, or failure (with no diagnostic).
mlir::FailureOr<llvm::SmallVector<int64_t>>
matmulShape(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b,
            bool transposeA, bool transposeB);

/// The result shape of a reduction over sorted, non-negative `axes`.
llvm::SmallVector<int64_t> reducedShape(llvm::ArrayRef<int64_t> shape,
                                        llvm::ArrayRef<int64_t> axes,
                                        bool keepdims);

/// The result shape of mt.slice over `shape` with normalized ranges (one per
/// dim, 0 <= start, end <= dim, step >= 1), or failure (with no diagnostic).
mlir::FailureOr<llvm::SmallVector<int64_t>>
sliceShape(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> starts,
           llvm::ArrayRef<int64_t> ends, llvm::ArrayRef<int64_t> steps);

/// A ranked tensor type with `shape` and the element type of `like`.
mlir::RankedTensorType tensorLike(mlir::Type like, llvm::ArrayRef<int64_t> shape);

/// Names of the discardable attributes that passes attach for later passes.
namespace attr {
/// i64 on every op: its position in the linear schedule (mt-schedule).
inline constexpr llvm::StringLiteral kStep = "mt.step";
/// array<i64> on every op with results: per result, the last step that reads
/// it, or -1 when nothing does (mt-liveness).
inline constexpr llvm::StringLiteral kLiveEnd = "mt.live_end";
/// array<i64> on every op with results: per result, its byte offset in the
/// device arena (mt-plan-memory).
inline constexpr llvm::StringLiteral kOffset = "mt.offset";
/// i64 on the function: the device arena size in bytes (mt-plan-memory).
inline constexpr llvm::StringLiteral kArenaSize = "mt.arena_size";
/// i64 on the function: the host staging arena size in bytes, where
/// mt.offload results live (mt-plan-memory).
inline constexpr llvm::StringLiteral kHostStageSize = "mt.host_stage_size";
/// unit on an op cloned by mt-tier to rebuild a value instead of keeping it.
inline constexpr llvm::StringLiteral kRecompute = "mt.recompute";
/// On the function, set by mt-tier: i64 budget in bytes (0: none), string
/// policy, f64 predicted step seconds of the IR model.
inline constexpr llvm::StringLiteral kDeviceBudget = "mt.device_budget";
inline constexpr llvm::StringLiteral kTieringPolicy = "mt.tiering_policy";
/// string on the function, set by mt-precision: "fp32", "tf32" or "bf16".
inline constexpr llvm::StringLiteral kPrecision = "mt.precision";
/// type on an mt.param of a compute type (bf16), set by mt-precision: the
/// element type of the parameter's host master (f32).
inline constexpr llvm::StringLiteral kMasterElement = "mt.master_element";
/// i64 on the ops of micro-batch k's backward, set by mt-microbatch (with
/// more than one micro-batch): k. mt-tier splits forward from backward per
/// micro-batch at the first such op of each k.
inline constexpr llvm::StringLiteral kMicrobatchBackward = "mt.microbatch_backward";
/// unit on the mt.fill that seeds the backward (d loss / d loss), set by
/// mt-autodiff; mt-microbatch scales it by 1/N when N is a power of two.
inline constexpr llvm::StringLiteral kLossSeed = "mt.loss_seed";
/// unit on the function, set by mt-add-loss with forward-only: the step is an
/// evaluation (forward and loss; no gradients or updates are to be added).
inline constexpr llvm::StringLiteral kEvaluation = "mt.evaluation";
/// string on every mt.param, set by mt-homes: the home of the parameter's
/// training state, "device", "host" or "disk" (absent: host).
inline constexpr llvm::StringLiteral kHome = "mt.home";
/// i64 on the function, set by mt-homes: the capacities the homes were
/// chosen for, bytes (docs/tiering.md "State homes"; -1: unlimited).
inline constexpr llvm::StringLiteral kDeviceCapacity = "mt.device_capacity";
inline constexpr llvm::StringLiteral kHostCapacity = "mt.host_capacity";
inline constexpr llvm::StringLiteral kDiskCapacity = "mt.disk_capacity";
/// unit on an mt.reshape or mt.transpose whose result is a view of its
/// operand's bytes (mt-view-aliases): placed at its base's offset
/// (mt-plan-memory) and emitted as a view tensor with no step.
inline constexpr llvm::StringLiteral kAlias = "mt.alias";
/// i64 on the function, set by mt-homes: bytes of the host ring (pool
/// `grad_stage`) that each gradient of a host or disk home passes through on
/// its way to the host update that consumes it in the same step (and each
/// micro-batch part on its way to the accumulator). 0, or absent: every such
/// parameter keeps a persistent `grad:<name>` (megatrain-compile
/// --keep-gradients, for gradient clipping).
inline constexpr llvm::StringLiteral kGradStageSize = "mt.grad_stage_size";
/// string on the mt.param ops of a host- or disk-home parameter, set by
/// mt-homes with micro-batches: "device" when its gradient accumulator lives
/// on the device, "visit" when it lives on the host and visits the device
/// for each part (mt-tier marks the candidates, mt-homes keeps the mark where
/// the device has no room for the accumulator); absent: with the rest of its
/// state.
inline constexpr llvm::StringLiteral kAccumulate = "mt.accumulate";
/// i64 on the function, set by mt-tier with `accumulator-visits`: bytes of
/// the device ring (pool `acc_visit`) the visiting accumulators pass through.
inline constexpr llvm::StringLiteral kVisitRingSize = "mt.visit_ring_size";
/// string "visit" on the mt.param ops of a host-home parameter whose update
/// visits the device (mt-homes, from `state-home visit[:REGEX]`): its master,
/// moments and compute copy are copied into the ring `update_visit`, updated
/// there by the device AdamW and copied back (docs/tiering.md, "Update visits").
inline constexpr llvm::StringLiteral kUpdate = "mt.update";
/// string "device" on a visiting update's mt.param (`state-home visit-master`):
/// its moments live in device_state, and only the master visits.
inline constexpr llvm::StringLiteral kMoments = "mt.moments";
/// i64 on the function, set by mt-homes: bytes of the device ring (pool
/// `update_visit`) the visiting updates pass through.
inline constexpr llvm::StringLiteral kUpdateRingSize = "mt.update_ring_size";
} // namespace attr

/// The value whose bytes `value` is: through ops marked mt.alias, the first
/// value of the chain; `value` itself when it is no view.
inline mlir::Value viewBase(mlir::Value value) {
  while (mlir::Operation *def = value.getDefiningOp()) {
    if (!def->hasAttr(attr::kAlias) || def->getNumOperands() != 1)
      break;
    value = def->getOperand(0);
  }
  return value;
}

} // namespace megatrain::mt

#endif // MEGATRAIN_DIALECT_MTDIALECT_H
