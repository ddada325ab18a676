//===- FusePointwise.cpp - mt-fuse-pointwise: elementwise chains to mt.pointwise ===//
//
// Every elementwise op is a kernel that reads its operands from memory and
// writes its result back; a chain of them (a residual add and the bf16 copy
// of the sum a matmul reads, swiglu_grad and the casts of both gradients, a
// scale after an add) moves each intermediate value twice. This pass writes
// each maximal chain as one mt.pointwise whose program (PointwiseProgram.h)
// evaluates the ops per element: inputs read once, outputs written once.
//
// It runs on the whole training step after mt-precision and
// mt-fold-transpose (the forward, autodiff's backward and the bf16 casts of
// the products are all there) and before mt-schedule, so the schedule, the
// tiering (which may recompute an mt.pointwise like any pure op) and memory
// planning see the fused ops. First, a bf16 cast of a reshape (the weight
// gradients read an activation gradient reshaped, then cast) becomes a
// reshape of that value's existing cast, or of a cast placed right after the
// value's definition when the cast was the reshape's only reader, so it can
// join the chain that defines the value: the same elements, and the f32 copy
// the reshape made is gone. Then,
// in one walk in program order:
//   1. An op is a member candidate when it is one of the elementwise ops
//      below, its results share one shape, and its values are f32 or f64
//      (one of them) or, for mt.cast between bf16 and that type, bf16.
//   2. A candidate joins the group of the first of its operands' producers
//      whose group has its shape and compute type, when no value of that
//      group is read by an op outside it that comes before the candidate
//      (the fused op takes the place of the group's last member, so such a
//      reader would read before the write), the candidate comes at most 8 ops
//      after the group's last member (the group's inputs live on to the fused
//      op), the fused op's bytes (its inputs, and the values read outside it;
//      values of the group's shape only, not the small ones broadcast into
//      it) are no more than the largest operands-and-results bytes among the
//      ops it replaces (one step holds them all live at once, so a larger sum
//      could raise the peak the tiering must fit), and the group stays within
//      the program's limits (8 inputs, 48 instructions); else it starts a
//      group.
//   3. Each group of two or more members becomes one mt.pointwise at its last
//      member: the inputs are the values its members read from outside it,
//      the results the members' values read outside it (an intermediate
//      value that has another reader is both a register and an output).
//      Groups with more than 8 such values stay as they are.
// A cast to bf16 inside a chain is the instruction round_bf16; a cast from
// bf16 is no instruction (the register holds the value exactly).
//
// Not optimal for: a chain whose intermediate value is read later (a
// residual sum that is also cast to bf16, a bias add before a gelu kept for
// its gradient) is not fused when the fused op would hold more bytes at once
// than the ops it replaces, although it would save a launch and a read; a
// candidate with producers in two groups joins only the first (no merging of
// groups); a chain broken by a broadcast (a bias
// gradient summed down) stays split at it; reductions and norms are never
// members (their fused kernels are their own).
//
//===----------------------------------------------------------------------===//
#include "megatrain/Passes/Passes.h"
#include "megatrain/plan/PointwiseProgram.h"

#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <memory>

namespace megatrain {
#define GEN_PASS_DEF_FUSEPOINTWISE
#include "megatrain/Passes/Passes.h.inc"
} // namespace megatrain

using namespace mlir;
using namespace megatrain;
namespace pw = megatrain::pointwise;

