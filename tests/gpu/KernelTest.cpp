// KernelTest.cpp - every CUDA kernel against its CPU twin on fresh random inputs, f32 and f64, several shapes.
//
// Shapes are chosen to reach each launcher's paths: broadcasting on either
// side and on both, batch-broadcast matmul (stride 0, a folded batch, a
// batch walked on the host), reductions over inner and outer dims and long
// ones that split across blocks, softmax and cross-entropy rows that are long
// (a block each), short (a warp each) and interleaved (a thread each),
// ignored labels; for the primitives of exported LLMs, NaN and ties in
// max/min, three-way broadcasts in where, concat of one to eight inputs,
// slices with steps, and casts of the values C++ leaves undefined.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "CudaHarness.h"

namespace megatrain::runtime::testing {
namespace {

using Shape = std::vector<int64_t>;
constexpr plan::DType kFloatTypes[] = {plan::F32, plan::F64};

class CudaKernels : public ::testing::Test {
 protected:
  CudaKernels() : seed_(testSeed()), rng_(seed_) {}

  void check(const KernelCase& c, double tol = 0) {
    EXPECT_TRUE(cudaMatchesCpu(c, tol)) << describe(c) << " (MEGATRAIN_TEST_SEED=" << seed_ << ")";
  }

  HostTensor uniform(const Shape& shape, plan::DType dtype, double lo = -2.0, double hi = 2.0) {
    return randomTensor(shape, dtype, rng_, lo, hi);
  }

  // Magnitudes in [0.5, 2], either sign: safe denominators.
  HostTensor awayFromZero(const Shape& shape, plan::DType dtype) {
    HostTensor t = uniform(shape, dtype, 0.5, 2.0);
    std::bernoulli_distribution flip(0.5);
    for (double& v : t.values)
      if (flip(rng_)) v = -v;
    return t;
  }

  // Integers in [lo, hi], each replaced by `special` with probability p.
  HostTensor integers(const Shape& shape, int64_t lo, int64_t hi, int64_t special = 0, double p = 0) {
    std::uniform_int_distribution<int64_t> pick(lo, hi);
    std::bernoulli_distribution replace(p);
    HostTensor t{shape, plan::I64, {}};
    t.values.resize(static_cast<size_t>(t.elements()));
    for (double& v : t.values) v = static_cast<double>(replace(rng_) ? special : pick(rng_));
    return t;
  }

  // Random 0/1 bools.
  HostTensor bools(const Shape& shape) {
    std::bernoulli_distribution coin(0.5);
    HostTensor t{shape, plan::BOOL, {}};
    t.values.resize(static_cast<size_t>(t.elements()));
    for (double& v : t.values) v = coin(rng_) ? 1 : 0;
    return t;
  }

