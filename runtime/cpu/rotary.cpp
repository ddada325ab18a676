// rotary.cpp - rotary position embedding in the rotate-half form and its gradient.
//
// y = x * cos + rotate_half(x) * sin, rotate_half(x) = concat(-x2, x1) over
// the halves of x's last dim; cos and sin broadcast to x and keep its last
// dim. The adjoint (rotary_grad, from dy): dx = dy * cos - rotate_half(dy * sin),
// which reads sin at the partner position. Products run in double. With
// `bshd` x lies as [B, S, H, D] and the tables are read through x's
// [B, H, S, D] form (rotaryTableStrides): each element's arithmetic is the
// same as for the transposed x.
// Element types (rotaryTypes, ShapeRules.h): all f32, all f64, or x and y
// each f32 or bf16 with f32 tables. A bf16 x is read exactly and a bf16 y is
// the f32 result rounded to bf16 (narrowTo): bit for bit the cast of what
// the f32 kernel writes for the widened x.
#include "CpuKernel.h"

namespace megatrain::runtime::cpu {
namespace {

// grad = false: out = x * cos + rotate_half(x) * sin.
// grad = true:  out = x * cos - rotate_half(x * sin), x being dy.
// X: x's element, T: the tables', Y: y's (float, double or Bf16).
template <typename X, typename T, typename Y>
void rotaryImpl(const KernelArgs& args, const int64_t* cs, const int64_t* ss, bool grad) {
  const X* x = args.in[0].as<const X>();
  const T* cos = args.in[1].as<const T>();
  const T* sin = args.in[2].as<const T>();
  Y* y = args.out[0].as<Y>();
  const Shape& s = args.in[0].shape;
  const int64_t half = s[s.rank - 1] / 2;
  walk(s, cs, ss, [&](int64_t i, int64_t oc, int64_t os) {
    const bool low = i % (2 * half) < half;
    const int64_t partner = low ? i + half : i - half;
    const double sign = low ? -1.0 : 1.0;
    double rotated;
    if (!grad) {
      rotated = sign * static_cast<double>(x[partner]) * static_cast<double>(sin[os]);
    } else {
      const int64_t partnerSin = low ? os + half : os - half;  // sin's last dim is dense
      rotated = -sign * static_cast<double>(x[partner]) * static_cast<double>(sin[partnerSin]);
    }
    y[i] = narrowTo<Y>(static_cast<double>(x[i]) * static_cast<double>(cos[oc]) + rotated);
  });
}

// Calls f(tag) with a float or a Bf16 for an F32 or a BF16 operand.
template <typename F>
void dispatchF32OrBf16(DType dtype, F&& f) {
  if (dtype == DType::BF16) f(Bf16{});
  else f(float{});
}

void run(const KernelArgs& args, bool grad) {
  const RotaryTypes types = rotaryTypes(args);
  int64_t cs[kMaxRank], ss[kMaxRank];
  rotaryTableStrides(args, args.in[1].shape, cs);
  rotaryTableStrides(args, args.in[2].shape, ss);
  if (types.tables == DType::F64) return rotaryImpl<double, double, double>(args, cs, ss, grad);
  dispatchF32OrBf16(types.x, [&](auto x) {
    dispatchF32OrBf16(types.result, [&](auto y) { rotaryImpl<decltype(x), float, decltype(y)>(args, cs, ss, grad); });
  });
}

void rotary(const KernelArgs& args) { run(args, false); }
void rotaryGrad(const KernelArgs& args) { run(args, true); }

}  // namespace

void addRotaryKernels(CpuKernelRegistry& registry) {
  registry.add("rotary", {rotary});
  registry.add("rotary_grad", {rotaryGrad});
}

}  // namespace megatrain::runtime::cpu
