// matmul.cpp - batched matrix product on cuBLAS, with transpose flags and broadcast batch dims.
//
// Host code only (cuBLAS launches the kernels), so the C++ compiler builds it
// instead of nvcc.
//
// cuBLAS is column-major; a row-major [r, c] matrix is the column-major
// [c, r] one. So row-major Y = A B is computed as column-major Y^T = B^T A^T:
// gemm(opB, opA, n, m, k, b, a, y) with each operand's own transpose flag.
// Batch dims broadcast through per-operand batch strides (0 on a stretched
// dim); after coalescing, one strided-batched call covers the common cases (a
// rank-2 operand is stride 0), and a batch that cannot be one stride is
// walked on the host, one call per outer index. F32 runs in plain fp32
// (CUBLAS_DEFAULT_MATH, which never takes TF32 for Sgemm; the handle is set up
// in CudaBackend), F64 in fp64.
#include <cublas_v2.h>

#include <climits>

#include "CudaKernel.h"

namespace megatrain::runtime::cuda {
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

MatmulDims checkMatmul(const Launch& launch) {
  const Operand &a = launch.in[0], &b = launch.in[1], &y = launch.out[0];
  if (a.shape.rank < 2 || b.shape.rank < 2)
    fail(launch, "operands must have rank >= 2, got " + a.shape.str() + " and " + b.shape.str());
  MatmulDims d;
  d.transA = launch.attrs.getInt("transpose_a", 0) != 0;
  d.transB = launch.attrs.getInt("transpose_b", 0) != 0;
  const int64_t a0 = a.shape[a.shape.rank - 2], a1 = a.shape[a.shape.rank - 1];
  const int64_t b0 = b.shape[b.shape.rank - 2], b1 = b.shape[b.shape.rank - 1];
  d.m = d.transA ? a1 : a0;
  d.k = d.transA ? a0 : a1;
  const int64_t kb = d.transB ? b1 : b0;
  d.n = d.transB ? b0 : b1;
  if (d.k != kb)
    fail(launch, "inner dimensions differ: a " + a.shape.str() + (d.transA ? "^T" : "") + ", b " +
                     b.shape.str() + (d.transB ? "^T" : ""));
  if (!broadcastShapes(batchOf(a.shape), batchOf(b.shape), d.batch))
    fail(launch, "batch dims of " + a.shape.str() + " and " + b.shape.str() + " do not broadcast");
  Shape expected = d.batch;
  expected.dims[expected.rank++] = d.m;
  expected.dims[expected.rank++] = d.n;
  requireShape(launch, y, expected, "output");
  return d;
}

int toInt(const Launch& launch, int64_t value, const char* what) {
  if (value > INT_MAX) fail(launch, std::string(what) + " " + std::to_string(value) + " exceeds cuBLAS's int range");
  return static_cast<int>(value);
}

// One cuBLAS strided-batched call: `count` products of m x k by k x n.
struct Gemm {
  int m, n, k, count;
  bool transA, transB;
  int64_t strideA, strideB, strideY;  // elements between batch entries
};

void gemm(const Launch& launch, const Gemm& g, const float* a, const float* b, float* y) {
  const float one = 1.0f, zero = 0.0f;
  MT_CUBLAS_CHECK(cublasSgemmStridedBatched(
      launch.device->cublas, g.transB ? CUBLAS_OP_T : CUBLAS_OP_N, g.transA ? CUBLAS_OP_T : CUBLAS_OP_N,
      g.n, g.m, g.k, &one, b, g.transB ? g.k : g.n, g.strideB, a, g.transA ? g.m : g.k, g.strideA,
      &zero, y, g.n, g.strideY, g.count));
}

void gemm(const Launch& launch, const Gemm& g, const double* a, const double* b, double* y) {
  const double one = 1.0, zero = 0.0;
  MT_CUBLAS_CHECK(cublasDgemmStridedBatched(
      launch.device->cublas, g.transB ? CUBLAS_OP_T : CUBLAS_OP_N, g.transA ? CUBLAS_OP_T : CUBLAS_OP_N,
      g.n, g.m, g.k, &one, b, g.transB ? g.k : g.n, g.strideB, a, g.transA ? g.m : g.k, g.strideA,
      &zero, y, g.n, g.strideY, g.count));
}

template <typename T>
void matmulImpl(const Launch& launch, const MatmulDims& d) {
  const T* a = launch.in[0].as<const T>();
  const T* b = launch.in[1].as<const T>();
  T* y = launch.out[0].as<T>();

  // Element strides of a, b and y over the batch dims of y.
  StridedSpace<3> batch;
  batch.rank = d.batch.rank;
  for (int i = 0; i < d.batch.rank; ++i) batch.dims[i] = d.batch[i];
  broadcastStrides(batchOf(launch.in[0].shape), d.batch, batch.strides[0]);
  broadcastStrides(batchOf(launch.in[1].shape), d.batch, batch.strides[1]);
  contiguousStrides(d.batch, batch.strides[2]);
  for (int i = 0; i < batch.rank; ++i) {
    batch.strides[0][i] *= d.m * d.k;
    batch.strides[1][i] *= d.k * d.n;
    batch.strides[2][i] *= d.m * d.n;
  }
  coalesce(batch);

  int64_t m = d.m, count = batch.rank ? batch.dims[batch.rank - 1] : 1;
  // A batch of row-major a against one shared b is a single taller product:
  // [count * m, k] x [k, n] (a's and y's matrices lie back to back).
  if (batch.rank == 1 && batch.strides[1][0] == 0 && !d.transA && batch.strides[0][0] == d.m * d.k) {
    m *= count;
    count = 1;
    batch.rank = 0;
  }
  Gemm g;
  g.m = toInt(launch, m, "m");
  g.n = toInt(launch, d.n, "n");
  g.k = toInt(launch, d.k, "k");
  g.count = toInt(launch, count, "batch count");
  g.transA = d.transA;
  g.transB = d.transB;
  const int inner = batch.rank - 1;  // the dim one call strides over; outer dims are walked here
  g.strideA = inner >= 0 ? batch.strides[0][inner] : 0;
  g.strideB = inner >= 0 ? batch.strides[1][inner] : 0;
  g.strideY = inner >= 0 ? batch.strides[2][inner] : 0;

  StridedSpace<3> outer = batch;
  outer.rank = inner > 0 ? inner : 0;
  int64_t calls = 1;
  for (int i = 0; i < outer.rank; ++i) calls *= outer.dims[i];
  for (int64_t c = 0; c < calls; ++c) {
    int64_t at[3] = {0, 0, 0};
    int64_t rest = c;
    for (int i = outer.rank - 1; i >= 0; --i) {
      const int64_t index = rest % outer.dims[i];
      rest /= outer.dims[i];
      for (int t = 0; t < 3; ++t) at[t] += index * outer.strides[t][i];
    }
    gemm(launch, g, a + at[0], b + at[1], y + at[2]);
  }
}

void matmul(const Launch& launch) {
  const DType dtype = floatingType(launch, inMask(0) | inMask(1) | outMask(0));
  const MatmulDims d = checkMatmul(launch);
  const Operand& y = launch.out[0];
  if (y.shape.elements() == 0) return;
  if (d.k == 0) {  // an empty sum: cuBLAS need not write y, so zero it here
    MT_CUDA_CHECK(cudaMemsetAsync(y.data, 0, static_cast<size_t>(y.shape.elements()) * dtypeBytes(dtype),
                                  launch.device->stream));
    return;
  }
  dispatchFloating(dtype, [&](auto tag) { matmulImpl<decltype(tag)>(launch, d); });
}

}  // namespace

void addMatmulKernels(KernelTable& table) { table.add("matmul", 2, 1, matmul); }

}  // namespace megatrain::runtime::cuda
