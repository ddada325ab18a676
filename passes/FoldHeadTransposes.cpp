//===- FoldHeadTransposes.cpp - mt-fold-head-transposes: heads in place ---===//
//
// An exported attention projects [B, S, H*D], views it as [B, S, H, D] and
// transposes it (perm [0, 2, 1, 3]) to the [B, H, S, D] that rotary and
// attention read; its output goes back the same way, and autodiff writes the
// mirror images in the gradient. Each transpose is a full memory pass.
// mt.attention / mt.attention_grad take a per-operand layout (`bshd`, a bit
// per role) and mt.rotary / mt.rotary_grad a flag (`bshd`), so the heads can
// stay [B, S, H, D] from projection to attention and back.
//
// A group is the set of values that must change layout together: a rotary's
// x and result, attention_grad's q and dq, k and dk, v and dv. Groups grow
// from the operands of attention ops. A group flips to [B, S, H, D] when
// that removes more transposes than it adds:
//  - a member made by a head transpose is read past: the transpose's input
//    is the member in the new layout (the transpose is erased once unused);
//  - a member made by attention (y), attention_grad (dq, dk, dv) or rotary
//    changes type in place, with the producing op's bit set;
//  - a member made by anything else gets a new transpose to the new layout;
//  - a head transpose of a member becomes the member itself (removed);
//  - attention, attention_grad and rotary users read the new layout (their
//    bit set); any other user keeps reading [B, H, S, D] (through the old
//    value, or a new transpose when the member changed type in place).
// Only memory order changes: every element is computed as before.
//
//===----------------------------------------------------------------------===//
#include "megatrain/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace megatrain {
#define GEN_PASS_DEF_FOLDHEADTRANSPOSES
#include "megatrain/Passes/Passes.h.inc"
} // namespace megatrain

using namespace mlir;
using namespace megatrain;