namespace {

/// One instruction of a member: opcode, operand indices into the op's
/// operands (-1 unused), a constant when the opcode takes one, and which
/// result of the op it writes.
struct Step {
  int64_t opcode;
  int operands[3] = {-1, -1, -1};
  std::optional<double> constant;
  unsigned result = 0;
};

/// What an op becomes in a program: its instructions, or, for a cast from
/// bf16, no instruction (`alias`: the result is its operand's register).
struct Lowering {
  SmallVector<Step, 2> steps;
  bool alias = false;
};

Type elementOf(Value value) { return cast<RankedTensorType>(value.getType()).getElementType(); }
ArrayRef<int64_t> shapeOf(Value value) { return cast<RankedTensorType>(value.getType()).getShape(); }

Step unary(int64_t opcode) {
  Step step{opcode};
  step.operands[0] = 0;
  return step;
}
Step binary(int64_t opcode) {
  Step step{opcode};
  step.operands[0] = 0;
  step.operands[1] = 1;
  return step;
}

/// The instructions of a candidate op, or nothing when it is no candidate.
std::optional<Lowering> lower(Operation *op) {
  Lowering l;
  auto one = [&](Step step) {
    l.steps.push_back(step);
    return l;
  };
  if (isa<mt::AddOp>(op)) return one(binary(pw::Add));
  if (isa<mt::SubOp>(op)) return one(binary(pw::Sub));
  if (isa<mt::MulOp>(op)) return one(binary(pw::Mul));
  if (isa<mt::DivOp>(op)) return one(binary(pw::Div));
  if (isa<mt::MaxOp>(op)) return one(binary(pw::Max));
  if (isa<mt::MinOp>(op)) return one(binary(pw::Min));
  if (isa<mt::NegOp>(op)) return one(unary(pw::Neg));
  if (isa<mt::SqrtOp>(op)) return one(unary(pw::Sqrt));
  if (isa<mt::ReciprocalOp>(op)) return one(unary(pw::Reciprocal));
  if (isa<mt::ExpOp>(op)) return one(unary(pw::Exp));
  if (isa<mt::LogOp>(op)) return one(unary(pw::Log));
  if (isa<mt::ErfOp>(op)) return one(unary(pw::Erf));
  if (isa<mt::CosOp>(op)) return one(unary(pw::Cos));
  if (isa<mt::SinOp>(op)) return one(unary(pw::Sin));
  if (isa<mt::TanhOp>(op)) return one(unary(pw::Tanh));
  if (isa<mt::SigmoidOp>(op)) return one(unary(pw::Sigmoid));
  if (isa<mt::ReluOp>(op)) return one(unary(pw::Relu));
  if (isa<mt::SoftplusOp>(op)) return one(unary(pw::Softplus));
  if (isa<mt::SiluOp>(op)) return one(unary(pw::Silu));
  if (auto scale = dyn_cast<mt::ScaleOp>(op)) {
    Step step = unary(pw::Scale);
    step.constant = scale.getAlpha().convertToDouble();
    return one(step);
  }
  if (auto powf = dyn_cast<mt::PowfOp>(op)) {
    Step step = unary(pw::Powf);
    step.constant = powf.getExponent().convertToDouble();
    return one(step);
  }
  if (isa<mt::SwigluOp>(op)) return one(binary(pw::Swiglu));
  if (isa<mt::SiluGradOp>(op)) return one(binary(pw::SiluGrad));
  if (isa<mt::ReluGradOp>(op)) return one(binary(pw::ReluGrad));
  if (isa<mt::TanhGradOp>(op)) return one(binary(pw::TanhGrad));
  if (isa<mt::SigmoidGradOp>(op)) return one(binary(pw::SigmoidGrad));
  if (isa<mt::ErfGradOp>(op)) return one(binary(pw::ErfGrad));
  if (auto gelu = dyn_cast<mt::GeluOp>(op))
    return one(unary(gelu.getApproximate() == "tanh" ? pw::GeluTanh : pw::GeluErf));
  if (auto grad = dyn_cast<mt::GeluGradOp>(op))
    return one(binary(grad.getApproximate() == "tanh" ? pw::GeluTanhGrad : pw::GeluErfGrad));
  if (isa<mt::SwigluGradOp>(op)) {
    for (int64_t opcode : {int64_t(pw::SwigluGradGate), int64_t(pw::SwigluGradUp)}) {
      Step step{opcode};
      step.operands[0] = 0;
      step.operands[1] = 1;
      step.operands[2] = 2;
      step.result = opcode == pw::SwigluGradGate ? 0 : 1;
      l.steps.push_back(step);
    }
    return l;
  }
  if (auto castOp = dyn_cast<mt::CastOp>(op)) {
    Type from = elementOf(castOp->getOperand(0)), to = elementOf(castOp->getResult(0));
    auto wide = [](Type t) { return t.isF32() || t.isF64(); };
    if (wide(from) && to.isBF16())
      return one(unary(pw::RoundBf16));
    if (from.isBF16() && wide(to)) {
      l.alias = true;
      return l;
    }
  }
  return std::nullopt;
}

/// The type the op computes in: f32 or f64, shared by every operand and
/// result but a cast's bf16 side; null when there is none or two.
Type computeType(Operation *op) {
  Type compute;
  const bool castOp = isa<mt::CastOp>(op);
  auto visit = [&](Value value) {
    Type element = elementOf(value);
    if (element.isBF16())
      return castOp;
    if (!element.isF32() && !element.isF64())
      return false;
    if (compute && compute != element)
      return false;
    compute = element;
    return true;
  };
  for (Value value : op->getOperands())
    if (!visit(value))
      return {};
  for (Value value : op->getResults())
    if (!visit(value))
      return {};
  return compute;
}

/// The bytes of a value with `elements` elements (the group's shape); 0 for a
/// smaller one broadcast into it (a bias, a scale, a mask: small beside the
/// chain's values, and held by either form).
uint64_t bytesOf(Value value, int64_t elements) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getNumElements() != elements)
    return 0;
  return static_cast<uint64_t>(elements) * ((type.getElementTypeBitWidth() + 7) / 8);
}

