// PrecisionTest.cpp - the CUDA matmul and matmul_add at each precision (fp32, tf32, bf16) against the CPU backend, and bf16 casts bit for bit.
//
// Matmuls: fresh random operands at every layout and batch case matmul.cpp
// handles (rank 2, equal batches, a folded batch, stride-0 batches, a batch
// walked on the host, both transposes), odd sizes and a Llama-like product
// (hidden 2048, intermediate 5632, tokens shortened to keep it quick) with
// its two backward products. Tolerances relative to the output's scale
// (CudaHarness): fp32 1e-5, tf32 1e-3, bf16 operands 1e-3 (the CPU widens
// the same bf16 values), f32 operands computed with bf16 products 1e-2.
//
// Casts: f32 -> bf16 must equal floatToBf16 (DType.h) bit for bit on NaNs of
// either sign and any payload, infinities, ties, denormals, the largest
// finite floats and random bit patterns; bf16 -> f32 on all 65536 patterns;
// f64 -> bf16 as floatToBf16(float(x)); bf16 through the bytewise kernels
// (reshape, transpose, broadcast_to, concat, slice, gather) as the CPU
// backend moves it.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "CudaBackend.h"
#include "CudaHarness.h"
#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/CpuBackend.h"

namespace megatrain::runtime::testing {
namespace {

using Shape = std::vector<int64_t>;
using Bytes = std::vector<std::byte>;

// Every case matmul.cpp distinguishes, plus odd and Llama-like sizes.
const MatmulShape kShapes[] = {
    {{5, 7}, {7, 3}, false, false},
    {{7, 5}, {7, 3}, true, false},
    {{5, 7}, {3, 7}, false, true},
    {{7, 5}, {3, 7}, true, true},
    {{33, 65}, {65, 17}, false, false},          // odd sizes: no dimension a multiple of 8
    {{65, 33}, {17, 65}, true, true},
    {{4, 5, 7}, {4, 7, 3}, false, false},        // equal batches
    {{2, 4, 5, 7}, {7, 3}, false, false},        // rank-2 b: folded into one taller product
    {{2, 4, 7, 5}, {7, 3}, true, false},         // rank-2 b, transposed a: stride-0 batch
    {{2, 4, 5, 7}, {3, 7}, false, true},         // x W^T with W as stored (mt-fold-transpose)
    {{2, 4, 5, 7}, {2, 4, 3, 5}, true, true},    // both transposed, equal batches
    {{5, 7}, {3, 7, 6}, false, false},           // rank-2 a: stride-0 batch
    {{2, 1, 5, 7}, {1, 3, 7, 4}, false, false},  // both broadcast: batch walked on the host
    {{3, 1, 6, 5}, {3, 4, 6, 2}, true, false},   // a broadcast over an inner batch dim
    {{8, 16, 64}, {8, 32, 64}, false, true},     // attention scores shape
    {{3, 0}, {0, 4}, false, false},              // an empty sum: zeros
    {{256, 2048}, {2048, 704}, false, false},    // Llama-like forward x W (tokens and width cut by 8)
    {{256, 704}, {2048, 704}, false, true},      // its dx = dy W^T
    {{256, 2048}, {256, 704}, true, false},      // its dW = x^T dy
};

struct Precision {
  const char* name;       // the step's `precision` attribute; nullptr: absent
  plan::DType operands;   // a's and b's dtype (y is F32)
  double tol;
};

const Precision kPrecisions[] = {
    {nullptr, plan::F32, 1e-5},
    {"fp32", plan::F32, 1e-5},
    {"tf32", plan::F32, 1e-3},
    {"bf16", plan::BF16, 1e-3},
    {"bf16", plan::F32, 1e-2},  // f32 operands, bf16 products (CUBLAS_COMPUTE_32F_FAST_16BF)
};

class CudaPrecision : public ::testing::Test {
 protected:
  CudaPrecision() : seed_(testSeed()), rng_(seed_) {}

