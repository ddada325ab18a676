//===- FuseAttention.cpp - mt-fuse-attention: causal attention as one op --===//
//
// Recognizes scaled dot-product attention as torch.onnx.export spells it out
// and the importer turns it into mt ops, and rewrites it into mt.attention:
//
//   1. Anchor: %p = mt.softmax %s over the last axis of a rank-4 score
//      tensor, read (directly, or through `where(isnan(p), 0, p)`) by exactly
//      one mt.matmul %p, %V.
//   2. %s = mt.add %scores, %mask with %mask an mt.constant that is provably
//      causal: 0 where key j <= query i, <= -1e30 (or -inf) elsewhere, for
//      every broadcast batch and head. Any other mask: no fusion.
//   3. %scores = mt.matmul %A, %B (possibly transpose_b), possibly scaled:
//      mt.scale, or mt.mul / mt.div by a splat constant, on either side of
//      the product. The factors multiply into the op's `scale`.
//   4. %A, %B and %V are traced back through reshape, transpose,
//      broadcast_to and scalar scalings to base tensors q [B, Hq, S, D] and
//      k, v [B, Hkv, S, D]. Each chain is checked by a symbolic layout (below)
//      to read exactly q, k^T (or k) repeated per query-head group, and v
//      repeated likewise: the Expand/Reshape form of grouped-query attention
//      then disappears into the fused op.
//
// The score, probability and mask values must have no user outside the
// pattern (attention probabilities returned as an output stay unfused). The
// matched ops left without users are erased.
//
// The layout check: a value reachable from a base tensor through view ops is
// described as, per dim, a list of (size, stride) atoms in elements of the
// base. Reshape regroups atoms (splitting one when a boundary falls inside
// it), transpose permutes dims, broadcast_to adds stride-0 atoms. Two views
// are the same data when their normalized atoms (no size-1 atom, neighbours
// merged where contiguous) agree dim by dim.
//
//===----------------------------------------------------------------------===//
#include "megatrain/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <deque>
#include <optional>

namespace megatrain {
#define GEN_PASS_DEF_FUSEATTENTION
#include "megatrain/Passes/Passes.h.inc"

namespace {

using mlir::Operation;
using mlir::Value;

llvm::ArrayRef<int64_t> shapeOf(Value v) {
  return mlir::cast<mlir::RankedTensorType>(v.getType()).getShape();
}

//===----------------------------------------------------------------------===//
// Symbolic layouts
//===----------------------------------------------------------------------===//

struct Atom {
  int64_t size, stride;
  bool operator==(const Atom &o) const { return size == o.size && stride == o.stride; }
};
using Dim = llvm::SmallVector<Atom, 2>;

struct View {
  llvm::SmallVector<Dim, 5> dims;

  static View contiguous(llvm::ArrayRef<int64_t> shape) {
    View v;
    int64_t stride = 1;
    v.dims.resize(shape.size());
    for (int i = (int)shape.size() - 1; i >= 0; --i) {
      v.dims[i].push_back({shape[i], stride});
      stride *= shape[i];
    }
    return v;
  }

  int64_t size(const Dim &d) const {
    int64_t n = 1;
    for (const Atom &a : d)
      n *= a.size;
    return n;
  }

  std::optional<View> reshape(llvm::ArrayRef<int64_t> shape) const {
    std::deque<Atom> atoms;
    for (const Dim &d : dims)
      for (const Atom &a : d)
        if (a.size != 1)
          atoms.push_back(a);
    View out;
    for (int64_t want : shape) {
      Dim dim;
      int64_t have = 1;
      while (have < want) {
        if (atoms.empty())
          return std::nullopt;
        Atom a = atoms.front();
        atoms.pop_front();
        int64_t rest = want / have;
        if (want % have != 0)
          return std::nullopt;
        if (a.size <= rest && rest % a.size == 0) {
          dim.push_back(a);
          have *= a.size;
        } else if (a.size % rest == 0) {
          // The boundary falls inside the atom: its outer part ends this dim.
          dim.push_back({rest, a.stride * (a.size / rest)});
          atoms.push_front({a.size / rest, a.stride});
          have *= rest;
        } else {
          return std::nullopt;
        }
      }
      if (have != want)
        return std::nullopt;
      out.dims.push_back(dim);
    }
    if (!atoms.empty())
      return std::nullopt;
    return out;
  }