/// Bytes an unfused op holds at its step: its distinct operands and results.
uint64_t footprint(Operation *op, int64_t elements) {
  llvm::SmallPtrSet<Value, 8> seen;
  uint64_t bytes = 0;
  for (Value v : op->getOperands())
    if (seen.insert(v).second)
      bytes += bytesOf(v, elements);
  for (Value v : op->getResults())
    bytes += bytesOf(v, elements);
  return bytes;
}

/// How far (in ops) a candidate may come after its group's last member: the
/// fused op runs at the candidate, so the group's inputs live on to there.
constexpr size_t kWindow = 8;

struct Group {
  SmallVector<int64_t> shape;
  Type compute;
  SmallVector<Operation *> members;
  llvm::SmallPtrSet<Operation *, 8> memberSet;
  size_t instructions = 0;
};

/// The groups of one block (stages 2 and 3).
struct Grouping {
  llvm::DenseMap<Operation *, size_t> position;
  llvm::DenseMap<Operation *, Group *> groupOf;
  std::vector<std::unique_ptr<Group>> groups;

  /// The values `group` would read from outside it with `extra` a member.
  static llvm::SetVector<Value> externalInputs(const Group &group, Operation *extra) {
    llvm::SetVector<Value> inputs;
    auto inside = [&](Value v) {
      Operation *def = v.getDefiningOp();
      return def && (def == extra || group.memberSet.contains(def));
    };
    for (Operation *member : group.members)
      for (Value v : member->getOperands())
        if (!inside(v))
          inputs.insert(v);
    if (extra)
      for (Value v : extra->getOperands())
        if (!inside(v))
          inputs.insert(v);
    return inputs;
  }

  bool canJoin(const Group &group, Operation *op, const Lowering &l) {
    if (group.instructions + l.steps.size() > static_cast<size_t>(pw::kMaxInstructions))
      return false;
    const size_t at = position.lookup(op);
    if (at > position.lookup(group.members.back()) + kWindow)
      return false;
    for (Operation *member : group.members)
      for (Value v : member->getResults())
        for (Operation *user : v.getUsers())
          if (user != op && !group.memberSet.contains(user) && position.lookup(user) < at)
            return false;
    llvm::SetVector<Value> inputs = externalInputs(group, op);
    if (inputs.size() > static_cast<size_t>(pw::kMaxOperands))
      return false;
    // The fused op holds every input and output live at its one step; that
    // must not exceed the largest footprint among the steps it replaces.
    const int64_t n = cast<RankedTensorType>(op->getResult(0).getType()).getNumElements();
    uint64_t fused = 0, largest = footprint(op, n);
    for (Value v : inputs)
      fused += bytesOf(v, n);
    auto outside = [&](Operation *user) { return user != op && !group.memberSet.contains(user); };
    for (Operation *member : group.members) {
      largest = std::max(largest, footprint(member, n));
      for (Value v : member->getResults())
        if (llvm::any_of(v.getUsers(), outside))
          fused += bytesOf(v, n);
    }
    for (Value v : op->getResults())
      if (!v.use_empty())
        fused += bytesOf(v, n);
    return fused <= largest;
  }