  // Uniform in [lo, hi), each value exactly representable in `dtype`.
  HostTensor uniform(const Shape& shape, plan::DType dtype, double lo = -1, double hi = 1) {
    HostTensor t = randomTensor(shape, plan::F32, rng_, lo, hi);
    t.dtype = dtype;
    if (dtype == plan::BF16)
      for (double& v : t.values) v = bf16ToFloat(floatToBf16(static_cast<float>(v)));
    return t;
  }

  uint32_t seed_;
  std::mt19937 rng_;
};

TEST_F(CudaPrecision, MatmulEveryLayoutAtEveryPrecision) {
  for (const Precision& p : kPrecisions)
    for (const MatmulShape& s : kShapes) {
      KernelCase c{"matmul",
                   {uniform(s.a, p.operands), uniform(s.b, p.operands)},
                   {{matmulResult(s), plan::F32}},
                   {intAttr("transpose_a", s.transA), intAttr("transpose_b", s.transB)}};
      if (p.name) c.attributes.push_back(stringAttr("precision", p.name));
      EXPECT_TRUE(cudaMatchesCpu(c, p.tol)) << describe(c) << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
    }
}

// matmul_add: the same products with an addend r in cuBLASLt's epilogue
// (C = r, beta = 1) or a bias [n] (the BIAS epilogue), at every precision,
// and f64 (Dgemm on a copy of r), against the CPU twin (the product rounded
// to f32, plus r).
TEST_F(CudaPrecision, MatmulAddEveryLayoutAtEveryPrecision) {
  for (const Precision& p : kPrecisions)
    for (const MatmulShape& s : kShapes) {
      KernelCase c{"matmul_add",
                   {uniform(s.a, p.operands), uniform(s.b, p.operands), uniform(matmulResult(s), plan::F32, -4, 4)},
                   {{matmulResult(s), plan::F32}},
                   {intAttr("transpose_a", s.transA), intAttr("transpose_b", s.transB)}};
      if (p.name) c.attributes.push_back(stringAttr("precision", p.name));
      EXPECT_TRUE(cudaMatchesCpu(c, p.tol)) << describe(c) << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
    }
  // A bias [n] (cuBLASLt's BIAS epilogue); an empty product with a bias is refused.
  for (const Precision& p : kPrecisions)
    for (const MatmulShape& s : kShapes) {
      const std::vector<int64_t> y = matmulResult(s);
      KernelCase c{"matmul_add",
                   {uniform(s.a, p.operands), uniform(s.b, p.operands), uniform({y.back()}, plan::F32, -4, 4)},
                   {{y, plan::F32}},
                   {intAttr("transpose_a", s.transA), intAttr("transpose_b", s.transB)}};
      if (p.name) c.attributes.push_back(stringAttr("precision", p.name));
      const int64_t k = s.transA ? s.a[s.a.size() - 2] : s.a.back();
      if (k == 0) {
        const std::string empty = cudaError(c);
        EXPECT_NE(empty.find("bias"), std::string::npos) << empty;
        continue;
      }
      EXPECT_TRUE(cudaMatchesCpu(c, p.tol)) << describe(c) << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
    }
  for (const MatmulShape& s : kShapes) {
    KernelCase c{"matmul_add",
                 {randomTensor(s.a, plan::F64, rng_), randomTensor(s.b, plan::F64, rng_),
                  randomTensor(matmulResult(s), plan::F64, rng_)},
                 {{matmulResult(s), plan::F64}},
                 {intAttr("transpose_a", s.transA), intAttr("transpose_b", s.transB)}};
    EXPECT_TRUE(cudaMatchesCpu(c, 1e-12)) << describe(c) << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
  }
}

// A matmul_add and a matmul of the same product in one backend are two
// cuBLASLt forms (the addend is part of the cache key), and an addend that
// differs from the output's type is refused by name.
TEST_F(CudaPrecision, MatmulAddAndMatmulOfOneProductAndABadAddend) {
  const HostTensor a = uniform({64, 96}, plan::BF16), b = uniform({96, 48}, plan::BF16);
  const HostTensor r = uniform({64, 48}, plan::F32, -4, 4);
  EXPECT_TRUE(cudaMatchesCpu({"matmul", {a, b}, {{{64, 48}, plan::F32}}, {stringAttr("precision", "bf16")}}, 1e-3));
  EXPECT_TRUE(
      cudaMatchesCpu({"matmul_add", {a, b, r}, {{{64, 48}, plan::F32}}, {stringAttr("precision", "bf16")}}, 1e-3));
  const std::string bad = cudaError({"matmul_add", {a, b, uniform({64, 48}, plan::BF16)}, {{{64, 48}, plan::F32}}});
  EXPECT_NE(bad.find("addend r"), std::string::npos) << bad;
}

// The same product planned twice in one plan and again in a new plan gives
// the same bits (one cached algorithm, deterministic for a fixed input).
TEST_F(CudaPrecision, MatmulRepeatsBitForBit) {
  const KernelCase c{"matmul",
                     {uniform({128, 256}, plan::BF16), uniform({256, 96}, plan::BF16)},
                     {{{128, 96}, plan::F32}},
                     {stringAttr("precision", "bf16")}};
  const plan::Plan plan = oneKernelPlan(c);
  const std::vector<HostTensor> first = runCase(cudaBackend(), plan, c);
  const std::vector<HostTensor> second = runCase(cudaBackend(), plan, c);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].values, second[0].values);
}