  uint32_t seed_;
  std::mt19937 rng_;
};

// The broadcast of two shapes (they must broadcast).
Shape broadcast(const Shape& a, const Shape& b) {
  Shape y;
  const size_t rank = std::max(a.size(), b.size());
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    const int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    y.push_back(std::max(da, db));
  }
  return y;
}

// ---- elementwise ----

TEST_F(CudaKernels, Fill) {
  for (plan::DType dt : kFloatTypes)
    for (const Shape& shape : {Shape{}, Shape{7}, Shape{3, 5, 2}, Shape{1000, 33}})
      check({"fill", {}, {{shape, dt}}, {floatAttr("value", -2.75)}});
}

TEST_F(CudaKernels, BinaryOpsBroadcast) {
  const std::pair<Shape, Shape> pairs[] = {
      {{4, 5}, {4, 5}},          {{4, 5}, {5}},       {{5}, {4, 5}},           {{4, 1}, {1, 5}},
      {{2, 3, 4}, {3, 1}},       {{}, {3, 2}},        {{3, 2}, {}},            {{1000, 33}, {33}},
      {{2, 1, 3, 1}, {1, 4, 1, 5}}, {{64, 1024}, {64, 1024}}, {{3, 1, 7}, {3, 5, 7}}, {{2, 3, 4, 5, 6}, {4, 1, 6}}};
  for (plan::DType dt : kFloatTypes)
    for (const char* op : {"add", "sub", "mul", "div"})
      for (const auto& [sa, sb] : pairs) {
        Shape y;
        const size_t rank = std::max(sa.size(), sb.size());
        for (size_t i = 0; i < rank; ++i) {
          const int64_t da = i + sa.size() >= rank ? sa[i + sa.size() - rank] : 1;
          const int64_t db = i + sb.size() >= rank ? sb[i + sb.size() - rank] : 1;
          y.push_back(std::max(da, db));
        }
        const HostTensor b = std::string(op) == "div" ? awayFromZero(sb, dt) : uniform(sb, dt);
        check({op, {uniform(sa, dt), b}, {{y, dt}}});
      }
}

TEST_F(CudaKernels, ScaleAndActivations) {
  for (plan::DType dt : kFloatTypes)
    for (const Shape& shape : {Shape{1}, Shape{1000}, Shape{17, 33}, Shape{4, 256, 129}}) {
      check({"scale", {uniform(shape, dt)}, {{shape, dt}}, {floatAttr("alpha", -0.7)}});
      check({"relu", {uniform(shape, dt)}, {{shape, dt}}});
      check({"tanh", {uniform(shape, dt, -6, 6)}, {{shape, dt}}});
      check({"sigmoid", {uniform(shape, dt, -40, 40)}, {{shape, dt}}});
      check({"softplus", {uniform(shape, dt, -40, 40)}, {{shape, dt}}});
    }
}

TEST_F(CudaKernels, ActivationGradients) {
  for (plan::DType dt : kFloatTypes)
    for (const Shape& shape : {Shape{1}, Shape{1000}, Shape{17, 33}}) {
      check({"relu_grad", {uniform(shape, dt), uniform(shape, dt)}, {{shape, dt}}});
      check({"tanh_grad", {uniform(shape, dt, -1, 1), uniform(shape, dt)}, {{shape, dt}}});
      check({"sigmoid_grad", {uniform(shape, dt, 0, 1), uniform(shape, dt)}, {{shape, dt}}});
    }
}

// ReLU once mapped NaN to 0 (`x > 0 ? x : 0`) on both backends alike, so the
// twins agreed; the NaN positions are also checked on the CUDA output itself.
TEST_F(CudaKernels, ReluAndReluGradPropagateNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (plan::DType dt : kFloatTypes)
    for (const Shape& shape : {Shape{7}, Shape{1000}, Shape{17, 33}}) {
      HostTensor x = uniform(shape, dt), dy = uniform(shape, dt);
      for (size_t i = 0; i < x.values.size(); i += 5) x.values[i] = nan;
      x.values[1] = -1.0;  // below zero with a NaN dy: relu_grad stays NaN
      dy.values[1] = nan;
      const KernelCase relu{"relu", {x}, {{shape, dt}}, {}};
      const KernelCase grad{"relu_grad", {x, dy}, {{shape, dt}}, {}};
      check(relu);
      check(grad);
      const HostTensor y = runCase(cudaBackend(), oneKernelPlan(relu), relu)[0];
      const HostTensor dx = runCase(cudaBackend(), oneKernelPlan(grad), grad)[0];
      for (size_t i = 0; i < x.values.size(); i += 5) {
        EXPECT_TRUE(std::isnan(y.values[i])) << describe(relu) << " at " << i;
        EXPECT_TRUE(std::isnan(dx.values[i])) << describe(grad) << " at " << i;
      }
      EXPECT_TRUE(std::isnan(dx.values[1])) << describe(grad);
    }
}

// ---- math functions, max/min, isnan ----

TEST_F(CudaKernels, MathFunctions) {
  for (plan::DType dt : kFloatTypes)
    for (const Shape& shape : {Shape{1}, Shape{1000}, Shape{17, 33}, Shape{4, 256, 129}}) {
      check({"neg", {uniform(shape, dt)}, {{shape, dt}}});
      check({"sqrt", {uniform(shape, dt, 0.01, 4)}, {{shape, dt}}});
      check({"reciprocal", {awayFromZero(shape, dt)}, {{shape, dt}}});
      check({"exp", {uniform(shape, dt, -10, 10)}, {{shape, dt}}});
      check({"log", {uniform(shape, dt, 0.01, 4)}, {{shape, dt}}});
      check({"erf", {uniform(shape, dt, -4, 4)}, {{shape, dt}}});
      check({"cos", {uniform(shape, dt, -10, 10)}, {{shape, dt}}});
      check({"sin", {uniform(shape, dt, -10, 10)}, {{shape, dt}}});
      for (double e : {2.0, 3.0, 0.5, -0.5, -1.0})
        check({"powf", {uniform(shape, dt, 0.1, 3)}, {{shape, dt}}, {floatAttr("exponent", e)}});
      check({"powf", {uniform(shape, dt)}, {{shape, dt}}, {floatAttr("exponent", 3.0)}});  // negative bases
      check({"erf_grad", {uniform(shape, dt, -4, 4), uniform(shape, dt)}, {{shape, dt}}});
    }
}

TEST_F(CudaKernels, MaxMinAndGradientsBroadcastWithTiesAndNaN) {
  const std::pair<Shape, Shape> pairs[] = {{{4, 5}, {4, 5}}, {{4, 5}, {5}}, {{}, {3, 2}}, {{2, 3, 4}, {3, 1}},
                                           {{1000, 33}, {33}}, {{2, 1, 3, 1}, {1, 4, 1, 5}}};
  for (plan::DType dt : kFloatTypes)
    for (const auto& [sa, sb] : pairs) {
      const Shape y = broadcast(sa, sb);
      HostTensor a = uniform(sa, dt), b = uniform(sb, dt);
      a.values[0] = b.values[0];  // a tie: a wins
      if (a.values.size() > 2) a.values[2] = std::numeric_limits<double>::quiet_NaN();
      if (b.values.size() > 3) b.values[3] = std::numeric_limits<double>::quiet_NaN();
      for (const char* op : {"max", "min"}) check({op, {a, b}, {{y, dt}}});
      for (const char* op : {"max_grad", "min_grad"}) check({op, {a, b, uniform(y, dt)}, {{y, dt}, {y, dt}}});
    }
}

TEST_F(CudaKernels, IsNan) {
  for (plan::DType dt : kFloatTypes)
    for (const Shape& shape : {Shape{}, Shape{7}, Shape{100, 33}}) {
      HostTensor x = uniform(shape, dt);
      for (size_t i = 0; i < x.values.size(); i += 3) x.values[i] = std::numeric_limits<double>::quiet_NaN();
      if (x.values.size() > 1) x.values[1] = std::numeric_limits<double>::infinity();
      check({"isnan", {x}, {{shape, plan::BOOL}}});
    }
}

// ---- where, concat, slice, cast ----

TEST_F(CudaKernels, WhereBroadcastsAllThree) {
  struct Case {
    Shape cond, x, y;
  };
  const Case cases[] = {{{4, 5}, {4, 5}, {4, 5}},       {{1, 1, 16, 16}, {2, 4, 16, 16}, {}},  // a causal mask
                        {{3, 1}, {1, 4}, {2, 1, 1}},    {{}, {5}, {5}},
                        {{64, 1}, {64, 1000}, {1000}},  {{2, 1, 3, 1, 2}, {1, 4, 1, 5, 1}, {3, 1, 2}}};
  for (plan::DType dt : {plan::F32, plan::F64, plan::I64})
    for (const Case& c : cases) {
      const Shape out = broadcast(c.cond, broadcast(c.x, c.y));
      const HostTensor x = dt == plan::I64 ? integers(c.x, -50, 50) : uniform(c.x, dt);
      const HostTensor y = dt == plan::I64 ? integers(c.y, -50, 50) : uniform(c.y, dt);
      check({"where", {bools(c.cond), x, y}, {{out, dt}}});
    }
}

TEST_F(CudaKernels, ConcatOneToEightInputs) {
  struct Case {
    Shape base;
    int64_t axis;
    std::vector<int64_t> sizes;  // each input's extent along the axis
  };
  const Case cases[] = {{{2, 0, 4}, 1, {3, 1, 2}}, {{0, 5}, 0, {4, 1}}, {{3, 0}, 1, {2, 5}},
                        {{7}, 0, {7}},  {{2, 8, 0}, 2, {32, 32}},  {{4, 0, 3}, 1, {1, 2, 3, 4, 5, 6, 7, 8}}};
  for (plan::DType dt : {plan::F32, plan::F64, plan::I64, plan::BOOL})
    for (const Case& c : cases) {
      KernelCase k{"concat", {}, {}, {intAttr("axis", c.axis)}};
      Shape out = c.base;
      out[static_cast<size_t>(c.axis)] = 0;
      for (int64_t size : c.sizes) {
        Shape in = c.base;
        in[static_cast<size_t>(c.axis)] = size;
        out[static_cast<size_t>(c.axis)] += size;
        k.inputs.push_back(dt == plan::I64 ? integers(in, -9, 9) : dt == plan::BOOL ? bools(in) : uniform(in, dt));
      }
      k.outputs = {{out, dt}};
      check(k);
    }
}

TEST_F(CudaKernels, SliceAndGradWithSteps) {
  struct Case {
    Shape x, starts, ends, steps;
  };
  const Case cases[] = {{{4, 6}, {1, 0}, {3, 6}, {1, 1}},          {{4, 6}, {0, 1}, {4, 6}, {2, 2}},
                        {{2, 5, 3}, {1, 0, 0}, {2, 5, 3}, {1, 3, 2}}, {{3, 4}, {2, 4}, {1, 4}, {1, 1}},
                        {{8, 64, 128}, {0, 0, 64}, {8, 64, 128}, {1, 1, 1}},  // rotate_half's second half
                        {{1000, 96}, {0, 32}, {1000, 64}, {1, 1}},  {{}, {}, {}, {}}};
  for (plan::DType dt : {plan::F32, plan::F64, plan::I64})
    for (const Case& c : cases) {
      Shape y;
      for (size_t d = 0; d < c.x.size(); ++d)
        y.push_back(c.ends[d] > c.starts[d] ? (c.ends[d] - c.starts[d] + c.steps[d] - 1) / c.steps[d] : 0);
      const auto attrs = std::vector<plan::Attribute>{intsAttr("starts", c.starts), intsAttr("ends", c.ends),
                                                      intsAttr("steps", c.steps)};
      const HostTensor x = dt == plan::I64 ? integers(c.x, -9, 9) : uniform(c.x, dt);
      const HostTensor dy = dt == plan::I64 ? integers(y, -9, 9) : uniform(y, dt);
      check({"slice", {x}, {{y, dt}}, attrs});
      check({"slice_grad", {dy}, {{c.x, dt}}, attrs});
    }
}

TEST_F(CudaKernels, CastEveryPairWithSpecialValues) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const plan::DType types[] = {plan::F32, plan::F64, plan::I64, plan::BOOL};
  for (plan::DType from : types)
    for (plan::DType to : types)
      for (const Shape& shape : {Shape{}, Shape{9}, Shape{1000, 33}}) {
        HostTensor x = from == plan::I64    ? integers(shape, -1000000, 1000000)
                       : from == plan::BOOL ? bools(shape)
                                            : uniform(shape, from, -100, 100);
        if (from == plan::F32 || from == plan::F64) {
          const double specials[] = {nan, inf, -inf, 1e30, -1e30, 0.0, -0.0, 2.5, -2.5};
          for (size_t i = 0; i < x.values.size() && i < std::size(specials); ++i) x.values[i] = specials[i];
        }
        check({"cast", {x}, {{shape, to}}});
      }
}

