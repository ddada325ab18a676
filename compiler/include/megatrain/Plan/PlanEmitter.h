//===- PlanEmitter.h - a planned mt module to a megatrain plan -------------===//
#ifndef MEGATRAIN_PLAN_PLANEMITTER_H
#define MEGATRAIN_PLAN_PLANEMITTER_H

#include "megatrain/Plan/HostOrder.h"
#include "megatrain/plan/plan.pb.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <string>
#include <vector>

namespace megatrain {

struct PlanEmitOptions {
  /// header.generator, e.g. "megatrain-compile 0.1.0".
  std::string generator = "megatrain";
  /// header.compile_options: the options the plan was compiled with, as given.
  std::vector<std::string> compileOptions;
  /// The device-resident parameters' ADAMW steps on a stream of their own,
  /// `optimizer`, beside the backward's kernels on `compute` (megatrain-compile
  /// --optimizer-stream); false: on `compute`, in the kernels' order.
  bool optimizerStream = false;
  /// The fetches of host-resident parameters (their compute copies, or their
  /// masters) on a stream of their own, `fetch`, beside the prefetches of
  /// offloaded values on `h2d` (docs/tiering.md, "Streams and events"); false:
  /// on `h2d`, in plan order with them. megatrain-compile sets it by default
  /// only without micro-batches (--fetch-stream, --no-fetch-stream).
  bool fetchStream = true;
  /// With micro-batches, a gradient part that a matrix product makes and the
  /// device accumulates is written by that product straight into the
  /// accumulator: part 0 as the product's output, parts k >= 1 as a
  /// `matmul_add` with the accumulator as its addend and output, in place of
  /// the copy or `ACCUMULATE` after it (docs/tiering.md "Micro-batches");
  /// false (megatrain-compile --no-product-accumulation): every part is its
  /// own arena tensor, copied or added after it.
  bool accumulateInProducts = true;
  /// Where set, the host updates after the loss are ordered on this device
  /// profile (HostOrder.h, orderHostUpdates) before the events are inserted,
  /// and what that did is written to `hostOrder` (when set too).
  const DeviceProfile *hostOrderProfile = nullptr;
  HostOrderResult *hostOrder = nullptr;
};

/// Translates a module whose function has been through mt-schedule,
/// mt-liveness and mt-plan-memory (every op carries mt.step, mt.live_end and
/// mt.offset; the function carries mt.arena_size) into a plan, as described
/// in docs/plan.md and docs/compiler.md. The module's optional string
/// attributes `mt.source_model` and `mt.source_sha256` fill the header's
/// provenance. Errors are emitted on the offending op and give failure.
mlir::FailureOr<plan::Plan> emitPlan(mlir::ModuleOp module,
                                     const PlanEmitOptions &options);

/// A location as one short string ("model.onnx:12:0", "node_name"): what a
/// step's source_op holds, and how the tools print diagnostics.
std::string formatLocation(mlir::Location loc);

} // namespace megatrain

#endif // MEGATRAIN_PLAN_PLANEMITTER_H
