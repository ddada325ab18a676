//===- AddLoss.cpp - mt-add-loss: turn an imported model into an objective ===//
//
// The importer returns every graph output from the function, named by the
// `mt.output_name` result attribute. Training needs one scalar instead: this
// pass marks an existing scalar output (mode=output) or appends the
// next-token cross-entropy of a logits output against the token input
// (mode=next-token-ce) with `mt.loss`, marks each output named in
// keep-outputs with `mt.output` (so it survives as a readout the runtime can
// dump), makes the function return nothing and erases what only the dropped
// outputs needed. With forward-only it marks the function `mt.evaluation`, so
// that plan emission writes an evaluation plan (the pipeline then adds no
// gradients or updates).
//
// With targets=NAME the cross-entropy reads its targets from a new graph
// input NAME of the tokens' type, marked `mt.targets_of = <tokens>`, instead
// of the tokens themselves: the runtime fills it from the tokens with the
// positions a loss mask excludes set to ignore-index, the positions torch's
// cross_entropy(ignore_index=...) skips.
//
//===----------------------------------------------------------------------===//
#include "megatrain/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringExtras.h"

namespace megatrain {
#define GEN_PASS_DEF_ADDLOSS
#include "megatrain/Passes/Passes.h.inc"
} // namespace megatrain

using namespace mlir;
using namespace megatrain;

namespace {

/// The default names of the logits output and the token input.
constexpr llvm::StringLiteral kDefaultLogits = "logits", kDefaultTokens = "input_ids";

/// The graph outputs of a function: its returned values by output name.
struct GraphOutputs {
  SmallVector<std::string> names;
  SmallVector<Value> values;

