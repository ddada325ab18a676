// rms_norm.cpp - RMS normalization over dims [axis, rank) times a weight, and its gradient.
//
// x is viewed as [rows, d] with d = prod(x.shape[axis:]); weight has shape
// x.shape[axis:]. Per row: rstd = 1/sqrt(mean(x^2) + eps), n = x * rstd,
// y = n * weight (Llama's, Qwen2's and Mistral's RMSNorm). Sums run in double.
// rms_norm_grad_add is the gradient with the residual's add (and its bf16
// cast) on dx, in the same pass.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "CpuKernel.h"
#include "megatrain/plan/Bf16.h"

namespace megatrain::runtime::cpu {
namespace {

// 1/sqrt(mean(x^2) + epsilon) of one row of d elements.
template <typename T>
double rowRstd(const T* x, int64_t d, double epsilon) {
  double squares = 0;
  for (int64_t j = 0; j < d; ++j) squares += static_cast<double>(x[j]) * static_cast<double>(x[j]);
  return 1.0 / std::sqrt(squares / static_cast<double>(d) + epsilon);
}

// The result element as T, or (Y = uint16_t) as the bf16 bits of its f32
// value: what cast writes for the f32 result.
template <typename T, typename Y>
Y storeAs(double value) {
  if constexpr (std::is_same_v<Y, uint16_t>)
    return floatToBf16(static_cast<float>(value));
  else
    return static_cast<T>(value);
}

template <typename T, typename Y = T>
void rmsNormImpl(const KernelArgs& args, const NormRows& r) {
  const T* x = args.in[0].as<const T>();
  const T* weight = args.in[1].as<const T>();
  Y* y = args.out[0].as<Y>();
  for (int64_t row = 0; row < r.rows; ++row) {
    const T* xr = x + row * r.d;
    Y* yr = y + row * r.d;
    const double rstd = rowRstd(xr, r.d, r.epsilon);
    for (int64_t j = 0; j < r.d; ++j)
      yr[j] = storeAs<T, Y>(static_cast<double>(xr[j]) * rstd * static_cast<double>(weight[j]));
  }
}

// With g = dy * weight and n = x * rstd: dx = rstd * (g - n * mean(g * n))
// per row; dweight = sum over rows of dy * n. With Add (rms_norm_grad_add)
// dx is that value rounded to T plus addend, one T addition as add makes it,
// and a third output holds the sum's bf16 bits as cast rounds them: the
// unfused kernels' bits.
template <typename T, bool Add = false>
void rmsNormGradImpl(const KernelArgs& args, const NormRows& r) {
  const T* x = args.in[0].as<const T>();
  const T* weight = args.in[1].as<const T>();
  const T* dy = args.in[2].as<const T>();
  const T* addend = Add ? args.in[3].as<const T>() : nullptr;
  T* dx = args.out[0].as<T>();
  uint16_t* dxBf16 = Add && args.numOut == 3 ? args.out[2].as<uint16_t>() : nullptr;  // f32 T only (the rule)
  double* dweight = reinterpret_cast<double*>(args.scratch);  // [d]
  for (int64_t j = 0; j < r.d; ++j) dweight[j] = 0;

  for (int64_t row = 0; row < r.rows; ++row) {
    const T* xr = x + row * r.d;
    const T* dyr = dy + row * r.d;
    T* dxr = dx + row * r.d;
    const double rstd = rowRstd(xr, r.d, r.epsilon);
    double sumGN = 0;
    for (int64_t j = 0; j < r.d; ++j) {
      const double n = static_cast<double>(xr[j]) * rstd;
      sumGN += static_cast<double>(dyr[j]) * static_cast<double>(weight[j]) * n;
      dweight[j] += static_cast<double>(dyr[j]) * n;
    }
    const double meanGN = sumGN / static_cast<double>(r.d);
    for (int64_t j = 0; j < r.d; ++j) {
      const double n = static_cast<double>(xr[j]) * rstd;
      const double g = static_cast<double>(dyr[j]) * static_cast<double>(weight[j]);
      T value = static_cast<T>(rstd * (g - n * meanGN));
      if constexpr (Add) {
        const int64_t at = row * r.d + j;
        value = addend[at] + value;
        if (dxBf16) dxBf16[at] = floatToBf16(static_cast<float>(value));
      }
      dxr[j] = value;
    }
  }
  T* out = args.out[1].as<T>();
  for (int64_t j = 0; j < r.d; ++j) out[j] = static_cast<T>(dweight[j]);
}

// y has x's type, or is bf16 from f32 operands (mt-fold-norm-casts).
void rmsNorm(const KernelArgs& args) {
  if (args.out[0].dtype == DType::BF16) {
    if (cpuFloatingType(args, inMask(0) | inMask(1)) != DType::F32)
      fail(args, "a bf16 output needs f32 x and weight");
    rmsNormImpl<float, uint16_t>(args, rmsNormRows(args));
    return;
  }
  const DType dtype = cpuFloatingType(args, inMask(0) | inMask(1) | outMask(0));
  const NormRows r = rmsNormRows(args);
  dispatchFloating(dtype, [&](auto tag) { rmsNormImpl<decltype(tag)>(args, r); });
}

void rmsNormGrad(const KernelArgs& args) {
  const DType dtype =
      cpuFloatingType(args, inMask(0) | inMask(1) | inMask(2) | outMask(0) | outMask(1));
  const NormRows r = rmsNormGradRows(args);
  dispatchFloating(dtype, [&](auto tag) { rmsNormGradImpl<decltype(tag)>(args, r); });
}

// dx_bf16, when present, is bf16 from f32 operands (the rule checks both).
void rmsNormGradAdd(const KernelArgs& args) {
  const NormRows r = rmsNormGradAddRows(args);
  const DType dtype =
      cpuFloatingType(args, inMask(0) | inMask(1) | inMask(2) | inMask(3) | outMask(0) | outMask(1));
  dispatchFloating(dtype, [&](auto tag) { rmsNormGradImpl<decltype(tag), true>(args, r); });
}

// rms_norm_grad's and rms_norm_grad_add's: dweight's sums [d] in double.
size_t rmsNormGradScratch(const KernelArgs& args) {
  return static_cast<size_t>(args.in[1].shape.elements()) * sizeof(double);
}

}  // namespace

void addRmsNormKernels(CpuKernelRegistry& registry) {
  registry.add("rms_norm", {rmsNorm});
  registry.add("rms_norm_grad", {rmsNormGrad, rmsNormGradScratch});
  registry.add("rms_norm_grad_add", {rmsNormGradAdd, rmsNormGradScratch});
}

}  // namespace megatrain::runtime::cpu
