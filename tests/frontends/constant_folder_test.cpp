// constant_folder_test.cpp - the import-time evaluator (frontends/onnx/ConstantFolder.cpp
// and the *Folds.cpp it dispatches to) against the ONNX spec's semantics, one op family at
// a time, on values small enough to check by hand: the edge cases exported masks and
// position ids rely on (Slice clamping and negative steps, Range, CumSum, GatherND,
// casts, integer division).
#include "ConstantFolder.h"
#include "TensorData.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace {

using namespace megatrain::onnx_import;

ConstTensor ints(std::vector<int64_t> values, std::vector<int64_t> shape = {}) {
  ConstTensor t;
  t.kind = ConstKind::I64;
  t.shape = shape.empty() && values.size() != 1
                ? std::vector<int64_t>{(int64_t)values.size()}
                : shape;
  t.i = std::move(values);
  return t;
}

ConstTensor floats(std::vector<double> values, std::vector<int64_t> shape = {},
                   ConstKind kind = ConstKind::F32) {
  ConstTensor t;
  t.kind = kind;
  t.shape = shape.empty() && values.size() != 1
                ? std::vector<int64_t>{(int64_t)values.size()}
                : shape;
  t.f = std::move(values);
  return t;
}

ConstTensor bools(std::vector<int64_t> values, std::vector<int64_t> shape) {
  ConstTensor t = ints(std::move(values), std::move(shape));
  t.kind = ConstKind::Bool;
  return t;
}

/// A node with attributes given as (name, int), (name, ints) or (name, float).
struct Node {
  onnx::NodeProto proto;
  explicit Node(const std::string &op, int outputs = 1) {
    proto.set_op_type(op);
    for (int k = 0; k < outputs; ++k)
      proto.add_output("out" + std::to_string(k));
  }
  Node &attr(const std::string &name, int64_t value) {
    auto *a = proto.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
    return *this;
  }
  Node &attr(const std::string &name, std::vector<int64_t> values) {
    auto *a = proto.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values)
      a->add_ints(v);
    return *this;
  }
};

/// Folds `node` on `inputs` (nullptr: an absent optional input).
std::vector<ConstTensor> fold(Node node, std::vector<const ConstTensor *> inputs,
                              std::string *error = nullptr) {
  std::vector<FoldInput> in(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    node.proto.add_input(inputs[k] ? "in" + std::to_string(k) : "");
    if (!inputs[k])
      continue;
    in[k].present = true;
    in[k].value = inputs[k];
    in[k].shape = inputs[k]->shape;
    in[k].kind = inputs[k]->kind;
  }
  std::vector<ConstTensor> out;
  std::string problem;
  bool ok = foldNode(node.proto, 18, in, out, problem);
  if (error) {
    EXPECT_FALSE(ok);
    *error = problem;
  } else {
    EXPECT_TRUE(ok) << problem;
  }
  return out;
}

