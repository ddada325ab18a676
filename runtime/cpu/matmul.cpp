// matmul.cpp - batched matrix product with transpose flags and broadcast batch dims.
//
// y[..., m, n] = sum_k A[..., m, k] B[..., k, n], with A = a or a^T and B = b or
// b^T on the last two dims. Every output sums over k in increasing order in
// double, whichever loop order is used, so results are bitwise reproducible.
#include "CpuKernel.h"

namespace megatrain::runtime::cpu {
namespace {

struct MatmulDims {
  int64_t m, n, k;
  bool transA, transB;
  Shape batch;  // broadcast batch shape of y
};

Shape batchOf(const Shape& shape) {
  Shape batch = shape;
  batch.rank = shape.rank - 2;
  return batch;
}

MatmulDims checkMatmul(const KernelArgs& args) {
  const Operand &a = args.in[0], &b = args.in[1], &y = args.out[0];
  if (a.shape.rank < 2 || b.shape.rank < 2)
    fail(args, "operands must have rank >= 2, got " + a.shape.str() + " and " + b.shape.str());
  MatmulDims d;
  d.transA = args.attrs.getInt("transpose_a", 0) != 0;
  d.transB = args.attrs.getInt("transpose_b", 0) != 0;
  const int64_t a0 = a.shape[a.shape.rank - 2], a1 = a.shape[a.shape.rank - 1];
  const int64_t b0 = b.shape[b.shape.rank - 2], b1 = b.shape[b.shape.rank - 1];
  d.m = d.transA ? a1 : a0;
  d.k = d.transA ? a0 : a1;
  const int64_t kb = d.transB ? b1 : b0;
  d.n = d.transB ? b0 : b1;
  if (d.k != kb)
    fail(args, "inner dimensions differ: a " + a.shape.str() + (d.transA ? "^T" : "") + ", b " +
                   b.shape.str() + (d.transB ? "^T" : ""));
  if (!broadcastShapes(batchOf(a.shape), batchOf(b.shape), d.batch))
    fail(args, "batch dims of " + a.shape.str() + " and " + b.shape.str() + " do not broadcast");
  Shape expected = d.batch;
  expected.dims[expected.rank++] = d.m;
  expected.dims[expected.rank++] = d.n;
  requireShape(args, y, expected, "output");
  return d;
}

template <typename T>
void matmulImpl(const KernelArgs& args, const MatmulDims& d) {
  const T* a = args.in[0].as<const T>();
  const T* b = args.in[1].as<const T>();
  T* y = args.out[0].as<T>();
  const int64_t m = d.m, n = d.n, k = d.k;
  // Element strides of A (m, k) and B (k, n) within one matrix.
  const int64_t sam = d.transA ? 1 : k, sak = d.transA ? m : 1;
  const int64_t sbk = d.transB ? 1 : n, sbn = d.transB ? k : 1;

  int64_t batchA[kMaxRank], batchB[kMaxRank];
  broadcastStrides(batchOf(args.in[0].shape), d.batch, batchA);
  broadcastStrides(batchOf(args.in[1].shape), d.batch, batchB);
  for (int i = 0; i < d.batch.rank; ++i) {
    batchA[i] *= m * k;
    batchB[i] *= k * n;
  }
  double* acc = reinterpret_cast<double*>(args.scratch);  // [n]

  walk(d.batch, batchA, batchB, [&](int64_t batch, int64_t offA, int64_t offB) {
    const T* pa = a + offA;
    const T* pb = b + offB;
    T* py = y + batch * m * n;
    if (sbn == 1) {
      // Rows of B are contiguous: stream them into a row of accumulators.
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) acc[j] = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double av = pa[i * sam + p * sak];
          const T* row = pb + p * sbk;
          for (int64_t j = 0; j < n; ++j) acc[j] += av * static_cast<double>(row[j]);
        }
        for (int64_t j = 0; j < n; ++j) py[i * n + j] = static_cast<T>(acc[j]);
      }
    } else {
      // B is transposed: each output is a dot product of two k-vectors.
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < k; ++p)
            sum += static_cast<double>(pa[i * sam + p * sak]) * static_cast<double>(pb[j * sbn + p * sbk]);
          py[i * n + j] = static_cast<T>(sum);
        }
    }
  });
}

void matmul(const KernelArgs& args) {
  const plan::DType dtype = floatingType(args, inMask(0) | inMask(1) | outMask(0));
  const MatmulDims d = checkMatmul(args);
  dispatchFloating(dtype, [&](auto tag) { matmulImpl<decltype(tag)>(args, d); });
}

size_t matmulScratch(const KernelArgs& args) {
  const Shape& y = args.out[0].shape;
  return y.rank >= 1 ? static_cast<size_t>(y.dims[y.rank - 1]) * sizeof(double) : 0;
}

}  // namespace

void addMatmulKernels(KernelRegistry& registry) {
  registry.add("matmul", 2, 1, matmul, matmulScratch);
}

}  // namespace megatrain::runtime::cpu
