// WeightInit.cpp - --init normal:STD: parameters drawn from a seeded normal distribution, norms 1, biases 0.
#include "megatrain/runtime/WeightInit.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/HostThreads.h"

namespace megatrain::runtime {
namespace {

uint64_t splitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// FNV-1a of the name, mixed with the seed: each parameter its own stream.
uint64_t streamKey(uint64_t seed, const std::string& name) {
  uint64_t hash = 0xCBF29CE484222325ull;
  for (unsigned char c : name) hash = (hash ^ c) * 0x100000001B3ull;
  return splitMix64(hash ^ splitMix64(seed));
}

// A uniform in (0, 1]: 24 random bits, never 0 (log(0) would be -inf).
float uniform(uint64_t key, uint64_t counter) {
  return (static_cast<float>(splitMix64(key + counter) >> 40) + 1.0f) * 0x1.0p-24f;
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

template <typename T>
void fill(T* out, size_t count, InitKind kind, double std, uint64_t key) {
  if (kind != InitKind::Normal) {
    for (size_t i = 0; i < count; ++i) out[i] = kind == InitKind::Ones ? T(1) : T(0);
    return;
  }
  // Box-Muller in float (its tail ends at 5.8 std, where a normal has 1e-8
  // of its mass): uniforms 2k and 2k+1 give elements 2k and 2k+1. Ranges
  // start at multiples of 16, so no pair is split and the threads change no value.
  constexpr float kTwoPi = 6.28318530717958647692f;
  const float scale = static_cast<float>(std);
  const unsigned chunks = count >= (size_t{1} << 16) ? hostThreadCount() : 1;
  hostParallelRanges(count, chunks, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; i += 2) {
      const float radius = scale * std::sqrt(-2.0f * std::log(uniform(key, i)));
      const float angle = kTwoPi * uniform(key, i + 1);
      out[i] = static_cast<T>(radius * std::cos(angle));
      if (i + 1 < end) out[i + 1] = static_cast<T>(radius * std::sin(angle));
    }
  });
}

}  // namespace

InitKind initKind(const std::string& name, size_t rank) {
  auto endsWith = [&](const std::string& suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (endsWith(".bias") || name == "bias") return InitKind::Zeros;
  if (rank == 1 && endsWith(".weight")) {
    const std::string path = name.substr(0, name.size() - 7);
    const size_t dot = path.rfind('.');
    const std::string module = lower(dot == std::string::npos ? path : path.substr(dot + 1));
    if (module.find("norm") != std::string::npos || module.rfind("ln", 0) == 0) return InitKind::Ones;
  }
  return InitKind::Normal;
}

double parseNormalInit(const std::string& text) {
  const std::string prefix = "normal:";
  if (text.rfind(prefix, 0) != 0)
    throw Error("--init needs normal:STD (for example normal:0.02), got '" + text + "'");
  const std::string number = text.substr(prefix.size());
  char* end = nullptr;
  const double std = number.empty() ? NAN : std::strtod(number.c_str(), &end);
  if (number.empty() || *end != '\0' || !std::isfinite(std) || !(std > 0))
    throw Error("--init normal:STD needs a positive number for STD, got '" + number + "'");
  return std;
}

NormalInit::NormalInit(double std, uint64_t seed) : std_(std), seed_(seed) {
  char text[96];
  std::snprintf(text, sizeof text, "--init normal:%g (seed %llu)", std, static_cast<unsigned long long>(seed));
  description_ = text;
}

void NormalInit::read(const std::string& name, plan::DType dtype, const std::vector<int64_t>& shape, void* out,
                      size_t outBytes) const {
  size_t count = 1;
  for (int64_t dim : shape) count *= static_cast<size_t>(dim);
  if (dtype != plan::F32 && dtype != plan::F64)
    throw Error(description_ + ": cannot initialize the " + std::string(dtypeName(dtype)) + " parameter '" + name + "'");
  if (outBytes != count * dtypeSize(dtype))
    throw Error(description_ + ": parameter '" + name + "' holds " + std::to_string(outBytes) + " bytes, expected " +
                std::to_string(count * dtypeSize(dtype)));
  const InitKind kind = initKind(name, shape.size());
  const uint64_t key = streamKey(seed_, name);
  if (dtype == plan::F32) fill(static_cast<float*>(out), count, kind, std_, key);
  else fill(static_cast<double*>(out), count, kind, std_, key);
}

}  // namespace megatrain::runtime
