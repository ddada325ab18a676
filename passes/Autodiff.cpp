//===- Autodiff.cpp - mt-autodiff: reverse-mode gradients of the loss -----===//
//
// 1. Activity: a value is *varied* when it depends on a trainable parameter
//    (floating-point values only) and *useful* when the loss depends on it.
//    Only ops with a useful result and a varied operand are differentiated,
//    so frozen branches and integer index math cost nothing and need no rule.
// 2. Reverse sweep: seed 1 at the mt.loss value, visit the ops backwards and
//    call each active op's GradientOpInterface rule; gradients reaching one
//    value along several uses are summed with mt.add.
// 3. Parameters: once the sweep has passed the earliest user of a parameter
//    (over all mt.param ops of that name), its gradient is final: emit one
//    mt.param_grad there (summed over same-named mt.param ops, zero via
//    mt.fill when the loss does not depend on it). Emitting it mid-backward
//    rather than at the end keeps the order in which gradients become final
//    visible to the schedule, which can then ship each one out early.
//
// Gradient ops are appended before the terminator, after all forward ops; the
// unused ones that rules built for inactive operands are erased at the end.
//
//===----------------------------------------------------------------------===//
#include "megatrain/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"

namespace megatrain {
#define GEN_PASS_DEF_AUTODIFF
#include "megatrain/Passes/Passes.h.inc"
} // namespace megatrain

using namespace mlir;
using namespace megatrain;

namespace {

bool isFloatTensor(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && isa<FloatType>(type.getElementType());
}

bool isTrainableParam(Operation *op) {
  auto param = dyn_cast<mt::ParamOp>(op);
  return param && param.getTrainable();
}

/// Differentiates one function body (a single block).
class ReverseSweep {
public:
  ReverseSweep(Block &block, mt::LossOp loss)
      : block(block), loss(loss), builder(block.getTerminator()) {}

  LogicalResult run() {
    if (failed(collectParams()))
      return failure();
    analyzeActivity();

    // Everything built from here on sits between the last forward op and the
    // terminator; remember the boundary to clean up what turns out unused.
    Operation *lastForward = block.getTerminator()->getPrevNode();
    SmallVector<Operation *> forward;
    for (Operation &op : block.without_terminator())
      forward.push_back(&op);

    Value seed = loss.getValue();
    auto seedFill = builder.create<mt::FillOp>(loss.getLoc(), seed.getType(),
                                               builder.getF64FloatAttr(1.0));
    seedFill->setAttr(mt::attr::kLossSeed, builder.getUnitAttr());
    grads[seed] = seedFill;

    for (Operation *op : llvm::reverse(forward)) {
      if (failed(differentiate(op)))
        return failure();
      for (StringAttr name : finalAfter.lookup(op))
        emitParamGrad(name);
    }
    eraseUnusedGradientOps(lastForward);
    return success();
  }

private:
  /// Groups the trainable parameters by name and checks they agree on type.
  LogicalResult collectParams() {
    for (auto param : block.getOps<mt::ParamOp>()) {
      if (!param.getTrainable())
        continue;
      if (!isFloatTensor(param.getResult()))
        return param.emitOpError("trainable parameter '")
               << param.getName() << "' must have a floating-point type, got "
               << param.getType();
      SmallVector<mt::ParamOp> &same = paramsByName[param.getNameAttr()];
      if (!same.empty() && same.front().getType() != param.getType())
        return param.emitOpError("parameter '")
               << param.getName() << "' appears with types "
               << same.front().getType() << " and " << param.getType();
      same.push_back(param);
    }
    // The op after which the sweep has seen every use of a parameter: its
    // earliest user in the block, or its first mt.param op when unused. The
    // terminator is never swept, so a use there does not count.
    for (auto &[name, params] : paramsByName) {
      Operation *earliest = params.front();
      bool used = false;
      for (mt::ParamOp param : params)
        for (Operation *user : param->getUsers()) {
          Operation *swept = block.findAncestorOpInBlock(*user);
          if (!swept || swept == block.getTerminator())
            continue;
          if (!used || swept->isBeforeInBlock(earliest)) {
            earliest = swept;
            used = true;
          }
        }
      finalAfter[earliest].push_back(name);
    }
    return success();
  }

  void analyzeActivity() {
    for (Operation &op : block.without_terminator()) {
      bool fromParam = isTrainableParam(&op) ||
                       llvm::any_of(op.getOperands(), [&](Value v) {
                         return varied.contains(v);
                       });
      if (fromParam)
        for (Value r : op.getResults())
          if (isFloatTensor(r))
            varied.insert(r);
    }
    useful.insert(loss.getValue());
    for (Operation &op : llvm::reverse(block.without_terminator()))
      if (llvm::any_of(op.getResults(), [&](Value r) { return useful.contains(r); }))
        for (Value v : op.getOperands())
          useful.insert(v);
  }

