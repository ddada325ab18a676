//===- Microbatch.cpp - mt-microbatch: gradient accumulation over N bodies -===//
//
// The step body of a differentiated function (everything but its mt.loss and
// mt.param_grad ops: the forward, its backward, mt.output) is repeated
// `count` times, one copy after the other, so that micro-batch k's
// activations die before micro-batch k+1 starts:
//
//   body 0 (as it was, mt.input "x")      g_0 per parameter, l_0
//   body 1 (a clone, mt.input "x@1")      g_1, l_1
//   ...
//   body N-1                              l_{N-1},
//     (l_0 + ... + l_{N-1}) * 1/N -> mt.loss, then g_{N-1}
//
// Right after the definition of each micro-batch gradient g_k:
//
//   %s = mt.scale g_k by 1/N
//   mt.grad_part %s {param, index = k, count = N}     (k < N-1)
//   mt.param_grad %s {param}                          (k = N-1)
//
// When N is a power of two the scale moves to the backward's seed instead:
// the mt.fill that mt-autodiff marked mt.loss_seed becomes 1/N, and each g_k
// goes to its sink as it is. The backward is linear in its seed and a factor
// 2^-j commutes with every rounding (f32, bf16, f64) of a normal number, so
// each part has the bits of 1/N times the unscaled part, as the scale writes
// them, without a pass over every gradient of every micro-batch (a read and
// a write of each); only parts under 2^-126 * N in magnitude (subnormal
// after the scale) could round otherwise. Without a marked seed (a step not built
// by mt-autodiff), or for other N, each part is scaled as above.
//
// so each part leaves the device as soon as it is final (mt-schedule keeps
// sinks right after their operand) and the device never holds a running
// sum. Plan emission turns part 0 into the host gradient, every later part
// (the last one through its mt.adamw) into a host ACCUMULATE into it, in
// fp32 (compiler/lib/Plan/PlanEmitter.cpp). mt.param ops are cloned as they
// are: each is a fetch of the one master of that name. mt.output (a kept
// graph output) stays in micro-batch 0 only, so the readout holds
// micro-batch 0's value.
//
// Every op of micro-batch k's backward that has operands (the ops after the
// original mt.loss in block order, mt-autodiff appends them there, and the
// scales and sinks above) carries `mt.microbatch_backward = k`, so mt-tier
// can split forward from backward inside each micro-batch
// (passes/Tiering.cpp).
//
//===----------------------------------------------------------------------===//
#include "megatrain/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <string>

namespace megatrain {
#define GEN_PASS_DEF_MICROBATCH
#include "megatrain/Passes/Passes.h.inc"
} // namespace megatrain

using namespace mlir;
using namespace megatrain;

namespace {

/// On the function: how many micro-batches it holds (absent: 1); plan
/// emission reads it (compiler/lib/Plan/PlanEmitter.cpp).
constexpr llvm::StringLiteral kMicrobatchesAttr = "mt.microbatches";

struct Microbatch : megatrain::impl::MicrobatchBase<Microbatch> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (count < 1 || count > kMaxMicrobatches) {
      func.emitError("invalid mt-microbatch option count=" +
                     std::to_string(static_cast<int64_t>(count)) +
                     " (must be >= 1 and <= " +
                     std::to_string(kMaxMicrobatches) + ")");
      return signalPassFailure();
    }
    if (count == 1)
      return;
    if (func->hasAttr(kMicrobatchesAttr)) {
      func.emitError("mt-microbatch: the function is already split into "
                     "micro-batches");
      return signalPassFailure();
    }
    if (!func.getBody().hasOneBlock()) {
      func.emitError("mt-microbatch expects a function with a single block");
      return signalPassFailure();
    }
    Block &block = func.getBody().front();
    Operation *terminator = block.getTerminator();
    if (terminator->getNumOperands() != 0) {
      func.emitError("mt-microbatch expects a training step that returns "
                     "nothing (run mt-add-loss)");
      return signalPassFailure();
    }

    SmallVector<mt::LossOp> losses(block.getOps<mt::LossOp>());
    if (losses.size() != 1) {
      func.emitError("mt-microbatch expects exactly one mt.loss, found ")
          << losses.size();
      return signalPassFailure();
    }
    if (!block.getOps<mt::AdamWOp>().empty()) {
      func.emitError("mt-microbatch must run before mt-adamw (the function "
                     "already has mt.adamw updates)");
      return signalPassFailure();
    }
    mt::LossOp loss = losses.front();
    SmallVector<mt::ParamGradOp> grads(block.getOps<mt::ParamGradOp>());