// ---- matmul ----

TEST_F(CudaKernels, MatmulTransposesAndBatchBroadcasting) {
  const MatmulShape shapes[] = {
      {{5, 7}, {7, 3}, false, false},
      {{7, 5}, {7, 3}, true, false},
      {{5, 7}, {3, 7}, false, true},
      {{7, 5}, {3, 7}, true, true},
      {{4, 5, 7}, {4, 7, 3}, false, false},        // equal batches
      {{2, 4, 5, 7}, {7, 3}, false, false},        // rank-2 b: folded into one taller product
      {{2, 4, 7, 5}, {7, 3}, true, false},         // rank-2 b, transposed a: stride-0 batch
      {{5, 7}, {3, 7, 6}, false, false},           // rank-2 a: stride-0 batch
      {{2, 1, 5, 7}, {1, 3, 7, 4}, false, false},  // both broadcast: batch walked on the host
      {{3, 1, 6, 5}, {3, 4, 6, 2}, true, false},   // a broadcast over an inner batch dim
      {{8, 16, 64}, {8, 32, 64}, false, true},     // attention scores shape
      {{3, 0}, {0, 4}, false, false},              // an empty sum: zeros
      {{256, 512}, {512, 384}, false, false},      // long k
  };
  for (plan::DType dt : kFloatTypes)
    for (const MatmulShape& s : shapes)
      check({"matmul",
             {uniform(s.a, dt, -1, 1), uniform(s.b, dt, -1, 1)},
             {{matmulResult(s), dt}},
             {intAttr("transpose_a", s.transA), intAttr("transpose_b", s.transB)}});
}

