// CastTest.cpp - cast between f32, f64, i64 and bool, including the conversions C++ leaves undefined.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "TestUtil.h"

namespace megatrain::runtime::testing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

HostTensor tensor(plan::DType dtype, std::vector<double> values) {
  return HostTensor{{static_cast<int64_t>(values.size())}, dtype, std::move(values)};
}

std::vector<double> cast(const HostTensor& x, plan::DType to) {
  return runKernel("cast", {x}, {{x.shape, to}})[0].values;
}

TEST(CastKernel, FloatsConvertBothWays) {
  const HostTensor x = tensor(plan::F64, {0.1, -2.5, 1e30, 3.0});
  const std::vector<double> f = cast(x, plan::F32);
  for (size_t i = 0; i < f.size(); ++i) EXPECT_EQ(f[i], static_cast<double>(static_cast<float>(x.values[i])));
  EXPECT_EQ(cast(tensor(plan::F32, f), plan::F64), f);
  EXPECT_EQ(cast(x, plan::F64), x.values);
}

TEST(CastKernel, FloatsTruncateToIntegersAndSaturate) {
  for (plan::DType from : {plan::F32, plan::F64}) {
    const HostTensor x = tensor(from, {2.75, -2.75, 0.5, -0.5, kNaN, 1e30, -1e30, kInf, -kInf});
    const std::vector<double> y = cast(x, plan::I64);
    const double top = static_cast<double>(std::numeric_limits<int64_t>::max());
    const double bottom = static_cast<double>(std::numeric_limits<int64_t>::min());
    EXPECT_EQ(y, (std::vector<double>{2, -2, 0, 0, 0, top, bottom, top, bottom}));
  }
  EXPECT_EQ(cast(intTensor({3}, {-3, 0, 1 << 20}), plan::F32), (std::vector<double>{-3, 0, 1 << 20}));
  EXPECT_EQ(cast(intTensor({2}, {7, -1}), plan::F64), (std::vector<double>{7, -1}));
}

TEST(CastKernel, BoolsAreNonzeroAndReadAsOneOrZero) {
  EXPECT_EQ(cast(tensor(plan::F32, {0.0, -0.0, 0.25, kNaN, -3}), plan::BOOL),
            (std::vector<double>{0, 0, 1, 1, 1}));
  EXPECT_EQ(cast(intTensor({3}, {0, 5, -1}), plan::BOOL), (std::vector<double>{0, 1, 1}));
  const HostTensor b = tensor(plan::BOOL, {1, 0, 1});
  EXPECT_EQ(cast(b, plan::F64), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(cast(b, plan::F32), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(cast(b, plan::I64), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(cast(b, plan::BOOL), b.values);
}

TEST(CastKernel, ErrorsAreNamed) {
  const HostTensor x = tensor(plan::F32, {1, 2});
  EXPECT_EQ(kernelError("cast", {x}, {{{3}, plan::F64}}), "cast: output 'out0' has shape [3], expected [2]");
  EXPECT_EQ(kernelError("cast", {x}, {{{2}, plan::I32}}), "cast: cannot cast i32 (f32, f64, i64 or bool)");
}

}  // namespace
}  // namespace megatrain::runtime::testing
