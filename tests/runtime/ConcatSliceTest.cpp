// ConcatSliceTest.cpp - concat, slice and slice_grad against naive index arithmetic.
#include <gtest/gtest.h>

#include "TestUtil.h"

namespace megatrain::runtime::testing {
namespace {

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

TEST(ConcatKernel, JoinsAlongEveryAxis) {
  std::mt19937 rng(21);
  // [2, 3, 4] ++ [2, 1, 4] ++ [2, 2, 4] along axis 1, then the same along 0 and 2.
  for (plan::DType dtype : {plan::F32, plan::F64}) {
    const HostTensor a = randomTensor({2, 3, 4}, dtype, rng);
    const HostTensor b = randomTensor({2, 1, 4}, dtype, rng);
    const HostTensor c = randomTensor({2, 2, 4}, dtype, rng);
    const HostTensor y = runKernel("concat", {a, b, c}, {{{2, 6, 4}, dtype}}, {intAttr("axis", 1)})[0];
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 6; ++j)
        for (int k = 0; k < 4; ++k) {
          const double expected = j < 3   ? a.values[(i * 3 + j) * 4 + k]
                                  : j < 4 ? b.values[i * 4 + k]
                                          : c.values[(i * 2 + (j - 4)) * 4 + k];
          EXPECT_EQ(y.values[(i * 6 + j) * 4 + k], expected) << i << "," << j << "," << k;
        }
  }
  const HostTensor p = intTensor({2, 2}, {1, 2, 3, 4}), q = intTensor({1, 2}, {5, 6});
  EXPECT_EQ(runKernel("concat", {p, q}, {{{3, 2}, plan::I64}}, {intAttr("axis", 0)})[0].values,
            (std::vector<double>{1, 2, 3, 4, 5, 6}));
  const HostTensor r = intTensor({2, 1}, {7, 8});
  EXPECT_EQ(runKernel("concat", {p, r}, {{{2, 3}, plan::I64}}, {intAttr("axis", 1)})[0].values,
            (std::vector<double>{1, 2, 7, 3, 4, 8}));
  EXPECT_EQ(runKernel("concat", {r}, {{{2, 1}, plan::I64}}, {intAttr("axis", 1)})[0].values, r.values);
}

TEST(ConcatKernel, ErrorsAreNamed) {
  std::mt19937 rng(22);
  const HostTensor a = randomTensor({2, 3}, plan::F32, rng);
  const HostTensor b = randomTensor({3, 3}, plan::F32, rng);
  EXPECT_EQ(kernelError("concat", {a, b}, {{{2, 6}, plan::F32}}, {intAttr("axis", 1)}),
            "concat: input 'in1' has shape [3, 3], expected [2, 3]");
  EXPECT_EQ(kernelError("concat", {a, a}, {{{2, 5}, plan::F32}}, {intAttr("axis", 1)}),
            "concat: output 'out0' has shape [2, 5], expected [2, 6]");
  EXPECT_EQ(kernelError("concat", {a, a}, {{{2, 6}, plan::F32}}, {intAttr("axis", 2)}),
            "concat: axis 2 out of range for output [2, 6]");
}

struct SliceCase {
  std::vector<int64_t> x, starts, ends, steps, y;
};

const SliceCase kSlices[] = {
    {{4, 6}, {1, 0}, {3, 6}, {1, 1}, {2, 6}},
    {{4, 6}, {0, 1}, {4, 6}, {2, 2}, {2, 3}},     // steps, one not dividing the range
    {{2, 5, 3}, {0, 4, 1}, {2, 5, 3}, {1, 1, 1}, {2, 1, 2}},
    {{2, 5, 3}, {1, 0, 0}, {2, 5, 3}, {1, 3, 2}, {1, 2, 2}},
    {{3, 4}, {2, 4}, {1, 4}, {1, 1}, {0, 0}},     // empty: end <= start, start at the end
    {{}, {}, {}, {}, {}},
};

// x[starts + i * steps] for every index i of y, by explicit index arithmetic.
std::vector<double> naiveSlice(const HostTensor& x, const SliceCase& c) {
  std::vector<double> out;
  const std::vector<int64_t> strides = stridesOf(c.x);
  int64_t n = 1;
  for (int64_t d : c.y) n *= d;
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, offset = 0;
    for (size_t d = c.y.size(); d-- > 0;) {
      offset += (c.starts[d] + (rest % c.y[d]) * c.steps[d]) * strides[d];
      rest /= c.y[d];
    }
    out.push_back(x.values[static_cast<size_t>(offset)]);
  }
  return out;
}