// ---- shape ----

TEST_F(CudaKernels, ReshapeAnyDType) {
  for (plan::DType dt : kFloatTypes) check({"reshape", {uniform({3, 4, 5}, dt)}, {{{12, 5}, dt}}});
  check({"reshape", {integers({6, 7}, -1000, 1000)}, {{{42}, plan::I64}}});
}

TEST_F(CudaKernels, Transpose) {
  const std::pair<Shape, Shape> cases[] = {
      {{3, 4, 5}, {2, 0, 1}}, {{64, 128}, {1, 0}}, {{2, 3, 4, 5}, {0, 2, 1, 3}}, {{2, 3, 4, 5}, {3, 2, 1, 0}}, {{7}, {0}},
      // The innermost dim kept: copied in 16-, 8- or 4-byte vectors, by dtype and extent.
      {{2, 6, 4, 32}, {0, 2, 1, 3}}, {{3, 5, 2, 6}, {0, 2, 1, 3}}, {{4, 3, 2, 2}, {2, 0, 1, 3}}, {{5, 9}, {0, 1}}};
  for (plan::DType dt : {plan::F32, plan::F64, plan::BF16})  // bf16: 2-byte elements, 4-, 8- and 16-byte vectors
    for (const auto& [shape, perm] : cases) {
      Shape y;
      for (int64_t p : perm) y.push_back(shape[static_cast<size_t>(p)]);
      check({"transpose", {uniform(shape, dt)}, {{y, dt}}, {intsAttr("perm", perm)}});
    }
  check({"transpose", {integers({4, 6}, -9, 9)}, {{{6, 4}, plan::I64}}, {intsAttr("perm", {1, 0})}});
}

