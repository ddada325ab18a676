//===- FuseActivations.cpp - mt-fuse-activations: SiLU, SwiGLU, GELU compositions to fused ops ===//
//
// One walk in program order; at each op, in this order:
//   1. x * sigmoid(x) (either side)                    -> mt.silu(x)
//   2. silu(g) * u (either side; g, u, product one type) -> mt.swiglu(g, u)
//   3. GELU, with p = 1 + f(x) (either side of the add):
//        (0.5 x) * p,  0.5 (x * p),  x * (0.5 p)       -> mt.gelu(x)
//      where 0.5 v is v * 0.5, 0.5 * v or mt.scale, and
//        f = erf(x / sqrt 2)  (x * 0.7071..., or x / 1.4142...): "none"
//        f = tanh(sqrt(2/pi) (x + 0.044715 x^3))                  : "tanh"
//      with x^3 as powf 3, x * (x * x) or (x * x) * x, and the additions
//      and scalar products on either side.
// SwiGLU sees the SiLU of rule 1 because the gate product comes later in the
// block. Every rewritten op precedes the op being visited, so the walk's
// next op survives. Every intermediate must be used by the pattern alone.
//
//===----------------------------------------------------------------------===//
#include "FusionMatch.h"

#include "megatrain/Passes/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

namespace megatrain {
#define GEN_PASS_DEF_FUSEACTIVATIONS
#include "megatrain/Passes/Passes.h.inc"
} // namespace megatrain

using namespace mlir;
using namespace megatrain;
using namespace megatrain::fusion;

namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluCubic = 0.044715;

bool isFloatTensor(Value v) {
  return isa<FloatType>(cast<RankedTensorType>(v.getType()).getElementType());
}

bool near(double value, double expected) {
  return std::abs(value - expected) <= kConstantTolerance * std::abs(expected);
}

/// The pairs (a, b) and (b, a) of a binary op's operands.
template <typename OpTy>
std::array<std::pair<Value, Value>, 2> bothWays(OpTy op) {
  return {std::pair(op.getLhs(), op.getRhs()), std::pair(op.getRhs(), op.getLhs())};
}

/// Rewrites `root` (a one-result op) to `fused` and erases `ops` (root
/// first, each op before the ones it reads).
void replacePattern(IRRewriter &rewriter, Operation *root, Value fused,
                    ArrayRef<Operation *> ops) {
  rewriter.replaceAllUsesWith(root->getResult(0), fused);
  erasePattern(rewriter, ops);
}

bool fuseSilu(IRRewriter &rewriter, mt::MulOp mul) {
  for (auto [x, s] : bothWays(mul)) {
    auto sigmoid = singleUseDef<mt::SigmoidOp>(s);
    if (!sigmoid || sigmoid.getX() != x || x.getType() != mul.getType() || !isFloatTensor(x))
      continue;
    rewriter.setInsertionPoint(mul);
    Value fused = rewriter.create<mt::SiluOp>(mul.getLoc(), x);
    replacePattern(rewriter, mul, fused, {mul, sigmoid});
    return true;
  }
  return false;
}

bool fuseSwiglu(IRRewriter &rewriter, mt::MulOp mul) {
  for (auto [s, up] : bothWays(mul)) {
    auto silu = singleUseDef<mt::SiluOp>(s);
    if (!silu || up.getType() != mul.getType() || silu.getType() != mul.getType())
      continue;
    rewriter.setInsertionPoint(mul);
    Value fused = rewriter.create<mt::SwigluOp>(mul.getLoc(), silu.getX(), up);
    replacePattern(rewriter, mul, fused, {mul, silu});
    return true;
  }
  return false;
}

/// v = c * w for a scalar constant c near `expected`, v used once; returns w
/// and appends v's op.
Value scaledBy(Value v, double expected, SmallVectorImpl<Operation *> &ops) {
  if (!v.hasOneUse())
    return nullptr;
  double c;
  Operation *op = v.getDefiningOp();
  Value w = matchScalarMultiple(op, c);
  if (!w || !near(c, expected))
    return nullptr;
  ops.push_back(op);
  return w;
}

/// v = x^3: powf 3, x * (x * x) or (x * x) * x, used once.
bool isCubeOf(Value v, Value x, SmallVectorImpl<Operation *> &ops) {
  if (!v.hasOneUse() || v.getType() != x.getType())
    return false;
  if (auto pow = v.getDefiningOp<mt::PowfOp>()) {
    if (pow.getX() != x || pow.getExponent().convertToDouble() != 3.0)
      return false;
    ops.push_back(pow);
    return true;
  }
  auto mul = v.getDefiningOp<mt::MulOp>();
  if (!mul)
    return false;
  for (auto [a, b] : bothWays(mul)) {
    auto square = singleUseDef<mt::MulOp>(b);
    if (a == x && square && square.getLhs() == x && square.getRhs() == x) {
      ops.append({mul, square});
      return true;
    }
  }
  return false;
}

