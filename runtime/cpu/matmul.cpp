// matmul.cpp - batched matrix product with transpose flags and broadcast batch dims, and matmul_add (an addend in the epilogue).
//
// y[..., m, n] = sum_k A[..., m, k] B[..., k, n], with A = a or a^T and B = b or
// b^T on the last two dims. Every output sums over k in increasing order in
// double, whichever loop order is used, so results are bitwise reproducible.
//
// Mixed precision: a and b may both be BF16 with an F32 y (the bf16 plans of
// --precision bf16): each operand is widened to double, accumulated in double
// as above and rounded once to f32. A BF16 y (matmul only) is that f32 value
// rounded to bf16 by floatToBf16 (narrowTo), as `cast` rounds it: bit for bit
// the f32-result matmul followed by cast (docs/ops.md). The attribute
// precision ("tf32", "bf16") is read by the CUDA kernel only; on the CPU
// every product is exact.
//
// matmul_add (y = A B + r, r of y's dtype and shape, or a bias [n] added to
// every row): each output is the product rounded to y's type, then r's
// element added in y's type, the bits of matmul followed by add; the CUDA
// kernel adds r to its fp32 accumulator the same way (docs/ops.md "Matmul
// epilogues").
//
// matmul_bias_gelu (f32 y and z): z is matmul_add's value with the bias, y
// the tanh GELU of z by gelu's own element function (ActivationMath.h), so
// both are the bits of matmul_add followed by gelu.
//
// matmul_gelu_grad (f32 z and dz): the product as matmul writes it, then dz =
// product * gelu_tanh'(z) by gelu_grad's own element function and in its
// order (dy * slope(x)), so dz is the bits of matmul followed by gelu_grad.
#include <string>
#include <string_view>
#include <type_traits>

#include "ActivationMath.h"
#include "CpuKernel.h"

namespace megatrain::runtime::cpu {
namespace {

// The product into y (out[0]'s shape); `r`, when not null, is the addend of
// matmul_add: y's shape, or a bias [n].
template <typename T, typename Y = T>
void matmulImpl(const KernelArgs& args, const MatmulDims& d, const Y* r, bool bias, Y* y) {
  const T* a = args.in[0].as<const T>();
  const T* b = args.in[1].as<const T>();
  // The product rounded to Y, plus r's element in Y when there is an addend
  // (never with a bf16 y: matmul_add's rule refuses one).
  auto finish = [r, bias](double sum, int64_t at, int64_t column) {
    const Y product = narrowTo<Y>(sum);
    if constexpr (std::is_same_v<Y, Bf16>) return product;
    else return r ? static_cast<Y>(product + r[bias ? column : at]) : product;
  };
  const int64_t m = d.m, n = d.n, k = d.k;
  // Element strides of A (m, k) and B (k, n) within one matrix.
  const int64_t sam = d.transA ? 1 : k, sak = d.transA ? m : 1;
  const int64_t sbk = d.transB ? 1 : n, sbn = d.transB ? k : 1;

  int64_t batchA[kMaxRank], batchB[kMaxRank];
  broadcastStrides(matmulBatchOf(args.in[0].shape), d.batch, batchA);
  broadcastStrides(matmulBatchOf(args.in[1].shape), d.batch, batchB);
  for (int i = 0; i < d.batch.rank; ++i) {
    batchA[i] *= m * k;
    batchB[i] *= k * n;
  }
  double* acc = reinterpret_cast<double*>(args.scratch);  // [n]

  walk(d.batch, batchA, batchB, [&](int64_t batch, int64_t offA, int64_t offB) {
    const T* pa = a + offA;
    const T* pb = b + offB;
    const int64_t offY = batch * m * n;
    Y* py = y + offY;
    if (sbn == 1) {
      // Rows of B are contiguous: stream them into a row of accumulators.
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) acc[j] = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double av = static_cast<double>(pa[i * sam + p * sak]);
          const T* row = pb + p * sbk;
          for (int64_t j = 0; j < n; ++j) acc[j] += av * static_cast<double>(row[j]);
        }
        for (int64_t j = 0; j < n; ++j) py[i * n + j] = finish(acc[j], offY + i * n + j, j);
      }
    } else {
      // B is transposed: each output is a dot product of two k-vectors.
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < k; ++p)
            sum += static_cast<double>(pa[i * sam + p * sak]) * static_cast<double>(pb[j * sbn + p * sbk]);
          py[i * n + j] = finish(sum, offY + i * n + j, j);
        }
    }
  });
}