TEST_F(CudaKernels, BroadcastTo) {
  const std::pair<Shape, Shape> cases[] = {
      {{3, 1}, {2, 3, 4}}, {{}, {5}}, {{4}, {3, 4}}, {{1, 1}, {6, 7}}, {{2, 1, 3}, {2, 5, 3}},
      // The innermost dim kept: copied in vectors.
      {{5, 8}, {3, 5, 8}}, {{1, 4, 6}, {2, 4, 6}}, {{2, 1, 12}, {2, 3, 12}}};
  for (plan::DType dt : {plan::F32, plan::F64, plan::BF16})
    for (const auto& [from, to] : cases) check({"broadcast_to", {uniform(from, dt)}, {{to, dt}}});
}

TEST_F(CudaKernels, SumTo) {
  const std::pair<Shape, Shape> cases[] = {
      {{2, 3, 4}, {3, 1}},   {{8, 16}, {16}},   {{8, 16}, {8, 1}},     {{5000, 64}, {64}},  // split columns
      {{100000}, {}},        {{4, 1, 6}, {1, 1, 1}}, {{3, 4}, {3, 4}}, {{64, 3000}, {64, 1}},  // long rows
      {{16, 33, 8}, {33, 1}}};
  for (plan::DType dt : kFloatTypes)
    for (const auto& [from, to] : cases)
      check({"sum_to", {uniform(from, dt)}, {{to, dt}}}, dt == plan::F32 ? 1e-5 : 1e-11);
}

// ---- reduce ----