TEST(ConstantFolder, SliceClampsAndStepsBackwards) {
  ConstTensor x = ints({0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  const int64_t big = std::numeric_limits<int64_t>::max();
  ConstTensor s1 = ints({-1}), e1 = ints({-big}), axes = ints({0}), step1 = ints({-2});
  auto back = fold(Node("Slice"), {&x, &s1, &e1, &axes, &step1});
  EXPECT_EQ(back[0].i, (std::vector<int64_t>{9, 7, 5, 3, 1}));
  ConstTensor s2 = ints({2}), e2 = ints({big});
  auto tail = fold(Node("Slice"), {&x, &s2, &e2});
  EXPECT_EQ(tail[0].i, (std::vector<int64_t>{2, 3, 4, 5, 6, 7, 8, 9}));
  ConstTensor s3 = ints({7}), e3 = ints({3});
  auto empty = fold(Node("Slice"), {&x, &s3, &e3});
  EXPECT_EQ(empty[0].shape, (std::vector<int64_t>{0}));
}

TEST(ConstantFolder, RangeCountsAsTheSpecSays) {
  ConstTensor a = floats({0.0}, {}), b = floats({1.0}, {}), d = floats({0.25}, {});
  a.shape = b.shape = d.shape = {};
  EXPECT_EQ(fold(Node("Range"), {&a, &b, &d})[0].f,
            (std::vector<double>{0, 0.25, 0.5, 0.75}));
  ConstTensor s = ints({10}), l = ints({0}), step = ints({-3});
  EXPECT_EQ(fold(Node("Range"), {&s, &l, &step})[0].i,
            (std::vector<int64_t>{10, 7, 4, 1}));
}

// Bounds whose range has no length, or more elements than int64 counts, are
// refused by name (a NaN length was converted to int64: undefined, and the
// int64 bounds' difference overflowed).
TEST(ConstantFolder, RangeOfNaNOrExtremeBoundsIsRefused) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  ConstTensor s = floats({nan}), l = floats({4}), d = floats({1});
  std::string error;
  fold(Node("Range"), {&s, &l, &d}, &error);
  EXPECT_EQ(error, "start, limit and delta give no length (NaN)");
  ConstTensor zero = floats({0}), huge = floats({inf});
  error.clear();
  fold(Node("Range"), {&zero, &huge, &d}, &error);
  EXPECT_NE(error.find("9223372036854775807"), std::string::npos) << error;
  ConstTensor lo = ints({std::numeric_limits<int64_t>::min()}), hi = ints({std::numeric_limits<int64_t>::max()}),
              one = ints({1});
  error.clear();
  fold(Node("Range"), {&lo, &hi, &one}, &error);
  EXPECT_NE(error.find("9223372036854775807"), std::string::npos) << error;
  ConstTensor down = ints({-3});
  EXPECT_EQ(fold(Node("Range"), {&hi, &lo, &down}, &error).size(), 0u);
}

TEST(ConstantFolder, CumSumExclusiveAndReverse) {
  ConstTensor x = ints({1, 2, 3}), axis = ints({0});
  axis.shape = {};
  EXPECT_EQ(fold(Node("CumSum"), {&x, &axis})[0].i, (std::vector<int64_t>{1, 3, 6}));
  EXPECT_EQ(
      fold(Node("CumSum").attr("exclusive", 1).attr("reverse", 1), {&x, &axis})[0].i,
      (std::vector<int64_t>{5, 3, 0}));
}

TEST(ConstantFolder, TriluKeepsTheRequestedTriangle) {
  ConstTensor ones = ints({1, 1, 1, 1, 1, 1, 1, 1, 1}, {3, 3}), k = ints({-1});
  k.shape = {};
  EXPECT_EQ(fold(Node("Trilu").attr("upper", 0), {&ones, &k})[0].i,
            (std::vector<int64_t>{0, 0, 0, 1, 0, 0, 1, 1, 0}));
  EXPECT_EQ(fold(Node("Trilu"), {&ones})[0].i,
            (std::vector<int64_t>{1, 1, 1, 0, 1, 1, 0, 0, 1}));
}

TEST(ConstantFolder, GatherAndGatherND) {
  ConstTensor data = ints({1, 2, 3, 4}, {2, 2});
  ConstTensor pairs = ints({0, 1, 1, 0}, {2, 2});
  auto nd = fold(Node("GatherND"), {&data, &pairs});
  EXPECT_EQ(nd[0].shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(nd[0].i, (std::vector<int64_t>{2, 3}));
  ConstTensor col = ints({-1}); // a scalar index drops the axis
  auto g = fold(Node("Gather").attr("axis", 1), {&data, &col});
  EXPECT_EQ(g[0].shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(g[0].i, (std::vector<int64_t>{2, 4}));
  ConstTensor bad = ints({2});
  std::string error;
  fold(Node("Gather"), {&data, &bad}, &error);
  EXPECT_EQ(error, "index 2 is out of range for a dim of 2");
}

TEST(ConstantFolder, CastsTruncateAndTestNonzero) {
  ConstTensor x = floats({-1.7, 0.0, 2.9, NAN});
  Node toInt("Cast");
  toInt.attr("to", (int64_t)onnx::TensorProto::INT64);
  EXPECT_EQ(fold(toInt, {&x})[0].i, (std::vector<int64_t>{-1, 0, 2, 0}));
  Node toBool("Cast");
  toBool.attr("to", (int64_t)onnx::TensorProto::BOOL);
  auto b = fold(toBool, {&x});
  EXPECT_EQ(b[0].kind, ConstKind::Bool);
  EXPECT_EQ(b[0].i, (std::vector<int64_t>{1, 0, 1, 1}));
  // CastLike reads only the type of its second input.
  ConstTensor ids = ints({3, 4});
  std::vector<FoldInput> in(2);
  in[0] = {true, &ids, ids.shape, ids.kind};
  in[1] = {true, nullptr, {5}, ConstKind::F64};
  Node like("CastLike");
  like.proto.add_input("a");
  like.proto.add_input("b");
  std::vector<ConstTensor> out;
  std::string error;
  ASSERT_TRUE(foldReadsTypeOnly("CastLike", 1));
  ASSERT_TRUE(foldNode(like.proto, 18, in, out, error)) << error;
  EXPECT_EQ(out[0].kind, ConstKind::F64);
  EXPECT_EQ(out[0].f, (std::vector<double>{3, 4}));
}

TEST(ConstantFolder, IntegerDivisionTruncatesAndModFollowsTheDivisor) {
  ConstTensor a = ints({-7, 7}), b = ints({2, -3});
  EXPECT_EQ(fold(Node("Div"), {&a, &b})[0].i, (std::vector<int64_t>{-3, -2}));
  EXPECT_EQ(fold(Node("Mod"), {&a, &b})[0].i, (std::vector<int64_t>{1, -2}));
  ConstTensor zero = ints({0});
  std::string error;
  fold(Node("Div"), {&a, &zero}, &error);
  EXPECT_EQ(error, "integer division by zero");
}

// Integer Pow wraps as numpy's int64 power, and an exponent near 2^63 takes
// 63 squarings, not 2^63 multiplications (a fuzzed model hung here).
TEST(ConstantFolder, IntegerPowWrapsAndHugeExponentsFinish) {
  ConstTensor base = ints({3, 2, -1, 1, 5}), exponent = ints({4, 64, (int64_t{1} << 62) + 1, -3, -1});
  EXPECT_EQ(fold(Node("Pow"), {&base, &exponent})[0].i, (std::vector<int64_t>{81, 0, -1, 1, 0}));
  ConstTensor three = ints({3}), big = ints({std::numeric_limits<int64_t>::max()});
  // 3 is odd, so every power is odd: wrapping keeps the low bit.
  EXPECT_EQ(fold(Node("Pow"), {&three, &big})[0].i[0] & 1, 1);
}

// A Reshape target whose dims multiply past int64 is refused, not wrapped.
TEST(ConstantFolder, ReshapeTargetsThatOverflowAreRefused) {
  ConstTensor x = ints({1, 2, 3, 4});
  ConstTensor target = ints({4, 5758133589979955202});
  std::string error;
  fold(Node("Reshape"), {&x, &target}, &error);
  EXPECT_EQ(error, "cannot reshape [4] to [4x5758133589979955202]");
}

TEST(ConstantFolder, Float32ResultsAreRoundedToFloat) {
  ConstTensor one = floats({1.0}), three = floats({3.0});
  one.shape = three.shape = {};
  EXPECT_EQ(fold(Node("Div"), {&one, &three})[0].f[0], (double)(1.0f / 3.0f));
  ConstTensor oneD = floats({1.0}, {}, ConstKind::F64),
              threeD = floats({3.0}, {}, ConstKind::F64);
  oneD.shape = threeD.shape = {};
  EXPECT_EQ(fold(Node("Div"), {&oneD, &threeD})[0].f[0], 1.0 / 3.0);
}

TEST(ConstantFolder, BroadcastingWhereExpandAndComparisons) {
  ConstTensor cond = bools({1, 0}, {2, 1});
  ConstTensor x = floats({0.0}, {}), y = floats({-1, -2, -3}, {3});
  x.shape = {};
  auto w = fold(Node("Where"), {&cond, &x, &y});
  EXPECT_EQ(w[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(w[0].f, (std::vector<double>{0, 0, 0, -1, -2, -3}));
  ConstTensor row = ints({1, 2, 3}, {1, 3}), shape = ints({2, 1});
  auto e = fold(Node("Expand"), {&row, &shape});
  EXPECT_EQ(e[0].shape, (std::vector<int64_t>{2, 3}));
  ConstTensor col = ints({2, 3}, {2, 1});
  auto le = fold(Node("LessOrEqual"), {&row, &col});
  EXPECT_EQ(le[0].kind, ConstKind::Bool);
  EXPECT_EQ(le[0].i, (std::vector<int64_t>{1, 1, 0, 1, 1, 1}));
  auto m = fold(Node("Max"), {&row, &col, &row});
  EXPECT_EQ(m[0].i, (std::vector<int64_t>{2, 2, 3, 3, 3, 3}));
}

TEST(ConstantFolder, ShapeOpsAndSplit) {
  ConstTensor x = ints({0, 1, 2, 3, 4, 5}, {1, 2, 3});
  auto shape = fold(Node("Shape").attr("start", -2), {&x});
  EXPECT_EQ(shape[0].i, (std::vector<int64_t>{2, 3}));
  ConstTensor axes = ints({-1, 0});
  auto un = fold(Node("Unsqueeze"), {&x, &axes});
  EXPECT_EQ(un[0].shape, (std::vector<int64_t>{1, 1, 2, 3, 1}));
  auto sq = fold(Node("Squeeze"), {&x});
  EXPECT_EQ(sq[0].shape, (std::vector<int64_t>{2, 3}));
  auto t = fold(Node("Transpose").attr("perm", std::vector<int64_t>{2, 0, 1}), {&x});
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{3, 1, 2}));
  EXPECT_EQ(t[0].i, (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
  ConstTensor five = ints({0, 1, 2, 3, 4});
  auto parts = fold(Node("Split", 3).attr("num_outputs", 3), {&five});
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].i, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(parts[2].i, (std::vector<int64_t>{4}));
  ConstTensor target = ints({2, 2});
  auto zeros = fold(Node("ConstantOfShape"), {&target});
  EXPECT_EQ(zeros[0].kind, ConstKind::F32);
  EXPECT_EQ(zeros[0].f, (std::vector<double>{0, 0, 0, 0}));
}

TEST(ConstantFolder, MatMulWithVectorsAndBatches) {
  ConstTensor v = floats({1, 2}), m = floats({1, 0, 0, 1, 1, 1}, {2, 3});
  auto vm = fold(Node("MatMul"), {&v, &m});
  EXPECT_EQ(vm[0].shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(vm[0].f, (std::vector<double>{3, 2, 2}));
}

TEST(ConstantFolder, ResultsOverTheLimitAreRefused) {
  ConstTensor huge = ints({1 << 14, 1 << 14}), one = floats({1.0});
  one.shape = {};
  std::string error;
  fold(Node("Expand"), {&one, &huge}, &error);
  EXPECT_EQ(error, "the result [16384x16384] has 268435456 elements; values evaluated at "
                   "import time are limited to 67108864");
}

TEST(ConstantFolder, RepeatedDimsAreDropped) {
  // A [2, 1, 2, 2] mask equal for both batch rows keeps one.
  ConstTensor mask = floats({0, -1, 0, 0, 0, -1, 0, 0}, {2, 1, 2, 2});
  ConstTensor reduced;
  ASSERT_TRUE(dropRepeatedDims(mask, reduced));
  EXPECT_EQ(reduced.shape, (std::vector<int64_t>{1, 1, 2, 2}));
  EXPECT_EQ(reduced.f, (std::vector<double>{0, -1, 0, 0}));
  ConstTensor distinct = floats({1, 2}, {2});
  EXPECT_FALSE(dropRepeatedDims(distinct, reduced));
}

TEST(ConstantFolder, HalfInitializersReadAsFloat) {
  // FLOAT16 and BFLOAT16 initializers (a model saved in bf16) read exactly into
  // f32: normals, the largest half, subnormals, zeros, infinities.
  const int32_t half = onnx::TensorProto::FLOAT16, bf16 = onnx::TensorProto::BFLOAT16;
  EXPECT_EQ(halfBitsToFloat(half, 0x3c00), 1.0f);
  EXPECT_EQ(halfBitsToFloat(half, 0xc000), -2.0f);
  EXPECT_EQ(halfBitsToFloat(half, 0x7bff), 65504.0f);
  EXPECT_EQ(halfBitsToFloat(half, 0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(halfBitsToFloat(half, 0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(halfBitsToFloat(half, 0x8000), -0.0f);
  EXPECT_TRUE(std::signbit(halfBitsToFloat(half, 0x8000)));
  EXPECT_EQ(halfBitsToFloat(half, 0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(halfBitsToFloat(half, 0x7e00)));
  EXPECT_EQ(halfBitsToFloat(bf16, 0x3f80), 1.0f);
  EXPECT_EQ(halfBitsToFloat(bf16, 0xc0a0), -5.0f);

  onnx::TensorProto t;
  t.set_data_type(bf16);
  t.add_dims(2);
  t.set_raw_data(std::string("\x80\x3f\xa0\xc0", 4)); // 1, -5 little-endian
  ConstTensor value;
  std::string error;
  ASSERT_TRUE(readConstTensor(t, value, error)) << error;
  EXPECT_EQ(value.kind, ConstKind::F32);
  EXPECT_EQ(value.f, (std::vector<double>{1.0, -5.0}));
  t.clear_raw_data();
  t.set_data_type(half);
  t.add_int32_data(0x3c00);
  t.add_int32_data(0xc000);
  ASSERT_TRUE(readConstTensor(t, value, error)) << error;
  EXPECT_EQ(value.f, (std::vector<double>{1.0, -2.0}));
}

} // namespace