// The algorithm timed at prepare (MEGATRAIN_MATMUL_TUNE, matmul.cpp) writes
// the bits of cuBLASLt's first choice: each Llama-shaped product (hidden
// 2048, intermediate 5632, 1024 tokens; forward, dx and dW, with and without
// an addend, and with a bias) on fresh backends, one tuning and one taking
// the heuristic's first, gives bitwise equal outputs, and both match the CPU.
TEST_F(CudaPrecision, TunedMatmulAlgorithmKeepsTheHeuristicsBits) {
  struct Product {
    MatmulShape shape;
    bool addend;
  };
  const Product products[] = {
      {{{1024, 2048}, {5632, 2048}, false, true}, false},  // x W^T
      {{{1024, 5632}, {5632, 2048}, false, false}, true},  // dx += dy W
      {{{1024, 2048}, {1024, 5632}, true, false}, false},  // dW = x^T dy
      {{{1024, 2048}, {2048, 2048}, false, true}, true},   // o_proj with the residual
  };
  auto runWith = [&](const char* setting, const KernelCase& c) {
    ScopedEnv tune("MEGATRAIN_MATMUL_TUNE", setting);
    std::unique_ptr<Backend> backend = makeCudaBackend();
    return runCase(*backend, oneKernelPlan(c), c);
  };
  for (const Product& p : products) {
    const std::vector<int64_t> y = matmulResult(p.shape);
    KernelCase c{p.addend ? "matmul_add" : "matmul",
                 {uniform(p.shape.a, plan::BF16), uniform(p.shape.b, plan::BF16)},
                 {{y, plan::F32}},
                 {intAttr("transpose_a", p.shape.transA), intAttr("transpose_b", p.shape.transB),
                  stringAttr("precision", "bf16")}};
    if (p.addend) c.inputs.push_back(uniform(y, plan::F32, -4, 4));
    const std::vector<HostTensor> first = runWith("off", c);
    const std::vector<HostTensor> tuned = runWith("auto", c);
    ASSERT_EQ(first.size(), 1u);
    ASSERT_EQ(tuned.size(), 1u);
    EXPECT_EQ(first[0].values, tuned[0].values) << describe(c) << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
    EXPECT_TRUE(cudaMatchesCpu(c, 1e-3)) << describe(c) << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
  }
  // A bias form (cuBLASLt's BIAS epilogue): the tuner runs its candidates on a random bias of
  // its own, as the step's is not written at prepare; with the pool's NaN fill every candidate
  // wrote NaN, and a candidate that adds the bias in another order was taken (the demo's fc2 in
  // fp32: three sets of trained weights in ten runs, bench/RESULTS.md). Five fresh tuning
  // backends, an f32 product and a bf16 one, each bitwise the heuristic's first.
  const std::pair<MatmulShape, bool> biased[] = {
      {{{256, 256}, {256, 64}, false, false}, false},     // the demo's fc2, f32
      {{{1024, 2048}, {2048, 2048}, false, true}, true},  // bf16 operands
  };
  for (const auto& [shape, bf16] : biased) {
    const std::vector<int64_t> y = matmulResult(shape);
    const plan::DType operands = bf16 ? plan::BF16 : plan::F32;
    KernelCase c{"matmul_add",
                 {uniform(shape.a, operands), uniform(shape.b, operands), uniform({y.back()}, plan::F32, -4, 4)},
                 {{y, plan::F32}},
                 {intAttr("transpose_a", shape.transA), intAttr("transpose_b", shape.transB)}};
    if (bf16) c.attributes.push_back(stringAttr("precision", "bf16"));
    const std::vector<HostTensor> first = runWith("off", c);
    for (int run = 0; run < 5; ++run) {
      const std::vector<HostTensor> tuned = runWith("auto", c);
      ASSERT_EQ(tuned.size(), 1u);
      EXPECT_EQ(first[0].values, tuned[0].values) << describe(c) << ", run " << run << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
    }
    EXPECT_TRUE(cudaMatchesCpu(c, bf16 ? 1e-3 : 1e-5)) << describe(c) << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
  }
  ScopedEnv badSetting("MEGATRAIN_MATMUL_TUNE", "sometimes");
  const std::string bad = cudaError({"matmul", {uniform({64, 32}, plan::BF16), uniform({32, 48}, plan::BF16)},
                                     {{{64, 48}, plan::F32}}, {stringAttr("precision", "bf16")}});
  EXPECT_NE(bad.find("MEGATRAIN_MATMUL_TUNE"), std::string::npos) << bad;
}