  void consider(Operation *op) {
    std::optional<Lowering> l = lower(op);
    if (!l)
      return;
    Type compute = computeType(op);
    if (!compute)
      return;
    ArrayRef<int64_t> shape = shapeOf(op->getResult(0));
    for (Value v : op->getResults())
      if (shapeOf(v) != shape)
        return;
    Group *target = nullptr;
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      Group *group = def ? groupOf.lookup(def) : nullptr;
      if (group && ArrayRef<int64_t>(group->shape) == shape && group->compute == compute &&
          canJoin(*group, op, *l)) {
        target = group;
        break;
      }
    }
    if (!target) {
      groups.push_back(std::make_unique<Group>());
      target = groups.back().get();
      target->shape.assign(shape.begin(), shape.end());
      target->compute = compute;
    }
    target->members.push_back(op);
    target->memberSet.insert(op);
    target->instructions += l->steps.size();
    groupOf[op] = target;
  }

  /// Replaces a group by one mt.pointwise; false (and nothing changed) when
  /// it would have more than kMaxOperands results or none.
  bool rewrite(IRRewriter &rewriter, Group &group) {
    llvm::SetVector<Value> inputs = externalInputs(group, nullptr);
    llvm::DenseMap<Value, int64_t> reg;
    for (Value v : inputs)
      reg[v] = static_cast<int64_t>(reg.size());
    const int64_t numInputs = static_cast<int64_t>(inputs.size());
    SmallVector<int64_t> code;
    SmallVector<double> constants;
    for (Operation *member : group.members) {
      Lowering l = *lower(member);
      if (l.alias) {
        reg[member->getResult(0)] = reg.lookup(member->getOperand(0));
        continue;
      }
      for (const Step &step : l.steps) {
        code.push_back(step.opcode);
        for (int slot = 0; slot < 3; ++slot) {
          if (step.constant && slot == 1) {
            code.push_back(static_cast<int64_t>(constants.size()));
            constants.push_back(*step.constant);
          } else {
            code.push_back(step.operands[slot] < 0
                               ? -1
                               : reg.lookup(member->getOperand(step.operands[slot])));
          }
        }
        reg[member->getResult(step.result)] =
            numInputs + static_cast<int64_t>(code.size() / pw::kFields) - 1;
      }
    }
    SmallVector<Value> outputs;
    for (Operation *member : group.members)
      for (Value v : member->getResults())
        if (llvm::any_of(v.getUsers(),
                         [&](Operation *user) { return !group.memberSet.contains(user); }))
          outputs.push_back(v);
    if (outputs.empty() || outputs.size() > static_cast<size_t>(pw::kMaxOperands) ||
        constants.size() > static_cast<size_t>(pw::kMaxConstants) || code.empty())
      return false;
    SmallVector<int64_t> stores;
    SmallVector<Type> types;
    SmallVector<Location> locs;
    for (Value v : outputs) {
      stores.push_back(reg.lookup(v));
      types.push_back(v.getType());
    }
    for (Operation *member : group.members)
      locs.push_back(member->getLoc());
    rewriter.setInsertionPoint(group.members.back());
    auto fused = rewriter.create<mt::PointwiseOp>(
        rewriter.getFusedLoc(locs), types, inputs.getArrayRef(),
        rewriter.getDenseI64ArrayAttr(code), rewriter.getDenseF64ArrayAttr(constants),
        rewriter.getDenseI64ArrayAttr(stores));
    for (auto [value, result] : llvm::zip(outputs, fused.getResults()))
      rewriter.replaceAllUsesWith(value, result);
    for (Operation *member : llvm::reverse(group.members))
      rewriter.eraseOp(member);
    return true;
  }

  /// Stage 1: cast(reshape(v)) to bf16 becomes reshape(cast(v)), reusing
  /// v's existing cast to that type, or with a cast right after v's
  /// definition when the reshape has no other reader (so it can join v's
  /// chain); a reshape left unread is erased.
  static void hoistCasts(Block &block, IRRewriter &rewriter) {
    for (Operation &op : llvm::make_early_inc_range(block)) {
      auto castOp = dyn_cast<mt::CastOp>(op);
      if (!castOp || !elementOf(castOp.getResult()).isBF16())
        continue;
      auto reshape = castOp.getX().getDefiningOp<mt::ReshapeOp>();
      if (!reshape)
        continue;
      Value v = reshape.getX();
      Type element = elementOf(v);
      if (!element.isF32() && !element.isF64())
        continue;
      auto narrow = RankedTensorType::get(shapeOf(v), elementOf(castOp.getResult()));
      Value narrowed;
      for (Operation *user : v.getUsers())
        if (auto other = dyn_cast<mt::CastOp>(user); other && other.getType() == narrow &&
                                                     other->getBlock() == &block)
          if (!narrowed || other->isBeforeInBlock(narrowed.getDefiningOp()))
            narrowed = other.getResult();
      if (narrowed && !narrowed.getDefiningOp()->isBeforeInBlock(castOp))
        narrowed = {};
      // Without a cast to reuse, hoisting pays only when the f32 reshape goes
      // away; else it would add a bf16 reshape beside it.
      if (!narrowed && !reshape->hasOneUse())
        continue;
      if (!narrowed) {
        if (Operation *def = v.getDefiningOp())
          rewriter.setInsertionPointAfter(def);
        else
          rewriter.setInsertionPointToStart(&block);
        narrowed = rewriter.create<mt::CastOp>(castOp.getLoc(), narrow, v);
      }
      rewriter.setInsertionPoint(castOp);
      Value view = rewriter.create<mt::ReshapeOp>(reshape.getLoc(), castOp.getType(), narrowed);
      rewriter.replaceOp(castOp, view);
      if (reshape->use_empty())
        rewriter.eraseOp(reshape);
    }
  }

  void run(Block &block, MLIRContext *context) {
    IRRewriter rewriter(context);
    hoistCasts(block, rewriter);
    size_t index = 0;
    for (Operation &op : block)
      position[&op] = index++;
    for (Operation &op : block)
      consider(&op);
    for (auto &group : groups)
      if (group->members.size() >= 2)
        rewrite(rewriter, *group);
  }
};

struct FusePointwise : megatrain::impl::FusePointwiseBase<FusePointwise> {
  void runOnOperation() override {
    for (Block &block : getOperation().getBody())
      Grouping().run(block, &getContext());
  }
};

} // namespace