TEST_F(CudaKernels, ReduceSumAndMean) {
  struct Case {
    Shape x, axes;
    bool keepdims;
  };
  const Case cases[] = {{{4, 5, 6}, {1}, true},  {{4, 5, 6}, {1}, false}, {{4, 5, 6}, {0, 2}, false},
                        {{4, 5, 6}, {}, false},  {{2, 100000}, {1}, true}, {{4096, 3}, {0}, false},
                        {{7, 9, 11, 3}, {1, 3}, true}, {{3, 0}, {1}, false}};
  for (plan::DType dt : kFloatTypes)
    for (const Case& c : cases) {
      Shape y;
      for (size_t i = 0; i < c.x.size(); ++i) {
        const bool reduced = c.axes.empty() || std::count(c.axes.begin(), c.axes.end(), static_cast<int64_t>(i));
        if (!reduced) y.push_back(c.x[i]);
        else if (c.keepdims) y.push_back(1);
      }
      // An empty list cannot be written as an attribute: no `axes` means every dim.
      std::vector<plan::Attribute> attrs{intAttr("keepdims", c.keepdims)};
      if (!c.axes.empty()) attrs.push_back(intsAttr("axes", c.axes));
      for (const char* kernel : {"reduce_sum", "reduce_mean"})
        check({kernel, {uniform(c.x, dt)}, {{y, dt}}, attrs}, dt == plan::F32 ? 1e-5 : 1e-11);
    }
}

// ---- softmax ----

TEST_F(CudaKernels, SoftmaxAndGradAlongEveryKindOfAxis) {
  const std::pair<Shape, int64_t> cases[] = {{{4, 10}, 1}, {{3, 5, 7}, 1}, {{3, 5, 7}, 0}, {{2, 3000}, 1},
                                             {{5, 2048}, 1}, {{6, 4}, 0}, {{9, 1}, 1}};
  for (plan::DType dt : kFloatTypes)
    for (const auto& [shape, axis] : cases) {
      check({"softmax", {uniform(shape, dt, -8, 8)}, {{shape, dt}}, {intAttr("axis", axis)}});
      check({"softmax_grad", {uniform(shape, dt, 0, 1), uniform(shape, dt)}, {{shape, dt}}, {intAttr("axis", axis)}});
    }
}

// ---- gather ----

TEST_F(CudaKernels, GatherWithNegativeIndices) {
  struct Case {
    Shape data, indices;
    int64_t axis;
  };
  const Case cases[] = {{{10, 4}, {6}, 0}, {{3, 10, 4}, {2, 5}, 1}, {{3, 4, 10}, {7}, 2}, {{1000, 64}, {4, 128}, 0}, {{5, 3}, {}, 0}};
  for (plan::DType dt : kFloatTypes)
    for (const Case& c : cases) {
      const int64_t a = c.data[static_cast<size_t>(c.axis)];
      Shape y(c.data.begin(), c.data.begin() + c.axis);
      y.insert(y.end(), c.indices.begin(), c.indices.end());
      y.insert(y.end(), c.data.begin() + c.axis + 1, c.data.end());
      check({"gather", {uniform(c.data, dt), integers(c.indices, -a, a - 1)}, {{y, dt}}, {intAttr("axis", c.axis)}});
    }
  check({"gather", {integers({8, 3}, -50, 50), integers({5}, -8, 7)}, {{{5, 3}, plan::I64}}, {intAttr("axis", 0)}});
}

TEST_F(CudaKernels, GatherGradSumsRepeatedRows) {
  struct Case {
    Shape data, indices;
    int64_t axis;
    int64_t rows;  // indices drawn from [-rows, rows - 1]: few rows, many repeats
  };
  const Case cases[] = {{{10, 4}, {6}, 0, 10}, {{3, 10, 4}, {2, 5}, 1, 3}, {{3, 4, 10}, {7}, 2, 10},
                        {{1000, 64}, {8, 256}, 0, 5}, {{50, 2}, {}, 0, 50}, {{40000, 8}, {4096}, 0, 40000}};
  for (plan::DType dt : kFloatTypes)
    for (const Case& c : cases) {
      Shape dy(c.data.begin(), c.data.begin() + c.axis);
      dy.insert(dy.end(), c.indices.begin(), c.indices.end());
      dy.insert(dy.end(), c.data.begin() + c.axis + 1, c.data.end());
      check({"gather_grad", {integers(c.indices, -c.rows, c.rows - 1), uniform(dy, dt)}, {{c.data, dt}}, {intAttr("axis", c.axis)}},
            dt == plan::F32 ? 1e-5 : 1e-11);
    }
}

// ---- layer_norm ----