TEST_F(CudaPrecision, MatmulRejectsMixedOperandsAndUnknownPrecision) {
  const std::string mixed = cudaError({"matmul", {uniform({4, 5}, plan::BF16), uniform({5, 3}, plan::F32)},
                                       {{{4, 3}, plan::F32}}});
  EXPECT_NE(mixed.find("bf16 x f32"), std::string::npos) << mixed;
  const std::string f32ToBf16 = cudaError({"matmul", {uniform({4, 5}, plan::F32), uniform({5, 3}, plan::F32)},
                                           {{{4, 3}, plan::BF16}}});
  EXPECT_NE(f32ToBf16.find("f32 x f32 -> bf16"), std::string::npos) << f32ToBf16;
  const std::string unknown = cudaError({"matmul", {uniform({4, 5}, plan::F32), uniform({5, 3}, plan::F32)},
                                         {{{4, 3}, plan::F32}}, {stringAttr("precision", "fp8")}});
  EXPECT_NE(unknown.find("'fp8'"), std::string::npos) << unknown;
}

// ---- casts, on raw bytes ----

// Runs a one-kernel plan on `backend` with the given input bytes; returns each output's bytes.
std::vector<Bytes> runBytes(Backend& backend, const KernelCase& c, const std::vector<Bytes>& inputs) {
  const plan::Plan plan = oneKernelPlan(c);
  backend.prepare(plan);
  for (size_t i = 0; i < inputs.size(); ++i) backend.write(plan.tensors(static_cast<int>(i)), inputs[i].data(), inputs[i].size());
  backend.launchKernel(0);
  backend.synchronize();
  std::vector<Bytes> outputs;
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    const plan::Tensor& tensor = plan.tensors(static_cast<int>(c.inputs.size() + i));
    Bytes bytes(tensor.buffer().size_bytes());
    backend.read(tensor, bytes.data(), bytes.size());
    outputs.push_back(std::move(bytes));
  }
  return outputs;
}

