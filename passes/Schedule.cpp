//===- Schedule.cpp - mt-schedule: the linear order of the training step --===//
//
// The block of a function is already in a valid (def-before-use) order; this
// pass reshapes that order to shorten lifetimes, then numbers it:
//
//   1. Source ops (mt.param, mt.input, mt.constant, mt.fill) have no operands,
//      so each can move to just before its first user. A parameter's
//      host-to-device copy then happens right before it is needed instead of
//      at the top of the step, and its device bytes are held only from there.
//      A source nobody uses goes to the end of the block.
//   2. Sink ops (mt.loss, mt.output, mt.param_grad, mt.adamw, mt.grad_part:
//      ops without results) move up to just after the last def of their operands, so a
//      final gradient leaves the device (and can be freed) as soon as it is
//      complete, and a kept output is read back before it can die.
//   3. Every op, terminator included, gets `mt.step` = its position.
//
// Compute ops keep their relative order: the importer's order for forward and
// autodiff's reverse order for backward are already reasonable, and any
// reordering of them is left to later, cost-model-driven passes.
//
//===----------------------------------------------------------------------===//
#include "megatrain/Passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace megatrain {
#define GEN_PASS_DEF_SCHEDULE
#include "megatrain/Passes/Passes.h.inc"

namespace {

bool isSourceOp(mlir::Operation *op) {
  return mlir::isa<mt::ParamOp, mt::InputOp, mt::ConstantOp, mt::FillOp>(op);
}

bool isSinkOp(mlir::Operation *op) {
  return mlir::isa<mt::LossOp, mt::OutputOp, mt::ParamGradOp, mt::AdamWOp,
                   mt::GradPartOp>(op);
}

struct Schedule : impl::ScheduleBase<Schedule> {
  void runOnOperation() override {
    mlir::func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    if (!func.getBody().hasOneBlock()) {
      func.emitError("mt-schedule expects a function with a single block");
      return signalPassFailure();
    }
    mlir::Block &block = func.getBody().front();
    for (mlir::Operation &op : block)
      if (op.getNumRegions() != 0) {
        op.emitError("mt-schedule cannot order an op with regions");
        return signalPassFailure();
      }

    // Stage 1. Collect first, then move: moving while iterating would revisit.
    llvm::SmallVector<mlir::Operation *> sources;
    for (mlir::Operation &op : block)
      if (isSourceOp(&op))
        sources.push_back(&op);
    mlir::Operation *terminator = block.getTerminator();
    for (mlir::Operation *source : sources) {
      mlir::Operation *firstUser = nullptr;
      for (mlir::Operation *user : source->getUsers()) {
        // Every user sits in this block (no regions), so isBeforeInBlock is
        // a total order over them.
        if (!firstUser || user->isBeforeInBlock(firstUser))
          firstUser = user;
      }
      source->moveBefore(firstUser ? firstUser : terminator);
    }

    // Stage 2. Walking the sinks backwards keeps two sinks that land after
    // the same def in their original order.
    llvm::SmallVector<mlir::Operation *> sinks;
    for (mlir::Operation &op : block)
      if (isSinkOp(&op))
        sinks.push_back(&op);
    for (mlir::Operation *sink : llvm::reverse(sinks)) {
      mlir::Operation *lastDef = nullptr;
      for (mlir::Value operand : sink->getOperands()) {
        mlir::Operation *def = operand.getDefiningOp();
        if (def && def->getBlock() == &block &&
            (!lastDef || lastDef->isBeforeInBlock(def)))
          lastDef = def;
      }
      if (lastDef)
        sink->moveAfter(lastDef);
      else
        sink->moveBefore(&block.front());
    }

    // Stage 3.
    mlir::Builder builder(&getContext());
    int64_t step = 0;
    for (mlir::Operation &op : block)
      op.setAttr(mt::attr::kStep, builder.getI64IntegerAttr(step++));
  }
};

} // namespace
} // namespace megatrain