    // The body: every op but the loss, the gradients' sinks and the return.
    // mt-autodiff appends the backward after the loss: the ops after it in
    // block order are backward ops.
    SmallVector<Operation *> body;
    DenseSet<Operation *> backward;
    bool afterLoss = false;
    for (Operation &op : block.without_terminator()) {
      if (&op == loss.getOperation())
        afterLoss = true;
      if (!isa<mt::LossOp, mt::ParamGradOp>(op)) {
        body.push_back(&op);
        if (afterLoss)
          backward.insert(&op);
      }
    }
    // Each backward op carries its micro-batch index (see
    // mt::attr::kMicrobatchBackward); ops without operands (constants) stay
    // unmarked so that CSE still shares them.
    auto markBackward = [&](Operation *op, int64_t k) {
      if (op->getNumOperands() != 0)
        op->setAttr(mt::attr::kMicrobatchBackward,
                    IntegerAttr::get(IntegerType::get(op->getContext(), 64), k));
    };

    // The backward's seed, when mt-autodiff marked it.
    mt::FillOp seed;
    for (Operation *op : body)
      if (auto fill = dyn_cast<mt::FillOp>(op); fill && fill->hasAttr(mt::attr::kLossSeed))
        seed = fill;
    SmallVector<mt::FillOp> seeds;
    if (seed)
      seeds.push_back(seed);

    // Per parameter, its gradient in every micro-batch.
    SmallVector<SmallVector<Value>> parts;
    for (mt::ParamGradOp grad : grads)
      parts.push_back({grad.getGrad()});
    SmallVector<Value> lossValues{loss.getValue()};

    OpBuilder builder(terminator);
    for (int64_t k = 1; k < count; ++k) {
      IRMapping mapping;
      std::string suffix = "@" + std::to_string(k);
      builder.setInsertionPoint(terminator);
      for (Operation *op : body) {
        if (isa<mt::OutputOp>(op))
          continue;
        Operation *clone = builder.clone(*op, mapping);
        if (backward.contains(op))
          markBackward(clone, k);
        if (auto input = dyn_cast<mt::InputOp>(clone))
          input.setName((input.getName() + suffix).str());
      }
      for (auto [i, grad] : llvm::enumerate(grads))
        parts[i].push_back(mapping.lookup(grad.getGrad()));
      if (seed)
        seeds.push_back(cast<mt::FillOp>(mapping.lookup(seed.getResult()).getDefiningOp()));
      lossValues.push_back(mapping.lookup(loss.getValue()));
    }

    for (Operation *op : backward)
      markBackward(op, 0);

    // Each part, scaled by 1/N (by its seed, or by an mt.scale), goes to
    // its sink right after its definition.
    double inverse = 1.0 / static_cast<double>(count);
    const bool seedScaled = seed && llvm::isPowerOf2_64(static_cast<uint64_t>(count));
    if (seedScaled)
      for (mt::FillOp fill : seeds)
        fill.setValueAttr(builder.getF64FloatAttr(inverse));
    for (auto [i, grad] : llvm::enumerate(grads)) {
      for (auto [k, part] : llvm::enumerate(parts[i])) {
        OpBuilder sink(func.getContext());
        if (Operation *def = part.getDefiningOp())
          sink.setInsertionPointAfter(def);
        else
          sink.setInsertionPointToStart(&block);
        Value scaled = part;
        if (!seedScaled) {
          scaled = sink.create<mt::ScaleOp>(grad.getLoc(), part, sink.getF64FloatAttr(inverse));
          markBackward(scaled.getDefiningOp(), static_cast<int64_t>(k));
        }
        Operation *sinkOp;
        if (static_cast<int64_t>(k) + 1 < count)
          sinkOp = sink.create<mt::GradPartOp>(grad.getLoc(), scaled, grad.getParamAttr(),
                                               sink.getI64IntegerAttr(k),
                                               sink.getI64IntegerAttr(count));
        else
          sinkOp = sink.create<mt::ParamGradOp>(grad.getLoc(), scaled, grad.getParamAttr());
        markBackward(sinkOp, static_cast<int64_t>(k));
      }
      grad.erase();
    }

    // The mean of the losses comes right after the last micro-batch's
    // loss, before its backward: the step reads it there (READ_LOSS), and a
    // host update after that read may run on into the next step
    // (docs/runtime.md, "Host updates across steps").
    if (Operation *last = lossValues.back().getDefiningOp())
      builder.setInsertionPointAfter(last);
    else
      builder.setInsertionPoint(terminator);
    Value total = lossValues.front();
    for (Value value : llvm::drop_begin(lossValues))
      total = builder.create<mt::AddOp>(loss.getLoc(), total.getType(), total, value);
    Value meanLoss = builder.create<mt::ScaleOp>(loss.getLoc(), total,
                                                 builder.getF64FloatAttr(inverse));
    builder.create<mt::LossOp>(loss.getLoc(), meanLoss);
    loss.erase();

    func->setAttr(kMicrobatchesAttr, builder.getI64IntegerAttr(count));
  }
};

} // namespace