std::vector<plan::Attribute> sliceAttrs(const SliceCase& c) {
  return {intsAttr("starts", c.starts), intsAttr("ends", c.ends), intsAttr("steps", c.steps)};
}

TEST(SliceKernel, ReadsEveryStridedRange) {
  std::mt19937 rng(23);
  for (const SliceCase& c : kSlices) {
    const HostTensor x = randomTensor(c.x, plan::F64, rng);
    const HostTensor y = runKernel("slice", {x}, {{c.y, plan::F64}}, sliceAttrs(c))[0];
    EXPECT_EQ(y.values, naiveSlice(x, c));
  }
}

// <slice(x), dy> == <x, slice_grad(dy)>, and slice_grad is zero off the slice.
TEST(SliceKernel, SliceGradIsTheAdjoint) {
  std::mt19937 rng(24);
  for (const SliceCase& c : kSlices) {
    const HostTensor x = randomTensor(c.x, plan::F64, rng);
    const HostTensor dy = randomTensor(c.y, plan::F64, rng);
    const HostTensor y = runKernel("slice", {x}, {{c.y, plan::F64}}, sliceAttrs(c))[0];
    const HostTensor dx = runKernel("slice_grad", {dy}, {{c.x, plan::F64}}, sliceAttrs(c))[0];
    EXPECT_NEAR(dot(y.values, dy.values), dot(x.values, dx.values), 1e-12);
    // Marking the sliced positions with 1s leaves zeros everywhere else.
    HostTensor ones{c.y, plan::F64, std::vector<double>(dy.values.size(), 1.0)};
    const HostTensor mask = runKernel("slice_grad", {ones}, {{c.x, plan::F64}}, sliceAttrs(c))[0];
    double marked = 0;
    for (double v : mask.values) {
      EXPECT_TRUE(v == 0 || v == 1);
      marked += v;
    }
    EXPECT_EQ(marked, static_cast<double>(dy.values.size()));
  }
}

TEST(SliceKernel, ErrorsAreNamed) {
  std::mt19937 rng(25);
  const HostTensor x = randomTensor({4, 6}, plan::F32, rng);
  const SliceCase negative{{4, 6}, {0, 0}, {4, 6}, {1, -1}, {4, 6}};
  EXPECT_EQ(kernelError("slice", {x}, {{{4, 6}, plan::F32}}, sliceAttrs(negative)),
            "slice: step -1 of dim 1 must be >= 1");
  const SliceCase outside{{4, 6}, {0, 0}, {5, 6}, {1, 1}, {4, 6}};
  EXPECT_EQ(kernelError("slice", {x}, {{{4, 6}, plan::F32}}, sliceAttrs(outside)),
            "slice: range [0, 5) of dim 0 is not within [0, 4]");
  EXPECT_EQ(kernelError("slice", {x}, {{{4, 6}, plan::F32}}, {intsAttr("starts", {0})}),
            "slice: starts, ends and steps need 2 entries each for [4, 6]");
  const SliceCase half{{4, 6}, {0, 0}, {2, 6}, {1, 1}, {2, 6}};
  EXPECT_EQ(kernelError("slice", {x}, {{{4, 6}, plan::F32}}, sliceAttrs(half)),
            "slice: output 'out0' has shape [4, 6], expected [2, 6]");
}

}  // namespace
}  // namespace megatrain::runtime::testing
