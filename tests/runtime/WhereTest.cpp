// WhereTest.cpp - where against a naive three-way broadcasting reference, for floats and i64.
#include <gtest/gtest.h>

#include "TestUtil.h"

namespace megatrain::runtime::testing {
namespace {

HostTensor randomBools(const std::vector<int64_t>& shape, std::mt19937& rng) {
  HostTensor t{shape, plan::BOOL, {}};
  std::bernoulli_distribution coin(0.5);
  t.values.resize(static_cast<size_t>(t.elements()));
  for (double& v : t.values) v = coin(rng) ? 1 : 0;
  return t;
}

// The element of `t` that index `at` of `out` (right-aligned) reads.
double broadcastRead(const HostTensor& t, const std::vector<int64_t>& out,
                     const std::vector<int64_t>& at) {
  const size_t lead = out.size() - t.shape.size();
  int64_t offset = 0;
  for (size_t d = 0; d < t.shape.size(); ++d)
    offset = offset * t.shape[d] + (t.shape[d] == 1 ? 0 : at[d + lead]);
  return t.values[static_cast<size_t>(offset)];
}

std::vector<double> naiveWhere(const HostTensor& c, const HostTensor& x, const HostTensor& y,
                               const std::vector<int64_t>& out) {
  std::vector<double> result;
  std::vector<int64_t> at(out.size(), 0);
  int64_t n = 1;
  for (int64_t d : out) n *= d;
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i;
    for (size_t d = out.size(); d-- > 0;) {
      at[d] = rest % out[d];
      rest /= out[d];
    }
    result.push_back(broadcastRead(c, out, at) != 0 ? broadcastRead(x, out, at)
                                                    : broadcastRead(y, out, at));
  }
  return result;
}

TEST(WhereKernel, BroadcastsAllThreeOperands) {
  std::mt19937 rng(11);
  struct Case {
    std::vector<int64_t> c, x, y, out;
  };
  const Case cases[] = {{{2, 3}, {2, 3}, {2, 3}, {2, 3}},
                        {{1, 1, 4, 4}, {2, 3, 4, 4}, {}, {2, 3, 4, 4}},  // a causal mask
                        {{3, 1}, {1, 4}, {2, 1, 1}, {2, 3, 4}},
                        {{}, {5}, {5}, {5}}};
  for (plan::DType dtype : {plan::F32, plan::F64})
    for (const Case& c : cases) {
      const HostTensor cond = randomBools(c.c, rng);
      const HostTensor x = randomTensor(c.x, dtype, rng);
      const HostTensor y = randomTensor(c.y, dtype, rng);
      const HostTensor out = runKernel("where", {cond, x, y}, {{c.out, dtype}})[0];
      EXPECT_EQ(out.values, naiveWhere(cond, x, y, c.out));
    }
  // where only moves elements: integers too.
  const HostTensor cond = randomBools({4}, rng);
  const HostTensor x = intTensor({4}, {1, 2, 3, 4}), y = intTensor({1}, {-7});
  EXPECT_EQ(runKernel("where", {cond, x, y}, {{{4}, plan::I64}})[0].values, naiveWhere(cond, x, y, {4}));
}

TEST(WhereKernel, ErrorsAreNamed) {
  std::mt19937 rng(12);
  const HostTensor x = randomTensor({2, 3}, plan::F32, rng);
  EXPECT_EQ(kernelError("where", {x, x, x}, {{{2, 3}, plan::F32}}),
            "where: condition 'in0' is f32, expected bool");
  EXPECT_EQ(kernelError("where", {randomBools({4}, rng), x, x}, {{{2, 3}, plan::F32}}),
            "where: shapes [4], [2, 3] and [2, 3] do not broadcast");
  EXPECT_EQ(kernelError("where", {randomBools({3}, rng), x, randomTensor({3}, plan::F64, rng)},
                        {{{2, 3}, plan::F32}}),
            "where: input 'in2' is f64, expected f32");
}

}  // namespace
}  // namespace megatrain::runtime::testing
