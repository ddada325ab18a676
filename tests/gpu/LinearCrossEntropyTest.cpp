// LinearCrossEntropyTest.cpp - linear_ce and linear_ce_grad on CUDA against their CPU twins on fresh random inputs:
// f32, f64 and bf16 operands, vocabularies that are and are not a multiple of the chunk, a chunk larger than the
// vocabulary, ignored targets.
#include <random>

#include <gtest/gtest.h>

#include "CudaHarness.h"

namespace megatrain::runtime::testing {
namespace {

using Shape = std::vector<int64_t>;
constexpr int64_t kIgnore = -1;

struct Dims {
  int64_t b, t, h, v, chunk;
};

class LinearCeCuda : public ::testing::Test {
 protected:
  LinearCeCuda() : seed_(testSeed()), rng_(seed_) {}

  void check(const KernelCase& c, double tol) {
    EXPECT_TRUE(cudaMatchesCpu(c, tol)) << describe(c) << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
  }

  // Targets in [0, v), a fifth of them ignored when `ignore`.
  HostTensor tokens(const Dims& d, bool ignore) {
    std::uniform_int_distribution<int64_t> id(0, d.v - 1);
    std::bernoulli_distribution skip(ignore ? 0.2 : 0.0);
    std::vector<int64_t> values(static_cast<size_t>(d.b * d.t));
    for (int64_t& value : values) value = skip(rng_) ? kIgnore : id(rng_);
    return intTensor({d.b, d.t}, values);
  }

  uint32_t seed_;
  std::mt19937 rng_;
};

TEST_F(LinearCeCuda, ForwardAndGradientMatchTheCpu) {
  const Dims cases[] = {
      {2, 9, 64, 1000, 128},  // 7 full chunks and a short one
      {1, 33, 40, 257, 64},   // a last chunk of one row
      {3, 17, 128, 512, 512}, // one chunk
      {2, 8, 16, 100, 1000},  // a chunk larger than the vocabulary
      {4, 64, 256, 3001, 1024},
  };
  for (plan::DType operands : {plan::F32, plan::F64, plan::BF16})
    for (const Dims& d : cases)
      for (bool ignore : {true, false}) {
        const plan::DType results = operands == plan::BF16 ? plan::F32 : operands;
        // bf16: both sides read the same bf16 operands; the GPU sums in fp32 and may round a
        // gradient element to the neighbouring bf16.
        const double tol = operands == plan::F64 ? 1e-11 : operands == plan::F32 ? 2e-5 : 1e-2;
        std::vector<plan::Attribute> attrs = {intAttr("chunk", d.chunk)};
        if (ignore) attrs.push_back(intAttr("ignore_index", kIgnore));
        const HostTensor hidden = randomTensor({d.b, d.t, d.h}, operands, rng_, -1, 1);
        const HostTensor weight = randomTensor({d.v, d.h}, operands, rng_, -0.5, 0.5);
        const HostTensor ids = tokens(d, ignore);
        check({"linear_ce", {hidden, weight, ids}, {{{}, results}, {{d.b, d.t}, results}}, attrs}, tol);
        // The gradient reads the forward's lse: the CPU's, for both.
        const HostTensor lse =
            runKernel("linear_ce", {hidden, weight, ids}, {{{}, results}, {{d.b, d.t}, results}}, attrs)[1];
        const HostTensor dloss = randomTensor({}, results, rng_, 0.5, 2);
        check({"linear_ce_grad",
               {hidden, weight, ids, lse, dloss},
               {{{d.b, d.t, d.h}, results}, {{d.v, d.h}, results}},
               attrs},
              tol);
      }
}

TEST_F(LinearCeCuda, Tf32ProductsStayClose) {
  const Dims d{2, 16, 64, 700, 256};
  const std::vector<plan::Attribute> attrs = {intAttr("chunk", d.chunk), stringAttr("precision", "tf32")};
  const HostTensor hidden = randomTensor({d.b, d.t, d.h}, plan::F32, rng_, -1, 1);
  const HostTensor weight = randomTensor({d.v, d.h}, plan::F32, rng_, -0.5, 0.5);
  check({"linear_ce", {hidden, weight, tokens(d, false)}, {{{}, plan::F32}, {{d.b, d.t}, plan::F32}}, attrs}, 3e-3);
}

TEST_F(LinearCeCuda, TargetOutsideTheVocabularyIsReported) {
  const Dims d{1, 4, 8, 10, 4};
  const KernelCase c{"linear_ce",
                     {randomTensor({1, 4, 8}, plan::F32, rng_), randomTensor({10, 8}, plan::F32, rng_),
                      intTensor({1, 4}, {0, 3, 10, 2})},
                     {{{}, plan::F32}, {{1, 4}, plan::F32}},
                     {intAttr("chunk", d.chunk)}};
  const std::string error = cudaError(c);
  EXPECT_NE(error.find("target token lies outside [0, V)"), std::string::npos) << error;
}

// bf16 operands with a chunk of 4 columns take the packed fold and gradient; a bad target there is reported too.
TEST_F(LinearCeCuda, TargetOutsideTheVocabularyIsReportedOnThePackedPath) {
  const HostTensor hidden = randomTensor({1, 4, 8}, plan::BF16, rng_), weight = randomTensor({12, 8}, plan::BF16, rng_);
  const HostTensor ids = intTensor({1, 4}, {0, 3, 12, 2});
  const std::vector<plan::Attribute> attrs = {intAttr("chunk", 4)};
  const std::string forward = cudaError({"linear_ce", {hidden, weight, ids}, {{{}, plan::F32}, {{1, 4}, plan::F32}}, attrs});
  EXPECT_NE(forward.find("target token lies outside [0, V)"), std::string::npos) << forward;
  const HostTensor lse = randomTensor({1, 4}, plan::F32, rng_), dloss = randomTensor({}, plan::F32, rng_, 0.5, 2);
  const std::string backward = cudaError({"linear_ce_grad",
                                          {hidden, weight, ids, lse, dloss},
                                          {{{1, 4, 8}, plan::F32}, {{12, 8}, plan::F32}},
                                          attrs});
  EXPECT_NE(backward.find("target token lies outside [0, V)"), std::string::npos) << backward;
}

}  // namespace
}  // namespace megatrain::runtime::testing