TEST_F(CudaKernels, LayerNormAndGrad) {
  const std::pair<Shape, int64_t> cases[] = {{{6, 32}, 1}, {{2, 3, 40}, 1}, {{4, 1000}, 1}, {{4096, 64}, 1}, {{5, 7}, 0}, {{3, 1}, 1}};
  for (plan::DType dt : kFloatTypes)
    for (const auto& [shape, axis] : cases) {
      const Shape normalized(shape.begin() + axis, shape.end());
      const auto attrs = std::vector<plan::Attribute>{intAttr("axis", axis), floatAttr("epsilon", 1e-5)};
      check({"layer_norm", {uniform(shape, dt, -3, 5), uniform(normalized, dt), uniform(normalized, dt)}, {{shape, dt}}, attrs});
      check({"layer_norm_grad",
             {uniform(shape, dt, -3, 5), uniform(normalized, dt), uniform(shape, dt)},
             {{shape, dt}, {normalized, dt}, {normalized, dt}},
             attrs},
            dt == plan::F32 ? 2e-5 : 1e-11);
    }
}

// The register path (a block per row, runtime/cuda/RowNorm.cuh) at every
// packs-per-thread count, 16-byte and element-wide accesses, rows not a
// multiple of the blocks, one row; and rows past its limit (the warp-per-row
// path).
TEST_F(CudaKernels, LayerNormRowPaths) {
  const Shape cases[] = {{1237, 2048}, {301, 4096}, {67, 8192}, {9, 8196},  {1237, 2047},
                         {517, 1001},  {300, 301},  {7, 4097}, {5000, 64}, {1, 2048}};
  for (plan::DType dt : kFloatTypes)
    for (const Shape& shape : cases) {
      const Shape normalized = {shape[1]};
      const auto attrs = std::vector<plan::Attribute>{intAttr("axis", 1), floatAttr("epsilon", 1e-5)};
      // An offset mean (values in [7, 9]) checks the two-pass variance.
      check({"layer_norm", {uniform(shape, dt, 7, 9), uniform(normalized, dt), uniform(normalized, dt)}, {{shape, dt}},
             attrs});
      check({"layer_norm_grad",
             {uniform(shape, dt, -3, 5), uniform(normalized, dt), uniform(shape, dt)},
             {{shape, dt}, {normalized, dt}, {normalized, dt}},
             attrs},
            dt == plan::F32 ? 2e-5 : 1e-11);
    }
}

// ---- attention and rotary ----

// Multi-head, grouped-query and multi-query; head dims from 3 to the 256
// limit (partly filled lanes); causal, and not with more keys than queries.
// The gradient reads y and lse from the CPU forward of the same inputs.
TEST_F(CudaKernels, AttentionAndGrad) {
  struct Case {
    int64_t b, hq, hkv, sq, skv, d;
    bool causal;
  };
  const Case cases[] = {{1, 2, 2, 5, 5, 4, true},    {2, 4, 2, 17, 17, 16, true}, {2, 8, 1, 33, 33, 64, true},
                        {1, 4, 2, 40, 40, 128, true}, {1, 2, 1, 7, 9, 3, false},  {1, 2, 2, 9, 9, 256, true},
                        {3, 6, 3, 12, 20, 33, true}};
  for (plan::DType dt : kFloatTypes)
    for (const Case& c : cases) {
      const Shape q{c.b, c.hq, c.sq, c.d}, kv{c.b, c.hkv, c.skv, c.d}, lse{c.b, c.hq, c.sq};
      const std::vector<plan::Attribute> attrs = {floatAttr("scale", 1.0 / std::sqrt(static_cast<double>(c.d))),
                                                  intAttr("causal", c.causal ? 1 : 0)};
      const HostTensor hq = uniform(q, dt), hk = uniform(kv, dt), hv = uniform(kv, dt);
      check({"attention", {hq, hk, hv}, {{q, dt}, {lse, dt}}, attrs}, dt == plan::F32 ? 1e-5 : 1e-11);
      const std::vector<HostTensor> forward = runKernel("attention", {hq, hk, hv}, {{q, dt}, {lse, dt}}, attrs);
      check({"attention_grad", {hq, hk, hv, forward[0], forward[1], uniform(q, dt)}, {{q, dt}, {kv, dt}, {kv, dt}}, attrs},
            dt == plan::F32 ? 1e-5 : 1e-11);
    }
}

