// layer_norm.cpp - layer normalization over dims [axis, rank) and its gradient.
//
// x is viewed as [rows, d] with d = prod(x.shape[axis:]); scale and bias have
// shape x.shape[axis:]. Per row: mean, biased variance, rstd = 1/sqrt(var + eps),
// n = (x - mean) * rstd, y = n * scale + bias. Statistics run in double.
#include <cmath>

#include "CpuKernel.h"

namespace megatrain::runtime::cpu {
namespace {

// Mean and rstd of one row of d elements.
template <typename T>
void rowStats(const T* x, int64_t d, double epsilon, double& mean, double& rstd) {
  double sum = 0;
  for (int64_t j = 0; j < d; ++j) sum += static_cast<double>(x[j]);
  mean = sum / static_cast<double>(d);
  double squares = 0;
  for (int64_t j = 0; j < d; ++j) {
    const double c = static_cast<double>(x[j]) - mean;
    squares += c * c;
  }
  rstd = 1.0 / std::sqrt(squares / static_cast<double>(d) + epsilon);
}

template <typename T>
void layerNormImpl(const KernelArgs& args, const NormRows& r) {
  const T* x = args.in[0].as<const T>();
  const T* scale = args.in[1].as<const T>();
  const T* bias = args.in[2].as<const T>();
  T* y = args.out[0].as<T>();
  for (int64_t row = 0; row < r.rows; ++row) {
    const T* xr = x + row * r.d;
    T* yr = y + row * r.d;
    double mean, rstd;
    rowStats(xr, r.d, r.epsilon, mean, rstd);
    for (int64_t j = 0; j < r.d; ++j) {
      const double n = (static_cast<double>(xr[j]) - mean) * rstd;
      yr[j] = static_cast<T>(n * static_cast<double>(scale[j]) + static_cast<double>(bias[j]));
    }
  }
}

// With g = dy * scale: dx = rstd * (g - mean(g) - n * mean(g * n)) per row;
// dscale = sum over rows of dy * n; dbias = sum over rows of dy.
template <typename T>
void layerNormGradImpl(const KernelArgs& args, const NormRows& r) {
  const T* x = args.in[0].as<const T>();
  const T* scale = args.in[1].as<const T>();
  const T* dy = args.in[2].as<const T>();
  T* dx = args.out[0].as<T>();
  double* dscale = reinterpret_cast<double*>(args.scratch);  // [d]
  double* dbias = dscale + r.d;                               // [d]
  for (int64_t j = 0; j < r.d; ++j) dscale[j] = dbias[j] = 0;

  for (int64_t row = 0; row < r.rows; ++row) {
    const T* xr = x + row * r.d;
    const T* dyr = dy + row * r.d;
    T* dxr = dx + row * r.d;
    double mean, rstd;
    rowStats(xr, r.d, r.epsilon, mean, rstd);
    double sumG = 0, sumGN = 0;
    for (int64_t j = 0; j < r.d; ++j) {
      const double n = (static_cast<double>(xr[j]) - mean) * rstd;
      const double g = static_cast<double>(dyr[j]) * static_cast<double>(scale[j]);
      sumG += g;
      sumGN += g * n;
      dscale[j] += static_cast<double>(dyr[j]) * n;
      dbias[j] += static_cast<double>(dyr[j]);
    }
    const double meanG = sumG / static_cast<double>(r.d), meanGN = sumGN / static_cast<double>(r.d);
    for (int64_t j = 0; j < r.d; ++j) {
      const double n = (static_cast<double>(xr[j]) - mean) * rstd;
      const double g = static_cast<double>(dyr[j]) * static_cast<double>(scale[j]);
      dxr[j] = static_cast<T>(rstd * (g - meanG - n * meanGN));
    }
  }
  T* outScale = args.out[1].as<T>();
  T* outBias = args.out[2].as<T>();
  for (int64_t j = 0; j < r.d; ++j) {
    outScale[j] = static_cast<T>(dscale[j]);
    outBias[j] = static_cast<T>(dbias[j]);
  }
}

void layerNorm(const KernelArgs& args) {
  const DType dtype =
      cpuFloatingType(args, inMask(0) | inMask(1) | inMask(2) | outMask(0));
  const NormRows r = layerNormRows(args);
  dispatchFloating(dtype, [&](auto tag) { layerNormImpl<decltype(tag)>(args, r); });
}

void layerNormGrad(const KernelArgs& args) {
  const DType dtype = cpuFloatingType(args, inMask(0) | inMask(1) | inMask(2) | outMask(0) | outMask(1) | outMask(2));
  const NormRows r = layerNormGradRows(args);
  dispatchFloating(dtype, [&](auto tag) { layerNormGradImpl<decltype(tag)>(args, r); });
}

size_t layerNormGradScratch(const KernelArgs& args) {
  return 2 * static_cast<size_t>(args.in[1].shape.elements()) * sizeof(double);
}

}  // namespace

void addLayerNormKernels(CpuKernelRegistry& registry) {
  registry.add("layer_norm", {layerNorm});
  registry.add("layer_norm_grad", {layerNormGrad, layerNormGradScratch});
}

}  // namespace megatrain::runtime::cpu
