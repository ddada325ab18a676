// where.cpp - where: cond ? x : y, numpy broadcasting of all three operands.
#include "CpuKernel.h"
#include "megatrain/plan/DType.h"

namespace megatrain::runtime::cpu {
namespace {

// ---- kernel ----

// out[i] = cond[oc(i)] ? x[ox(i)] : y[oy(i)]; out row-major over `shape`, the
// three inputs read through per-dim strides (0 on stretched dims). E is an
// unsigned type of the element's size: where only moves data.
template <typename E>
void whereImpl(const uint8_t* cond, const E* x, const E* y, E* out, const Shape& shape,
               const int64_t* sc, const int64_t* sx, const int64_t* sy) {
  const int64_t n = shape.elements();
  int64_t index[kMaxRank] = {};
  int64_t oc = 0, ox = 0, oy = 0;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = cond[oc] ? x[ox] : y[oy];
    for (int d = shape.rank - 1; d >= 0; --d) {
      oc += sc[d];
      ox += sx[d];
      oy += sy[d];
      if (++index[d] < shape.dims[d]) break;
      oc -= sc[d] * shape.dims[d];
      ox -= sx[d] * shape.dims[d];
      oy -= sy[d] * shape.dims[d];
      index[d] = 0;
    }
  }
}

// ---- launcher ----

// cond [bool], x, y (one dtype, any) -> out (x's dtype, the broadcast shape).
void where(const KernelArgs& args) {
  const Operand &cond = args.in[0], &x = args.in[1], &y = args.in[2], &out = args.out[0];
  requireDType(args, cond, plan::BOOL, "condition");
  requireDType(args, y, x.dtype, "input");
  requireDType(args, out, x.dtype, "output");
  if (dtypeSize(x.dtype) == 0) fail(args, "input dtype is unspecified");
  Shape xy, expected;
  if (!broadcastShapes(x.shape, y.shape, xy) || !broadcastShapes(cond.shape, xy, expected))
    fail(args, "shapes " + cond.shape.str() + ", " + x.shape.str() + " and " + y.shape.str() +
                   " do not broadcast");
  requireShape(args, out, expected, "output");
  int64_t sc[kMaxRank], sx[kMaxRank], sy[kMaxRank];
  broadcastStrides(cond.shape, out.shape, sc);
  broadcastStrides(x.shape, out.shape, sx);
  broadcastStrides(y.shape, out.shape, sy);
  dispatchBytes(dtypeSize(x.dtype), [&](auto tag) {
    using E = decltype(tag);
    whereImpl(cond.as<const uint8_t>(), x.as<const E>(), y.as<const E>(), out.as<E>(), out.shape, sc,
              sx, sy);
  });
}

}  // namespace

void addWhereKernels(KernelRegistry& registry) { registry.add("where", 3, 1, where); }

}  // namespace megatrain::runtime::cpu