TEST_F(CudaKernels, AttentionHeadDimLimit) {
  const Shape q{1, 1, 2, 288};
  EXPECT_EQ(cudaError({"attention", {uniform(q, plan::F32), uniform(q, plan::F32), uniform(q, plan::F32)},
                       {{q, plan::F32}, {{1, 1, 2}, plan::F32}}, {floatAttr("scale", 1.0), intAttr("causal", 1)}}),
            "attention: head dim 288 exceeds 256");
}

// Tables as the exports hold them ([1, 1, S, D]), plain [S, D], and one per
// batch row ([B, 1, S, D]); odd head counts and long rows.
TEST_F(CudaKernels, RotaryAndGrad) {
  const std::pair<Shape, Shape> cases[] = {{{2, 4, 8, 16}, {1, 1, 8, 16}}, {{3, 5, 6}, {5, 6}},
                                           {{2, 3, 7, 64}, {2, 1, 7, 64}}, {{1, 32, 128, 128}, {1, 1, 128, 128}},
                                           {{4, 2}, {2}}};
  for (plan::DType dt : kFloatTypes)
    for (const auto& [x, table] : cases)
      for (const char* kernel : {"rotary", "rotary_grad"})
        check({kernel, {uniform(x, dt), uniform(table, dt, -1, 1), uniform(table, dt, -1, 1)}, {{x, dt}}});
}

// ---- cross-entropy ----

TEST_F(CudaKernels, SoftmaxCrossEntropyAndGrad) {
  struct Case {
    Shape logits;
    const char* reduction;
    bool ignore;
  };
  const Case cases[] = {{{8, 10}, "mean", true}, {{8, 10}, "sum", true},  {{4, 5, 3}, "mean", true},
                        {{4, 5, 3, 2}, "sum", false}, {{64, 1000}, "mean", true}, {{16, 7}, "mean", false},
                        {{9, 5000}, "sum", true}};  // a block per row
  for (plan::DType dt : kFloatTypes)
    for (const Case& c : cases) {
      Shape labelsShape{c.logits[0]};
      labelsShape.insert(labelsShape.end(), c.logits.begin() + 2, c.logits.end());
      std::vector<plan::Attribute> attrs{stringAttr("reduction", c.reduction)};
      if (c.ignore) attrs.push_back(intAttr("ignore_index", -100));
      const HostTensor labels = integers(labelsShape, 0, c.logits[1] - 1, -100, c.ignore ? 0.25 : 0);
      const HostTensor logits = uniform(c.logits, dt, -6, 6);
      check({"softmax_ce", {logits, labels}, {{{}, dt}}, attrs});
      check({"softmax_ce_grad", {logits, labels, uniform({}, dt)}, {{c.logits, dt}}, attrs});
    }
}

TEST_F(CudaKernels, SoftmaxCrossEntropyWithEveryLabelIgnoredIsZero) {
  for (plan::DType dt : kFloatTypes) {
    const auto attrs = std::vector<plan::Attribute>{intAttr("ignore_index", 3)};
    const HostTensor labels = integers({6}, 3, 3);
    check({"softmax_ce", {uniform({6, 5}, dt), labels}, {{{}, dt}}, attrs});
    check({"softmax_ce_grad", {uniform({6, 5}, dt), labels, uniform({}, dt)}, {{{6, 5}, dt}}, attrs});
  }
}

TEST_F(CudaKernels, NextTokenCrossEntropyAndGrad) {
  const Shape cases[] = {{2, 9, 50}, {4, 64, 1000}, {1, 1, 7}, {3, 2, 33}, {2, 5, 4096}};
  for (plan::DType dt : kFloatTypes)
    for (const Shape& logitsShape : cases)
      for (bool ignore : {true, false}) {
        std::vector<plan::Attribute> attrs;
        if (ignore) attrs.push_back(intAttr("ignore_index", -1));
        const HostTensor tokens = integers({logitsShape[0], logitsShape[1]}, 0, logitsShape[2] - 1, -1, ignore ? 0.2 : 0);
        const HostTensor logits = uniform(logitsShape, dt, -6, 6);
        check({"next_token_ce", {logits, tokens}, {{{}, dt}}, attrs});
        check({"next_token_ce_grad", {logits, tokens, uniform({}, dt)}, {{logitsShape, dt}}, attrs});
      }
}

}  // namespace
}  // namespace megatrain::runtime::testing