  Value lookup(StringRef name) const {
    for (auto [n, v] : llvm::zip(names, values))
      if (n == name)
        return v;
    return {};
  }
  std::string list() const {
    if (names.empty())
      return "(none)";
    return llvm::join(names, ", ");
  }
};

struct AddLoss : megatrain::impl::AddLossBase<AddLoss> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    if (!func.getBody().hasOneBlock()) {
      func.emitError("mt-add-loss expects a function with a single block");
      return signalPassFailure();
    }
    if (!func.getOps<mt::LossOp>().empty()) {
      func.emitError("the function already has an mt.loss");
      return signalPassFailure();
    }
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    GraphOutputs outputs;
    for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
      auto name = func.getResultAttrOfType<StringAttr>(i, "mt.output_name");
      outputs.names.push_back(name ? name.str() : "#" + std::to_string(i));
      outputs.values.push_back(value);
    }

    FailureOr<Value> loss = mode == "output"          ? markOutput(func, outputs)
                            : mode == "next-token-ce" ? appendNextTokenCe(func, outputs, ret)
                                                      : unknownMode(func);
    if (failed(loss) || failed(keepOutputValues(func, outputs)))
      return signalPassFailure();

    OpBuilder builder(ret);
    builder.create<mt::LossOp>(ret.getLoc(), *loss);
    for (const std::string &name : keepOutputs)
      builder.create<mt::OutputOp>(ret.getLoc(), outputs.lookup(name),
                                   builder.getStringAttr(name));
    ret->setOperands({});
    if (forwardOnly)
      func->setAttr(mt::attr::kEvaluation, builder.getUnitAttr());
    func.eraseResults(llvm::BitVector(func.getNumResults(), true));
    eraseDeadOps(func.getBody().front());
  }

  /// Checks every keep-outputs name before anything changes, so a typo fails
  /// the pass instead of silently keeping nothing.
  LogicalResult keepOutputValues(func::FuncOp func, const GraphOutputs &outputs) {
    llvm::StringSet<> seen;
    for (const std::string &name : keepOutputs) {
      if (!outputs.lookup(name))
        return func.emitError("cannot keep output '")
               << name << "': no graph output has that name; the graph outputs are: "
               << outputs.list();
      if (!seen.insert(name).second)
        return func.emitError("output '") << name << "' is kept twice";
    }
    return success();
  }

  FailureOr<Value> unknownMode(func::FuncOp func) {
    func.emitError("unknown mt-add-loss mode '")
        << mode << "'; expected 'output' or 'next-token-ce'";
    return failure();
  }

  FailureOr<Value> markOutput(func::FuncOp func, const GraphOutputs &outputs) {
    if (lossOutput.empty()) {
      func.emitError("mt-add-loss needs loss-output=NAME in mode=output; the "
                     "graph outputs are: ")
          << outputs.list();
      return failure();
    }
    Value loss = outputs.lookup(lossOutput);
    if (!loss) {
      func.emitError("no graph output named '")
          << lossOutput << "'; the graph outputs are: " << outputs.list();
      return failure();
    }
    auto type = cast<RankedTensorType>(loss.getType());
    if (type.getRank() != 0 || !isa<FloatType>(type.getElementType())) {
      func.emitError("loss output '")
          << lossOutput << "' must be a floating-point scalar, got " << type;
      return failure();
    }
    return loss;
  }

  FailureOr<Value> appendNextTokenCe(func::FuncOp func,
                                     const GraphOutputs &outputs,
                                     func::ReturnOp ret) {
    Value logitsValue = outputs.lookup(logits);
    // A graph with one output (torch.onnx.export names it after its node,
    // linear_14): that output is the logits unless a name was given.
    if (!logitsValue && logits == kDefaultLogits && outputs.values.size() == 1)
      logitsValue = outputs.values.front();
    if (!logitsValue) {
      func.emitError("no graph output named '")
          << logits << "' (logits); the graph outputs are: " << outputs.list();
      return failure();
    }
    mt::InputOp tokenInput;
    SmallVector<std::string> inputNames;
    SmallVector<mt::InputOp> inputs;
    for (mt::InputOp input : func.getOps<mt::InputOp>()) {
      inputNames.push_back(input.getName().str());
      inputs.push_back(input);
      if (input.getName() == tokens && !tokenInput)
        tokenInput = input;
    }
    // Likewise a graph with one input (torch.onnx.export names it after the
    // forward's argument, ids) reads its tokens there.
    if (!tokenInput && tokens == kDefaultTokens && inputs.size() == 1)
      tokenInput = inputs.front();
    if (!tokenInput) {
      func.emitError("no graph input named '")
          << tokens << "' (tokens); the graph inputs are: "
          << (inputNames.empty() ? std::string("(none)") : llvm::join(inputNames, ", "));
      return failure();
    }
    auto tokType = cast<RankedTensorType>(tokenInput.getType());
    if (tokType.getRank() != 2 || !tokType.getElementType().isInteger(64)) {
      tokenInput.emitError("tokens input '")
          << tokens << "' must be i64 [B, T], got " << tokType;
      return failure();
    }
    auto logitsType = cast<RankedTensorType>(logitsValue.getType());
    if (logitsType.getRank() != 3 ||
        !isa<FloatType>(logitsType.getElementType()) ||
        logitsType.getShape().take_front(2) != tokType.getShape()) {
      func.emitError("logits output '")
          << logits << "' must be floating-point [B, T, V] with [B, T] = "
          << "the shape of tokens " << tokType << ", got "
          << logitsType;
      return failure();
    }
    Value targetValues = tokenInput.getResult();
    if (!targets.empty()) {
      if (llvm::is_contained(inputNames, targets)) {
        func.emitError("targets input '")
            << targets << "' is already a graph input; name the targets "
            << "input something else";
        return failure();
      }
      // Beside the tokens, so the inputs stay together in the schedule.
      OpBuilder inputs(tokenInput);
      inputs.setInsertionPointAfter(tokenInput);
      auto input = inputs.create<mt::InputOp>(tokenInput.getLoc(), tokType,
                                              inputs.getStringAttr(targets));
      input->setAttr("mt.targets_of", inputs.getStringAttr(tokens));
      targetValues = input.getResult();
    }
    OpBuilder builder(ret);
    auto ce = builder.create<mt::NextTokenCrossEntropyOp>(
        ret.getLoc(), mt::tensorLike(logitsType, {}), logitsValue,
        targetValues, builder.getI64IntegerAttr(ignoreIndex));
    return ce.getResult();
  }

  /// Erases ops no longer needed once the outputs are gone. Walking backwards
  /// erases a whole dead chain in one sweep, since users come after producers.
  static void eraseDeadOps(Block &block) {
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
      if (isOpTriviallyDead(&op))
        op.erase();
  }
};

} // namespace