template <typename T>
Bytes toBytes(const std::vector<T>& values) {
  Bytes bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

template <typename T>
std::vector<T> fromBytes(const Bytes& bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  return values;
}

float floatOfBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// A cast of x (the given bytes, `from`) to `to`, on the CUDA backend.
Bytes cudaCast(const Bytes& x, int64_t count, plan::DType from, plan::DType to) {
  const KernelCase c{"cast", {HostTensor{{count}, from, {}}}, {{{count}, to}}};
  return runBytes(cudaBackend(), c, {x})[0];
}

TEST_F(CudaPrecision, CastF32ToBf16BitForBit) {
  std::vector<uint32_t> bits = {
      0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FBFFFFFu, 0x7FFFFFFFu, 0x7F80FFFFu,  // NaNs
      0x7F800000u, 0xFF800000u, 0x00000000u, 0x80000000u,                                      // infinities, zeros
      0x3F808000u, 0x3F818000u, 0xBF808000u, 0xBF818000u, 0x3F808001u, 0x3F807FFFu,            // ties and near ties
      0x00000001u, 0x80000001u, 0x00008000u, 0x00018000u, 0x007FFFFFu, 0x807FFFFFu, 0x007F8000u, // denormals
      0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F7F8000u, 0x7F7F7FFFu, 0x00800000u, 0x3F800000u};          // largest finite, normals
  std::uniform_int_distribution<uint32_t> word;
  for (int i = 0; i < 1 << 20; ++i) bits.push_back(word(rng_));
  const int64_t n = static_cast<int64_t>(bits.size());
  const std::vector<uint16_t> got = fromBytes<uint16_t>(cudaCast(toBytes(bits), n, plan::F32, plan::BF16));
  ASSERT_EQ(got.size(), bits.size());
  size_t bad = 0;
  for (size_t i = 0; i < bits.size(); ++i) {
    const uint16_t expected = floatToBf16(floatOfBits(bits[i]));
    if (got[i] != expected && bad++ < 10)
      ADD_FAILURE() << std::hex << "f32 0x" << bits[i] << ": cuda 0x" << got[i] << ", floatToBf16 0x" << expected
                    << std::dec << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
  }
  EXPECT_EQ(bad, 0u);
}

TEST_F(CudaPrecision, CastBf16ToF32AndF64EveryPattern) {
  std::vector<uint16_t> all(1 << 16);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  const int64_t n = static_cast<int64_t>(all.size());
  const std::vector<uint32_t> f32 = fromBytes<uint32_t>(cudaCast(toBytes(all), n, plan::BF16, plan::F32));
  const std::vector<double> f64 = fromBytes<double>(cudaCast(toBytes(all), n, plan::BF16, plan::F64));
  const std::vector<uint16_t> same = fromBytes<uint16_t>(cudaCast(toBytes(all), n, plan::BF16, plan::BF16));
  size_t bad = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const float expected = bf16ToFloat(all[i]);
    uint32_t expectedBits;
    std::memcpy(&expectedBits, &expected, 4);
    const bool f64ok = std::isnan(expected) ? std::isnan(f64[i]) : f64[i] == static_cast<double>(expected);
    if ((f32[i] != expectedBits || !f64ok || same[i] != all[i]) && bad++ < 10)
      ADD_FAILURE() << std::hex << "bf16 0x" << all[i] << ": f32 0x" << f32[i] << " (expected 0x" << expectedBits
                    << "), f64 " << f64[i] << ", bf16 0x" << same[i];
  }
  EXPECT_EQ(bad, 0u);
}