// matmul (2 inputs) and matmul_add (3: the addend r last).
void matmul(const KernelArgs& args) {
  const bool addend = args.numIn == 3;
  const bool bias = addend && matmulAddendIsBias(args);
  if (args.in[0].dtype == DType::BF16 || args.in[1].dtype == DType::BF16) {
    requireDType(args, args.in[0], DType::BF16, "a");
    requireDType(args, args.in[1], DType::BF16, "b");
    const MatmulDims d = matmulDims(args);
    if (args.out[0].dtype == DType::BF16 && !addend) {  // the f32 result rounded to bf16
      matmulImpl<Bf16, Bf16>(args, d, nullptr, false, args.out[0].as<Bf16>());
      return;
    }
    requireDType(args, args.out[0], DType::F32, "output");
    if (addend) requireDType(args, args.in[2], DType::F32, "r");
    matmulImpl<Bf16, float>(args, d, addend ? args.in[2].as<const float>() : nullptr, bias, args.out[0].as<float>());
    return;
  }
  const DType dtype = cpuFloatingType(args, inMask(0) | inMask(1) | outMask(0) | (addend ? inMask(2) : 0));
  const MatmulDims d = matmulDims(args);
  dispatchFloating(dtype, [&](auto tag) {
    using T = decltype(tag);
    matmulImpl<T>(args, d, addend ? args.in[2].as<const T>() : nullptr, bias, args.out[0].as<T>());
  });
}

// matmul_bias_gelu: z = matmul_add(a, b, bias) into out[1], then y = gelu_tanh(z).
void matmulBiasGelu(const KernelArgs& args) {
  const MatmulDims d = matmulDims(args);  // the rule has made the bias, y and z f32
  const float* bias = args.in[2].as<const float>();
  float* y = args.out[0].as<float>();
  float* z = args.out[1].as<float>();
  if (args.in[0].dtype == DType::BF16 || args.in[1].dtype == DType::BF16) {
    requireDType(args, args.in[0], DType::BF16, "a");
    requireDType(args, args.in[1], DType::BF16, "b");
    matmulImpl<Bf16, float>(args, d, bias, true, z);
  } else {
    requireDType(args, args.in[0], DType::F32, "a");
    requireDType(args, args.in[1], DType::F32, "b");
    matmulImpl<float>(args, d, bias, true, z);
  }
  const int64_t n = args.out[0].shape.elements();
  for (int64_t i = 0; i < n; ++i) y[i] = geluTanh(z[i]);
}

// matmul_gelu_grad: the product into out[0], then dz = product * gelu_tanh'(z) in place.
void matmulGeluGrad(const KernelArgs& args) {
  const MatmulDims d = matmulDims(args);  // the rule has made z and dz f32
  const float* z = args.in[2].as<const float>();
  float* dz = args.out[0].as<float>();
  if (args.in[0].dtype == DType::BF16 || args.in[1].dtype == DType::BF16) {
    requireDType(args, args.in[0], DType::BF16, "a");
    requireDType(args, args.in[1], DType::BF16, "b");
    matmulImpl<Bf16, float>(args, d, static_cast<const float*>(nullptr), false, dz);
  } else {
    requireDType(args, args.in[0], DType::F32, "a");
    requireDType(args, args.in[1], DType::F32, "b");
    matmulImpl<float>(args, d, static_cast<const float*>(nullptr), false, dz);
  }
  const int64_t n = args.out[0].shape.elements();
  for (int64_t i = 0; i < n; ++i) dz[i] = dz[i] * geluTanhSlope(z[i]);
}

size_t matmulScratch(const KernelArgs& args) {
  const Shape& y = args.out[0].shape;
  return y.rank >= 1 ? static_cast<size_t>(y.dims[y.rank - 1]) * sizeof(double) : 0;
}

}  // namespace

void addMatmulKernels(CpuKernelRegistry& registry) {
  registry.add("matmul", {matmul, matmulScratch});
  registry.add("matmul_add", {matmul, matmulScratch});
  registry.add("matmul_bias_gelu", {matmulBiasGelu, matmulScratch});
  registry.add("matmul_gelu_grad", {matmulGeluGrad, matmulScratch});
}

}  // namespace megatrain::runtime::cpu