namespace {

// The `bshd` bits of mt.attention and mt.attention_grad.
constexpr int64_t kBitQ = 1, kBitK = 2, kBitV = 4, kBitY = 8, kBitDy = 16;

/// A transpose swapping dims 1 and 2 of a rank-4 tensor.
mt::TransposeOp headTranspose(Operation *op) {
  auto transpose = dyn_cast_or_null<mt::TransposeOp>(op);
  if (!transpose)
    return nullptr;
  ArrayRef<int64_t> perm = transpose.getPerm();
  if (perm.size() == 4 && perm[0] == 0 && perm[1] == 2 && perm[2] == 1 &&
      perm[3] == 3)
    return transpose;
  return nullptr;
}

/// The `bshd` bit of operand `index` of an attention op (0: not a head role).
int64_t operandBit(Operation *op, unsigned index) {
  if (isa<mt::AttentionOp>(op))
    return index < 3 ? int64_t{1} << index : 0;
  if (isa<mt::AttentionGradOp>(op)) {
    static constexpr int64_t bits[] = {kBitQ, kBitK, kBitV, kBitY, 0, kBitDy};
    return index < 6 ? bits[index] : 0;
  }
  return 0;
}

bool isRotary(Operation *op) { return isa<mt::RotaryOp, mt::RotaryGradOp>(op); }

bool rotaryBshd(Operation *op) {
  if (auto r = dyn_cast<mt::RotaryOp>(op))
    return r.getBshd();
  return cast<mt::RotaryGradOp>(op).getBshd();
}

void setRotaryBshd(Operation *op) {
  if (auto r = dyn_cast<mt::RotaryOp>(op))
    r.setBshd(true);
  else
    cast<mt::RotaryGradOp>(op).setBshd(true);
}

int64_t attentionBits(Operation *op) {
  if (auto a = dyn_cast<mt::AttentionOp>(op))
    return a.getBshd();
  return cast<mt::AttentionGradOp>(op).getBshd();
}

void addAttentionBits(Operation *op, int64_t bits) {
  if (auto a = dyn_cast<mt::AttentionOp>(op))
    a.setBshd(a.getBshd() | bits);
  else if (auto g = dyn_cast<mt::AttentionGradOp>(op))
    g.setBshd(g.getBshd() | bits);
}

/// Whether `use` reads its value in the group's layout for free: an
/// attention role still [B, H, S, D], or a rotary's x.
bool flexibleUse(OpOperand &use) {
  Operation *user = use.getOwner();
  if (int64_t bit = operandBit(user, use.getOperandNumber()))
    return (attentionBits(user) & bit) == 0;
  return isRotary(user) && use.getOperandNumber() == 0 && !rotaryBshd(user);
}

/// Whether `value` is made by an op that can write it [B, S, H, D] in place:
/// attention's y, attention_grad's dq, dk, dv, a rotary's result.
bool flexibleResult(Value value) {
  Operation *op = value.getDefiningOp();
  if (!op)
    return false;
  if (auto a = dyn_cast<mt::AttentionOp>(op))
    return value == a.getResult() && !(a.getBshd() & kBitY);
  if (auto g = dyn_cast<mt::AttentionGradOp>(op)) {
    unsigned index = cast<OpResult>(value).getResultNumber();
    return !(g.getBshd() & (int64_t{1} << index));
  }
  return isRotary(op) && !rotaryBshd(op);
}

bool headShaped(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && type.getRank() == 4;
}

RankedTensorType swappedType(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  std::swap(shape[1], shape[2]);
  return RankedTensorType::get(shape, type.getElementType());
}

mt::TransposeOp makeHeadTranspose(OpBuilder &b, Location loc, Value value) {
  return b.create<mt::TransposeOp>(loc, swappedType(value), value,
                                   b.getDenseI64ArrayAttr({0, 2, 1, 3}));
}

struct FoldHeadTransposes
    : megatrain::impl::FoldHeadTransposesBase<FoldHeadTransposes> {
  using Base::Base;

  /// The group of values that must share `seed`'s layout, or empty when one
  /// of them cannot take [B, S, H, D].
  static llvm::SetVector<Value> groupOf(Value seed) {
    llvm::SetVector<Value> group;
    SmallVector<Value> work{seed};
    auto add = [&](Value v) {
      if (group.insert(v))
        work.push_back(v);
    };
    group.insert(seed);
    while (!work.empty()) {
      Value v = work.pop_back_val();
      if (!headShaped(v))
        return {};
      Operation *producer = v.getDefiningOp();
      if (producer && isRotary(producer)) {
        if (rotaryBshd(producer))
          return {};
        add(producer->getOperand(0));
      }
      if (auto grad = dyn_cast_or_null<mt::AttentionGradOp>(producer))
        add(grad->getOperand(cast<OpResult>(v).getResultNumber()));
      for (OpOperand &use : v.getUses()) {
        Operation *user = use.getOwner();
        if (isRotary(user) && use.getOperandNumber() == 0)
          add(user->getResult(0));
        if (auto grad = dyn_cast<mt::AttentionGradOp>(user);
            grad && use.getOperandNumber() < 3)
          add(grad->getResult(use.getOperandNumber()));
      }
    }
    // A member that is a head transpose of another member would be read
    // past and replaced at once: leave such (unexported) shapes alone.
    for (Value v : group)
      if (mt::TransposeOp t = headTranspose(v.getDefiningOp());
          t && group.contains(t.getX()))
        return {};
    return group;
  }

  /// Head transposes removed minus those added if `group` flips.
  static int64_t saving(const llvm::SetVector<Value> &group) {
    int64_t saved = 0;
    for (Value v : group) {
      bool othersRead = false;
      for (OpOperand &use : v.getUses()) {
        if (headTranspose(use.getOwner()))
          ++saved;
        else if (!flexibleUse(use))
          othersRead = true;
      }
      if (headTranspose(v.getDefiningOp())) {
        if (!othersRead)
          ++saved; // erased once the group reads past it
      } else if (!flexibleResult(v)) {
        --saved; // a new transpose to the new layout
      } else if (othersRead) {
        --saved; // a new transpose back for the other readers
      }
    }
    return saved;
  }

  /// Rewrites `group` to [B, S, H, D].
  static void flip(const llvm::SetVector<Value> &group) {
    // The users to update, taken before any use changes.
    enum class Producer { Transpose, InPlace, Other };
    struct Pending {
      Value value;
      Producer producer;
      SmallVector<OpOperand *> flexible, transposes, others;
    };
    SmallVector<Pending> pending;
    for (Value v : group) {
      Producer producer = headTranspose(v.getDefiningOp()) ? Producer::Transpose
                          : flexibleResult(v)              ? Producer::InPlace
                                                           : Producer::Other;
      Pending p{v, producer, {}, {}, {}};
      for (OpOperand &use : v.getUses()) {
        if (headTranspose(use.getOwner()))
          p.transposes.push_back(&use);
        else if (flexibleUse(use))
          p.flexible.push_back(&use);
        else
          p.others.push_back(&use);
      }
      pending.push_back(std::move(p));
    }
    for (Pending &p : pending) {
      Value v = p.value;
      Value swapped;
      if (p.producer == Producer::Transpose) {
        swapped = v.getDefiningOp<mt::TransposeOp>().getX();
      } else if (p.producer == Producer::InPlace) {
        Operation *op = v.getDefiningOp();
        RankedTensorType type = swappedType(v);
        v.setType(type);
        swapped = v;
        if (isRotary(op))
          setRotaryBshd(op);
        else if (isa<mt::AttentionOp>(op))
          addAttentionBits(op, kBitY);
        // attention_grad's results follow their inputs' bits (set below).
        if (!p.others.empty()) {
          OpBuilder b(op->getContext());
          b.setInsertionPointAfter(op);
          Value back = makeHeadTranspose(b, op->getLoc(), v);
          for (OpOperand *use : p.others)
            use->set(back);
        }
      } else {
        OpBuilder b(v.getContext());
        b.setInsertionPointAfterValue(v);
        swapped = makeHeadTranspose(b, v.getLoc(), v);
      }
      for (OpOperand *use : p.flexible) {
        Operation *user = use->getOwner();
        if (int64_t bit = operandBit(user, use->getOperandNumber()))
          addAttentionBits(user, bit);
        use->set(swapped);
      }
      for (OpOperand *use : p.transposes) {
        auto transpose = cast<mt::TransposeOp>(use->getOwner());
        transpose.getResult().replaceAllUsesWith(swapped);
      }
    }
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<Operation *> attentions;
    func.walk([&](Operation *op) {
      if (isa<mt::AttentionOp, mt::AttentionGradOp>(op))
        attentions.push_back(op);
    });
    for (Operation *op : attentions)
      for (OpOperand &use : op->getOpOperands()) {
        if (!operandBit(op, use.getOperandNumber()) || !flexibleUse(use))
          continue;
        llvm::SetVector<Value> group = groupOf(use.get());
        if (!group.empty() && saving(group) > 0)
          flip(group);
      }
    // Erase the head transposes left without users, users first.
    SmallVector<mt::TransposeOp> dead;
    func.walk([&](mt::TransposeOp op) { dead.push_back(op); });
    for (mt::TransposeOp op : llvm::reverse(dead))
      if (op->use_empty() && headTranspose(op))
        op.erase();
  }
};

} // namespace