  std::optional<View> transpose(llvm::ArrayRef<int64_t> perm) const {
    if (perm.size() != dims.size())
      return std::nullopt;
    View out;
    for (int64_t p : perm)
      out.dims.push_back(dims[p]);
    return out;
  }

  std::optional<View> broadcastTo(llvm::ArrayRef<int64_t> shape) const {
    if (shape.size() < dims.size())
      return std::nullopt;
    View out;
    size_t lead = shape.size() - dims.size();
    for (size_t i = 0; i < shape.size(); ++i) {
      if (i < lead) {
        out.dims.push_back(Dim{{shape[i], 0}});
        continue;
      }
      const Dim &d = dims[i - lead];
      int64_t n = size(d);
      if (n == shape[i])
        out.dims.push_back(d);
      else if (n == 1)
        out.dims.push_back(Dim{{shape[i], 0}});
      else
        return std::nullopt;
    }
    return out;
  }

  static Dim normalized(const Dim &d) {
    Dim out;
    for (const Atom &a : d) {
      if (a.size == 1)
        continue;
      if (!out.empty() && out.back().stride == a.size * a.stride) {
        out.back() = {out.back().size * a.size, a.stride};
        continue;
      }
      out.push_back(a);
    }
    return out;
  }

  bool sameAs(const View &o) const {
    if (dims.size() != o.dims.size())
      return false;
    for (size_t i = 0; i < dims.size(); ++i)
      if (normalized(dims[i]) != normalized(o.dims[i]))
        return false;
    return true;
  }
};

/// The layout that k or v [B, Hkv, S, D] has after grouped-query repetition
/// to [B, Hkv * group, S, D] (then its last two dims swapped if `swapped`).
std::optional<View> repeatedHeads(llvm::ArrayRef<int64_t> kv, int64_t group, bool swapped) {
  View base = View::contiguous(kv);
  std::optional<View> v = base.reshape({kv[0], kv[1], 1, kv[2], kv[3]});
  if (v)
    v = v->broadcastTo({kv[0], kv[1], group, kv[2], kv[3]});
  if (v)
    v = v->reshape({kv[0], kv[1] * group, kv[2], kv[3]});
  if (v && swapped)
    v = v->transpose({0, 1, 3, 2});
  return v;
}

//===----------------------------------------------------------------------===//
// Scalar factors
//===----------------------------------------------------------------------===//

/// The value of a splat floating constant with all dims 1 (a scalar).
std::optional<double> scalarConstant(Value v) {
  auto c = v.getDefiningOp<mt::ConstantOp>();
  if (!c)
    return std::nullopt;
  for (int64_t d : shapeOf(v))
    if (d != 1)
      return std::nullopt;
  auto dense = mlir::dyn_cast<mlir::DenseFPElementsAttr>(c.getValue());
  if (!dense || dense.getNumElements() != 1)
    return std::nullopt;
  return (*dense.getValues<llvm::APFloat>().begin()).convertToDouble();
}

/// If `op` multiplies one tensor by a scalar without changing its type:
/// that tensor, the factor and the constant.
struct Scaling {
  Value input;
  double factor;
  Operation *constant = nullptr;
};
std::optional<Scaling> asScaling(Operation *op) {
  if (!op || op->getNumResults() != 1)
    return std::nullopt;
  Value result = op->getResult(0);
  if (auto s = mlir::dyn_cast<mt::ScaleOp>(op))
    return Scaling{s.getX(), s.getAlpha().convertToDouble()};
  auto sameType = [&](Value v) { return v.getType() == result.getType(); };
  if (auto m = mlir::dyn_cast<mt::MulOp>(op)) {
    if (auto c = scalarConstant(m.getRhs()); c && sameType(m.getLhs()))
      return Scaling{m.getLhs(), *c, m.getRhs().getDefiningOp()};
    if (auto c = scalarConstant(m.getLhs()); c && sameType(m.getRhs()))
      return Scaling{m.getRhs(), *c, m.getLhs().getDefiningOp()};
  }
  if (auto d = mlir::dyn_cast<mt::DivOp>(op)) {
    if (auto c = scalarConstant(d.getRhs()); c && *c != 0 && sameType(d.getLhs()))
      return Scaling{d.getLhs(), 1.0 / *c, d.getRhs().getDefiningOp()};
  }
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Tracing an operand back to its base tensor
//===----------------------------------------------------------------------===//

/// One step of a chain: the op and the value it reads.
struct Link {
  Operation *op;
  Value input;
  double factor = 1.0;
  Operation *constant = nullptr;
};

std::optional<Link> linkOf(Value v) {
  Operation *op = v.getDefiningOp();
  if (!op)
    return std::nullopt;
  if (mlir::isa<mt::ReshapeOp, mt::TransposeOp, mt::BroadcastToOp>(op))
    return Link{op, op->getOperand(0)};
  if (auto s = asScaling(op))
    return Link{op, s->input, s->factor, s->constant};
  return std::nullopt;
}

/// The layout of `operand` computed from `base` through `links` (ordered
/// from base towards operand).
std::optional<View> replay(Value base, llvm::ArrayRef<Link> links) {
  std::optional<View> v = View::contiguous(shapeOf(base));
  for (const Link &l : links) {
    if (!v)
      return std::nullopt;
    llvm::ArrayRef<int64_t> out = shapeOf(l.op->getResult(0));
    if (mlir::isa<mt::ReshapeOp>(l.op))
      v = v->reshape(out);
    else if (auto t = mlir::dyn_cast<mt::TransposeOp>(l.op))
      v = v->transpose(t.getPerm());
    else if (mlir::isa<mt::BroadcastToOp>(l.op))
      v = v->broadcastTo(out);
  }
  return v;
}

struct Traced {
  Value base;
  double factor = 1.0;
  llvm::SmallVector<Operation *> ops; // the chain's ops and scalar constants
};

/// Walks back from `operand` through view ops and scalings, and returns the
/// farthest value `accept` takes (given its shape) whose replayed layout is
/// `expected(shape)`; the operand itself is the last candidate.
template <typename Accept, typename Expected>
std::optional<Traced> trace(Value operand, Accept accept, Expected expected) {
  llvm::SmallVector<Link> chain; // operand towards the base
  for (Value v = operand;;) {
    std::optional<Link> l = linkOf(v);
    if (!l)
      break;
    chain.push_back(*l);
    v = l->input;
  }
  // Candidate i: the value read by chain[i - 1] (i = chain.size(): the farthest).
  for (size_t i = chain.size() + 1; i-- > 0;) {
    Value candidate = i == 0 ? operand : chain[i - 1].input;
    llvm::ArrayRef<int64_t> shape = shapeOf(candidate);
    if (!accept(shape))
      continue;
    llvm::SmallVector<Link> forward(chain.begin(), chain.begin() + i);
    std::reverse(forward.begin(), forward.end());
    std::optional<View> got = replay(candidate, forward);
    std::optional<View> want = expected(shape);
    if (!got || !want || !got->sameAs(*want))
      continue;
    Traced t{candidate};
    for (const Link &l : forward) {
      t.factor *= l.factor;
      t.ops.push_back(l.op);
      if (l.constant)
        t.ops.push_back(l.constant);
    }
    return t;
  }
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// The mask
//===----------------------------------------------------------------------===//

/// The value `mask` repeats along leading dims: through mt.broadcast_to ops
/// that keep the last two dims (the constant folder leaves a broadcast of a
/// large mask unfolded, e.g. [1, 1, S, S] to [B, 1, S, S] at S = 2048), with
/// each op passed collected in `through`.
Value peelMaskBroadcasts(Value mask, llvm::SmallVectorImpl<Operation *> &through) {
  while (auto b = mask.getDefiningOp<mt::BroadcastToOp>()) {
    llvm::ArrayRef<int64_t> in = shapeOf(b.getX()), out = shapeOf(mask);
    if (in.size() < 2 || out.size() < 2 || in.take_back(2) != out.take_back(2))
      break;
    through.push_back(b);
    mask = b.getX();
  }
  return mask;
}

/// True if the constant `mask`, broadcast against scores [.., Sq, Skv], is 0
/// where j <= i and effectively -inf elsewhere, for every leading index.
bool isCausalMask(Value mask, llvm::ArrayRef<int64_t> scores) {
  llvm::SmallVector<Operation *> through;
  mask = peelMaskBroadcasts(mask, through);
  auto c = mask.getDefiningOp<mt::ConstantOp>();
  if (!c)
    return false;
  llvm::ArrayRef<int64_t> m = shapeOf(mask);
  if (m.size() < 2 || m.size() > scores.size())
    return false;
  int64_t sq = scores[scores.size() - 2], skv = scores.back();
  if (m[m.size() - 2] != sq || m.back() != skv)
    return false;
  auto dense = mlir::dyn_cast<mlir::DenseFPElementsAttr>(c.getValue());
  if (!dense || dense.isSplat())
    return false;
  int64_t index = 0;
  for (const llvm::APFloat &value : dense.getValues<llvm::APFloat>()) {
    int64_t j = index % skv, i = (index / skv) % sq;
    ++index;
    double x = value.convertToDouble();
    if (j <= i ? x != 0.0 : !(x <= -1e30))
      return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// The rewrite
//===----------------------------------------------------------------------===//

bool hasOneUse(Value v) { return v.hasOneUse(); }

/// Matches the attention read by `softmax` and, on success, rewrites it.
bool fuse(mt::SoftmaxOp softmax) {
  Value probs = softmax.getResult();
  llvm::ArrayRef<int64_t> scoreShape = shapeOf(probs);
  if (scoreShape.size() != 4 || softmax.getAxis() != 3)
    return false;
  llvm::SetVector<Operation *> matched;
  matched.insert(softmax);

  // 1. The probabilities feed one matmul, maybe through where(isnan(p), 0, p).
  Value read = probs;
  if (!probs.hasOneUse()) {
    // Exactly an isnan and a where on it.
    mt::IsNanOp isnan;
    mt::WhereOp where;
    for (Operation *user : probs.getUsers()) {
      if (auto n = mlir::dyn_cast<mt::IsNanOp>(user))
        isnan = n;
      else if (auto w = mlir::dyn_cast<mt::WhereOp>(user))
        where = w;
      else
        return false;
    }
    if (!isnan || !where || !llvm::hasNItems(probs.getUsers(), 2) ||
        !isnan.getResult().hasOneUse() || where.getCond() != isnan.getResult() ||
        where.getY() != probs || where.getResult().getType() != probs.getType())
      return false;
    std::optional<double> zero = scalarConstant(where.getX());
    if (!zero || *zero != 0.0)
      return false;
    matched.insert(isnan);
    matched.insert(where);
    matched.insert(where.getX().getDefiningOp());
    read = where.getResult();
  }
  if (!read.hasOneUse())
    return false;
  auto pv = mlir::dyn_cast<mt::MatMulOp>(*read.getUsers().begin());
  if (!pv || pv.getA() != read || pv.getTransposeA())
    return false;
  matched.insert(pv);

  // 2. The causal mask.
  auto add = softmax.getX().getDefiningOp<mt::AddOp>();
  if (!add || !hasOneUse(add.getResult()))
    return false;
  Value scores = add.getLhs(), mask = add.getRhs();
  if (!isCausalMask(mask, scoreShape)) {
    std::swap(scores, mask);
    if (!isCausalMask(mask, scoreShape))
      return false;
  }
  if (scores.getType() != probs.getType())
    return false;
  matched.insert(add);
  llvm::SmallVector<Operation *> broadcasts;
  Value maskConstant = peelMaskBroadcasts(mask, broadcasts);
  matched.insert(broadcasts.begin(), broadcasts.end());
  matched.insert(maskConstant.getDefiningOp());

  // 3. Scalings of the scores, then q k^T.
  double scale = 1.0;
  while (auto s = asScaling(scores.getDefiningOp())) {
    if (!hasOneUse(scores))
      return false;
    matched.insert(scores.getDefiningOp());
    if (s->constant)
      matched.insert(s->constant);
    scale *= s->factor;
    scores = s->input;
  }
  auto qk = scores.getDefiningOp<mt::MatMulOp>();
  if (!qk || !hasOneUse(scores) || qk.getTransposeA())
    return false;
  matched.insert(qk);

  // 4. q, k and v.
  const int64_t batch = scoreShape[0], qHeads = scoreShape[1], sq = scoreShape[2],
                skv = scoreShape[3];
  if (sq > skv) // a causal row with no visible key; mt.attention does not take it
    return false;
  llvm::ArrayRef<int64_t> aShape = shapeOf(qk.getA());
  if (aShape.size() != 4)
    return false;
  const int64_t headDim = aShape[3];
  std::optional<Traced> q = trace(
      qk.getA(),
      [&](llvm::ArrayRef<int64_t> s) {
        return s == llvm::ArrayRef<int64_t>{batch, qHeads, sq, headDim};
      },
      [](llvm::ArrayRef<int64_t> s) { return std::optional<View>(View::contiguous(s)); });
  auto kvShape = [&](int64_t seq, int64_t dim) {
    return [=](llvm::ArrayRef<int64_t> s) {
      return s.size() == 4 && s[0] == batch && s[1] > 0 && qHeads % s[1] == 0 &&
             s[2] == seq && s[3] == dim;
    };
  };
  std::optional<Traced> k = trace(
      qk.getB(), kvShape(skv, headDim), [&](llvm::ArrayRef<int64_t> s) {
        return repeatedHeads(s, qHeads / s[1], /*swapped=*/!qk.getTransposeB());
      });
  llvm::ArrayRef<int64_t> outShape = shapeOf(pv.getResult());
  if (outShape.size() != 4 || outShape[3] != headDim)
    return false;
  std::optional<Traced> v = trace(
      pv.getB(), kvShape(skv, headDim), [&](llvm::ArrayRef<int64_t> s) {
        return repeatedHeads(s, qHeads / s[1], /*swapped=*/pv.getTransposeB());
      });
  if (!q || !k || !v || shapeOf(k->base)[1] != shapeOf(v->base)[1])
    return false;
  scale *= q->factor * k->factor;
  if (v->factor != 1.0 || !std::isfinite(scale))
    return false;
  for (const Traced *t : {&*q, &*k, &*v})
    matched.insert(t->ops.begin(), t->ops.end());

  mlir::OpBuilder b(pv);
  auto elementType = mlir::cast<mlir::RankedTensorType>(probs.getType()).getElementType();
  auto lseType = mlir::RankedTensorType::get({batch, qHeads, sq}, elementType);
  auto fused = b.create<mt::AttentionOp>(pv.getLoc(), pv.getResult().getType(), lseType,
                                         q->base, k->base, v->base,
                                         b.getF64FloatAttr(scale), b.getBoolAttr(true),
                                         /*bshd=*/mlir::IntegerAttr());
  pv.getResult().replaceAllUsesWith(fused.getResult());

  // Erase what no longer has users, users before the values they read.
  llvm::SmallVector<Operation *> pending(matched.begin(), matched.end());
  for (bool erased = true; erased;) {
    erased = false;
    for (Operation *&op : pending)
      if (op && op->use_empty()) {
        op->erase();
        op = nullptr;
        erased = true;
      }
  }
  return true;
}

struct FuseAttention : impl::FuseAttentionBase<FuseAttention> {
  void runOnOperation() override {
    llvm::SmallVector<mt::SoftmaxOp> anchors;
    getOperation().walk([&](mt::SoftmaxOp op) { anchors.push_back(op); });
    for (mt::SoftmaxOp op : anchors)
      fuse(op);
  }
};

} // namespace
} // namespace megatrain