TEST_F(CudaPrecision, CastF64ToBf16RoundsThroughF32) {
  std::vector<double> values = {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::quiet_NaN(),
                                std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                                0.0, -0.0, 1.00390625, 1.01171875, -1.00390625, 1e300, -1e300, 1e-300, 3.4e38,
                                std::numeric_limits<double>::denorm_min()};
  std::uniform_real_distribution<double> pick(-1000, 1000);
  for (int i = 0; i < 100000; ++i) values.push_back(pick(rng_));
  const int64_t n = static_cast<int64_t>(values.size());
  const std::vector<uint16_t> got = fromBytes<uint16_t>(cudaCast(toBytes(values), n, plan::F64, plan::BF16));
  size_t bad = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t expected = floatToBf16(static_cast<float>(values[i]));
    if (got[i] != expected && bad++ < 10)
      ADD_FAILURE() << "f64 " << values[i] << ": cuda 0x" << std::hex << got[i] << ", expected 0x" << expected
                    << std::dec << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
  }
  EXPECT_EQ(bad, 0u);
}

TEST_F(CudaPrecision, CastRejectsBf16WithIntegers) {
  for (plan::DType other : {plan::I64, plan::BOOL}) {
    const std::string to = cudaError({"cast", {HostTensor{{3}, other, {1, 0, 1}}}, {{{3}, plan::BF16}}});
    EXPECT_NE(to.find("bf16 casts to and from f32 and f64 only"), std::string::npos) << to;
  }
}

// ---- bf16 through the kernels that move bytes ----

TEST_F(CudaPrecision, Bf16ThroughBytewiseKernels) {
  std::uniform_int_distribution<uint32_t> word(0, 0xFFFF);
  auto bf16Bytes = [&](int64_t count) {
    std::vector<uint16_t> values(static_cast<size_t>(count));
    for (uint16_t& v : values) v = static_cast<uint16_t>(word(rng_));
    return toBytes(values);
  };
  auto operand = [](const Shape& shape, plan::DType dtype = plan::BF16) { return HostTensor{shape, dtype, {}}; };
  struct Case {
    KernelCase kernel;
    std::vector<Bytes> inputs;
  };
  std::vector<int64_t> indices = {3, 0, 6, 6, 1};
  std::vector<Case> cases;
  cases.push_back({{"reshape", {operand({6, 10})}, {{{3, 20}, plan::BF16}}}, {bf16Bytes(60)}});
  cases.push_back({{"transpose", {operand({4, 6, 10})}, {{{10, 4, 6}, plan::BF16}}, {intsAttr("perm", {2, 0, 1})}},
                   {bf16Bytes(240)}});
  cases.push_back({{"broadcast_to", {operand({1, 7})}, {{{5, 7}, plan::BF16}}}, {bf16Bytes(7)}});
  cases.push_back({{"concat", {operand({3, 5}), operand({3, 2}), operand({3, 9})}, {{{3, 16}, plan::BF16}},
                    {intAttr("axis", 1)}},
                   {bf16Bytes(15), bf16Bytes(6), bf16Bytes(27)}});
  cases.push_back({{"slice", {operand({9, 12})}, {{{3, 4}, plan::BF16}},
                    {intsAttr("starts", {1, 2}), intsAttr("ends", {9, 12}), intsAttr("steps", {3, 3})}},
                   {bf16Bytes(108)}});
  cases.push_back({{"gather", {operand({7, 8}), operand({5}, plan::I64)}, {{{5, 8}, plan::BF16}}, {intAttr("axis", 0)}},
                   {bf16Bytes(56), toBytes(indices)}});
  for (const Case& c : cases) {
    std::vector<Bytes> cpu, gpu;
    try {
      CpuBackend reference;
      cpu = runBytes(reference, c.kernel, c.inputs);
      gpu = runBytes(cudaBackend(), c.kernel, c.inputs);
    } catch (const Error& e) {
      ADD_FAILURE() << describe(c.kernel) << ": " << e.what();
      continue;
    }
    EXPECT_EQ(cpu, gpu) << describe(c.kernel) << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
  }
}

}  // namespace
}  // namespace megatrain::runtime::testing