  bool isActive(Operation *op) const {
    return llvm::any_of(op->getResults(),
                        [&](Value r) { return useful.contains(r); }) &&
           llvm::any_of(op->getOperands(),
                        [&](Value v) { return varied.contains(v); });
  }

  LogicalResult differentiate(Operation *op) {
    if (!isActive(op))
      return success();
    SmallVector<Value> resultGrads;
    for (Value r : op->getResults())
      resultGrads.push_back(grads.lookup(r));
    if (llvm::all_of(resultGrads, [](Value g) { return !g; }))
      return success();

    auto rule = dyn_cast<mt::GradientOpInterface>(op);
    if (isa<mt::PointwiseOp>(op))
      return op->emitOpError("has no gradient rule: mt-fuse-pointwise writes it after "
                             "mt-autodiff, from ops that have theirs");
    if (!rule)
      return op->emitOpError("has no gradient rule, but the loss depends on a "
                             "trainable parameter through it");
    SmallVector<Value> operandGrads;
    if (failed(rule.buildGradients(builder, resultGrads, operandGrads)))
      return op->emitOpError("gradient rule failed");
    if (operandGrads.size() != op->getNumOperands())
      return op->emitOpError("gradient rule returned ")
             << operandGrads.size() << " gradients for " << op->getNumOperands()
             << " operands";

    for (auto [i, operand, grad] : llvm::enumerate(op->getOperands(), operandGrads)) {
      if (!grad || !varied.contains(operand))
        continue;
      if (grad.getType() != operand.getType())
        return op->emitOpError("gradient rule built a gradient of type ")
               << grad.getType() << " for operand #" << i << " of type "
               << operand.getType();
      accumulate(operand, grad);
    }
    return success();
  }

  void accumulate(Value v, Value grad) {
    Value &slot = grads[v];
    slot = slot ? builder.create<mt::AddOp>(grad.getLoc(), v.getType(), slot, grad)
                      .getResult()
                : grad;
  }

  void emitParamGrad(StringAttr name) {
    ArrayRef<mt::ParamOp> params = paramsByName[name];
    mt::ParamOp first = params.front();
    Value total;
    for (mt::ParamOp param : params) {
      Value g = grads.lookup(param.getResult());
      if (!g)
        continue;
      total = total ? builder.create<mt::AddOp>(param.getLoc(), param.getType(),
                                                total, g)
                          .getResult()
                    : g;
    }
    if (!total)
      total = builder.create<mt::FillOp>(first.getLoc(), first.getType(),
                                         builder.getF64FloatAttr(0.0));
    builder.create<mt::ParamGradOp>(first.getLoc(), total, name);
  }

  /// Rules build gradients for all float operands, including inputs and frozen
  /// weights the sweep then ignores; drop those (and the seed, when the loss
  /// depends on no parameter). Backwards, so dead chains go in one sweep.
  void eraseUnusedGradientOps(Operation *lastForward) {
    Operation *end = block.getTerminator();
    for (Operation *op = end->getPrevNode(); op && op != lastForward;) {
      Operation *prev = op->getPrevNode();
      if (isOpTriviallyDead(op))
        op->erase();
      op = prev;
    }
  }

  Block &block;
  mt::LossOp loss;
  OpBuilder builder;
  DenseSet<Value> varied, useful;
  DenseMap<Value, Value> grads;
  llvm::MapVector<StringAttr, SmallVector<mt::ParamOp>> paramsByName;
  DenseMap<Operation *, SmallVector<StringAttr>> finalAfter;
};

struct Autodiff : megatrain::impl::AutodiffBase<Autodiff> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    if (!func.getBody().hasOneBlock()) {
      func.emitError("mt-autodiff expects a function with a single block");
      return signalPassFailure();
    }
    Block &block = func.getBody().front();
    SmallVector<mt::LossOp> losses(block.getOps<mt::LossOp>());
    if (losses.size() != 1) {
      func.emitError("mt-autodiff needs exactly one mt.loss, found ")
          << losses.size() << (losses.empty() ? " (run mt-add-loss first)" : "");
      return signalPassFailure();
    }
    if (!block.getOps<mt::ParamGradOp>().empty()) {
      func.emitError("the function is already differentiated (it has mt.param_grad)");
      return signalPassFailure();
    }
    if (!isFloatTensor(losses[0].getValue())) {
      losses[0].emitOpError("the loss must be floating-point to differentiate");
      return signalPassFailure();
    }
    if (failed(ReverseSweep(block, losses[0]).run()))
      return signalPassFailure();
  }
};

} // namespace