/// f = erf(x / sqrt 2) or tanh(sqrt(2/pi) (x + 0.044715 x^3)), used once:
/// sets x and the approximation, appends the ops.
bool matchGeluCore(Value f, Value &x, StringRef &approximate,
                   SmallVectorImpl<Operation *> &ops) {
  if (auto erf = singleUseDef<mt::ErfOp>(f)) {
    ops.push_back(erf);
    x = scaledBy(erf.getX(), kInvSqrt2, ops);
    approximate = "none";
    return bool(x);
  }
  auto tanh = singleUseDef<mt::TanhOp>(f);
  if (!tanh)
    return false;
  ops.push_back(tanh);
  Value sum = scaledBy(tanh.getX(), kSqrt2OverPi, ops);
  auto add = sum ? singleUseDef<mt::AddOp>(sum) : nullptr;
  if (!add || add.getType() != tanh.getType())
    return false;
  ops.push_back(add);
  for (auto [candidate, term] : bothWays(add)) {
    size_t mark = ops.size();
    Value cube = scaledBy(term, kGeluCubic, ops);
    if (cube && isCubeOf(cube, candidate, ops)) {
      x = candidate;
      approximate = "tanh";
      return true;
    }
    ops.resize(mark);
  }
  return false;
}

/// p = 1 + f(x) (either side), used once, with f a GELU core.
bool matchOnePlusCore(Value p, Value &x, StringRef &approximate,
                      SmallVectorImpl<Operation *> &ops) {
  auto add = singleUseDef<mt::AddOp>(p);
  if (!add)
    return false;
  for (auto [f, one] : bothWays(add)) {
    if (!isScalarConstant(one, 1.0) || f.getType() != add.getType())
      continue;
    size_t mark = ops.size();
    ops.push_back(add);
    if (matchGeluCore(f, x, approximate, ops))
      return true;
    ops.resize(mark);
  }
  return false;
}

bool fuseGelu(IRRewriter &rewriter, Operation *root) {
  if (root->getNumResults() != 1)
    return false;
  Value result = root->getResult(0);
  SmallVector<Operation *> ops{root};
  Value x;
  StringRef approximate;
  auto done = [&]() {
    if (!x || x.getType() != result.getType() || !isFloatTensor(x))
      return false;
    rewriter.setInsertionPoint(root);
    Value fused = rewriter.create<mt::GeluOp>(root->getLoc(), x,
                                              rewriter.getStringAttr(approximate));
    replacePattern(rewriter, root, fused, ops);
    return true;
  };

  // 0.5 (x * p), the 0.5 outermost.
  double c;
  if (Value inner = matchScalarMultiple(root, c); inner && near(c, 0.5)) {
    if (auto mul = singleUseDef<mt::MulOp>(inner))
      for (auto [candidate, p] : bothWays(mul)) {
        ops.resize(1);
        ops.push_back(mul);
        if (matchOnePlusCore(p, x, approximate, ops) && x == candidate)
          return done();
        x = nullptr;
      }
    ops.resize(1);
  }
  // (0.5 x) * p and x * (0.5 p).
  auto mul = dyn_cast<mt::MulOp>(root);
  if (!mul)
    return false;
  for (auto [a, b] : bothWays(mul)) {
    // a = 0.5 x, b = p.
    ops.resize(1);
    Value half = scaledBy(a, 0.5, ops);
    if (half && matchOnePlusCore(b, x, approximate, ops) && x == half)
      return done();
    // a = x, b = 0.5 p.
    ops.resize(1);
    x = nullptr;
    Value p = scaledBy(b, 0.5, ops);
    if (p && matchOnePlusCore(p, x, approximate, ops) && x == a)
      return done();
    x = nullptr;
  }
  return false;
}

struct FuseActivations : megatrain::impl::FuseActivationsBase<FuseActivations> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    for (Block &block : getOperation().getBody())
      for (Operation &op : llvm::make_early_inc_range(block)) {
        if (auto mul = dyn_cast<mt::MulOp>(op))
          if (fuseSilu(rewriter, mul) || fuseSwiglu(rewriter, mul))
            continue;
        if (isa<mt::MulOp, mt::ScaleOp, mt::DivOp>(op))
          fuseGelu(rewriter, &op);
      }
  }
};

} // namespace
