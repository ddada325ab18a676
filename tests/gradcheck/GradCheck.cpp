// GradCheck.cpp - every gradient rule against float64 central finite differences.
//
// Each case is a small float64 function of random trainable parameters whose
// loss is sum(op(params) * R) for a random constant R (or the op itself when
// it is a loss). It goes through the real pipeline - mt-add-loss, mt-autodiff,
// mt-adamw with lr = 0, schedule, liveness, memory planning, plan emission -
// and runs on the CPU backend; the gradient `grad:P` the plan produces is then
// compared, element by element, with (L(P + eps) - L(P - eps)) / 2 eps, where
// the perturbed parameter is written into the plan's PARAMETER tensor P.
// Going through the whole pipeline on purpose: a rule whose ops schedule,
// plan or run wrongly fails here just like a wrong formula.

#include "GradCase.h"

#include "megatrain/Dialect/MtDialect.h"
#include "megatrain/Passes/Passes.h"
#include "megatrain/Pipeline.h"
#include "megatrain/Plan/PlanEmitter.h"
#include "megatrain/runtime/CpuBackend.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/OnnxWeights.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>
#include <onnx/onnx.pb.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace megatrain::gradcheck {
namespace {

using megatrain::runtime::CpuBackend;
using megatrain::runtime::Executor;
using megatrain::runtime::OnnxWeights;

int64_t elementsOf(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string tensorType(const std::vector<int64_t>& shape) {
  std::string s = "tensor<";
  for (int64_t d : shape) s += std::to_string(d) + "x";
  return s + "f64>";
}

std::string literal(const std::vector<double>& values) {
  std::ostringstream os;
  os.precision(17);
  os << "[";
  for (size_t i = 0; i < values.size(); ++i) os << (i ? ", " : "") << values[i];
  os << "]";
  return os.str();
}

std::vector<double> randomValues(int64_t n, const Param& p, std::mt19937& rng) {
  std::uniform_real_distribution<double> dist(p.lo, p.hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) {
    do x = dist(rng);
    while (std::abs(x) < p.awayFromZero);
  }
  return v;
}

// The imported-model form the pipeline starts from: a function returning
// the loss as the graph output "loss".
std::string buildModule(const GradCase& c, std::mt19937& rng) {
  std::ostringstream os;
  os << "func.func @main() -> (tensor<f64> {mt.output_name = \"loss\"}) {\n";
  for (const Param& p : c.params)
    os << "  %" << p.name << " = mt.param {name = \"" << p.name
       << "\", trainable = true} : " << tensorType(p.shape) << "\n";
  os << c.body << "\n";
  if (!c.yShape) {
    os << "  return %y : tensor<f64>\n}\n";
    return os.str();
  }
  const std::vector<int64_t>& shape = *c.yShape;
  int64_t n = elementsOf(shape);
  std::string ty = tensorType(shape), flat = tensorType({n});
  Param weights{"R", shape};
  os << "  %r_flat = mt.constant {value = dense<" << literal(randomValues(n, weights, rng))
     << "> : " << flat << "} : " << flat << "\n"
     << "  %r = mt.reshape %r_flat : (" << flat << ") -> " << ty << "\n"
     << "  %yr = mt.mul %y, %r : (" << ty << ", " << ty << ") -> " << ty << "\n";
  if (shape.empty()) {
    os << "  return %yr : tensor<f64>\n}\n";
    return os.str();
  }
  os << "  %loss = mt.reduce_sum %yr {axes = array<i64";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : ": ") << i;
  os << ">, keepdims = false} : (" << ty << ") -> tensor<f64>\n"
     << "  return %loss : tensor<f64>\n}\n";
  return os.str();
}

// The runtime reads PARAMETER values from an ONNX model's initializers; the
// test's model holds nothing else.
std::string writeWeights(const std::string& dir, const std::vector<Param>& params,
                         const std::vector<std::vector<double>>& values) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  onnx::GraphProto* graph = model.mutable_graph();
  graph->set_name("gradcheck");
  for (size_t i = 0; i < params.size(); ++i) {
    onnx::TensorProto* t = graph->add_initializer();
    t->set_name(params[i].name);
    t->set_data_type(onnx::TensorProto::DOUBLE);
    for (int64_t d : params[i].shape) t->add_dims(d);
    for (double v : values[i]) t->add_double_data(v);
  }
  std::string path = dir + "/weights.onnx";
  std::ofstream out(path, std::ios::binary);
  model.SerializeToOstream(&out);
  return path;
}

}  // namespace

// gtest prints a failing case by its name, not its bytes.
void PrintTo(const GradCase& c, std::ostream* os) { *os << c.name; }

namespace {

class GradCheck : public ::testing::TestWithParam<GradCase> {};

TEST_P(GradCheck, MatchesFiniteDifferences) {
  const GradCase& c = GetParam();
  std::mt19937 rng(std::hash<std::string>{}(c.name) & 0xffffffff);
  std::vector<std::vector<double>> values;
  for (const Param& p : c.params) values.push_back(randomValues(elementsOf(p.shape), p, rng));

  // Compile.
  mlir::MLIRContext context;
  context.loadDialect<megatrain::mt::MtDialect, mlir::func::FuncDialect>();
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler capture(&context, [&](mlir::Diagnostic& d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  std::string source = buildModule(c, rng);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(source, &context);
  ASSERT_TRUE(module) << diagnostics << source;

  megatrain::PipelineOptions options;
  options.lossOutput = "loss";
  options.lr = 0.0;  // the step must leave the parameters as they are
  options.weightDecay = 0.0;
  options.fusion = !c.fusedKernel.empty();
  // A case that checks its fused kernel by name keeps it out of pointwise programs; every
  // other case's gradients also run through mt-fuse-pointwise's programs.
  options.fusePointwise = c.fusedKernel.empty();
  // The check reads each parameter's gradient from its persistent grad:<name> tensor.
  options.keepGradients = true;
  mlir::PassManager pm(&context);
  megatrain::buildPipeline(pm, options, megatrain::EmitStage::Plan);
  ASSERT_TRUE(mlir::succeeded(pm.run(*module))) << diagnostics << source;
  auto plan = megatrain::emitPlan(*module, megatrain::PlanEmitOptions{});
  ASSERT_TRUE(mlir::succeeded(plan)) << diagnostics;
  if (!c.fusedKernel.empty()) {
    bool fused = false;
    for (const auto& step : plan->steps())
      fused |= step.has_kernel() && step.kernel().kernel() == c.fusedKernel;
    ASSERT_TRUE(fused) << "no " << c.fusedKernel << " kernel: the composite was not fused\n" << source;
  }

  // Run.
  auto dir = std::filesystem::temp_directory_path() /
             ("megatrain_gradcheck_" + c.name + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  Executor exec(std::move(*plan), std::make_unique<CpuBackend>());
  exec.loadWeights(OnnxWeights(writeWeights(dir.string(), c.params, values)));
  std::filesystem::remove_all(dir);

  double loss = exec.runStep();
  ASSERT_TRUE(std::isfinite(loss));
  std::vector<std::vector<double>> analytic;
  for (const Param& p : c.params) analytic.push_back(exec.readTensor("grad:" + p.name));

  // Values rounded in the loss itself bound how well a difference can agree.
  const double absTol = 1e-9 * std::max(1.0, std::abs(loss));
  for (size_t pi = 0; pi < c.params.size(); ++pi) {
    const Param& p = c.params[pi];
    std::vector<double> v = values[pi];
    ASSERT_EQ(analytic[pi].size(), v.size()) << p.name;
    for (size_t i = 0; i < v.size(); ++i) {
      const double x = v[i];
      v[i] = x + c.eps;
      exec.writeTensor(p.name, v);
      const double up = exec.runStep();
      v[i] = x - c.eps;
      exec.writeTensor(p.name, v);
      const double down = exec.runStep();
      v[i] = x;
      const double numeric = (up - down) / (2 * c.eps);
      const double a = analytic[pi][i];
      EXPECT_NEAR(a, numeric, c.relTol * std::max(std::abs(a), std::abs(numeric)) + absTol)
          << "d loss / d " << p.name << "[" << i << "]";
    }
    exec.writeTensor(p.name, v);
  }
}

}  // namespace

// Shorthands for the MLIR of the cases.
std::string T(const std::vector<int64_t>& shape) { return tensorType(shape); }

Param P(std::string name, std::vector<int64_t> shape) { return {std::move(name), std::move(shape)}; }
Param Positive(std::string name, std::vector<int64_t> shape) {
  return {std::move(name), std::move(shape), 0.5, 1.5};
}

GradCase binary(const std::string& name, const std::string& op, Param a, Param b,
                const std::vector<int64_t>& out) {
  std::string body = "  %y = mt." + op + " %a, %b : (" + T(a.shape) + ", " + T(b.shape) +
                     ") -> " + T(out);
  a.name = "a";
  b.name = "b";
  return {name, {a, b}, body, out};
}

GradCase unary(const std::string& name, const std::string& op, Param x, const std::string& attrs) {
  x.name = "x";
  std::string body = "  %y = mt." + op + " %x " + attrs + " : " + T(x.shape);
  return {name, {x}, body, x.shape};
}

namespace {

GradCase matmul(const std::string& name, std::vector<int64_t> a, std::vector<int64_t> b,
                bool ta, bool tb, std::vector<int64_t> out) {
  std::string attrs;
  if (ta || tb)
    attrs = std::string(" {") + (ta ? "transpose_a = true" : "") + (ta && tb ? ", " : "") +
            (tb ? "transpose_b = true" : "") + "}";
  std::string body = "  %y = mt.matmul %a, %b" + attrs + " : (" + T(a) + ", " + T(b) + ") -> " +
                     T(out);
  return {name, {P("a", a), P("b", b)}, body, out};
}

GradCase reduce(const std::string& name, const std::string& op, std::vector<int64_t> x,
                const std::string& axes, bool keepdims, std::vector<int64_t> out) {
  std::string body = "  %y = mt." + op + " %x {axes = array<i64: " + axes + ">, keepdims = " +
                     (keepdims ? "true" : "false") + "} : (" + T(x) + ") -> " + T(out);
  return {name, {P("x", x)}, body, out};
}

std::vector<GradCase> allCases() {
  std::vector<GradCase> cases;
  auto add = [&](GradCase c) { cases.push_back(std::move(c)); };

  // Elementwise, with every broadcasting pattern: none, one side, both sides.
  add(binary("add_same", "add", P("", {3, 4}), P("", {3, 4}), {3, 4}));
  add(binary("add_broadcast_rhs", "add", P("", {3, 4}), P("", {4}), {3, 4}));
  add(binary("add_broadcast_both", "add", P("", {2, 1, 4}), P("", {3, 1}), {2, 3, 4}));
  add(binary("sub_broadcast_lhs", "sub", P("", {4}), P("", {3, 4}), {3, 4}));
  add(binary("sub_broadcast_both", "sub", P("", {3, 1}), P("", {1, 4}), {3, 4}));
  add(binary("mul_same", "mul", P("", {2, 3}), P("", {2, 3}), {2, 3}));
  add(binary("mul_broadcast_both", "mul", P("", {2, 3, 1}), P("", {3, 4}), {2, 3, 4}));
  add(binary("mul_scalar", "mul", P("", {3, 4}), P("", {}), {3, 4}));
  add(binary("div_same", "div", P("", {2, 3}), Positive("", {2, 3}), {2, 3}));
  add(binary("div_broadcast_rhs", "div", P("", {3, 4}), Positive("", {4}), {3, 4}));
  add(binary("div_broadcast_lhs", "div", P("", {1, 4}), Positive("", {3, 4}), {3, 4}));
  add(unary("scale", "scale", P("", {3, 4}), "{alpha = -2.5 : f64}"));
  add(unary("relu", "relu", Param{"", {4, 5}, -1.0, 1.0, 0.05}));
  add(unary("tanh", "tanh", P("", {3, 4})));
  add(unary("sigmoid", "sigmoid", Param{"", {3, 4}, -3.0, 3.0}));
  add(unary("softplus", "softplus", Param{"", {3, 4}, -4.0, 4.0}));

  // matmul: each transpose flag, batch dims on either side, broadcast batches.
  add(matmul("matmul", {3, 4}, {4, 5}, false, false, {3, 5}));
  add(matmul("matmul_ta", {4, 3}, {4, 5}, true, false, {3, 5}));
  add(matmul("matmul_tb", {3, 4}, {5, 4}, false, true, {3, 5}));
  add(matmul("matmul_ta_tb", {4, 3}, {5, 4}, true, true, {3, 5}));
  add(matmul("matmul_batched_both", {2, 3, 4}, {2, 4, 5}, false, false, {2, 3, 5}));
  add(matmul("matmul_batched_a_shared_b", {2, 3, 4}, {4, 5}, false, false, {2, 3, 5}));
  add(matmul("matmul_batched_a_shared_b_tb", {2, 3, 4}, {5, 4}, false, true, {2, 3, 5}));
  add(matmul("matmul_batched_a_shared_b_ta", {2, 4, 3}, {4, 5}, true, false, {2, 3, 5}));
  add(matmul("matmul_batched_a_unit_batch_b", {2, 3, 4}, {1, 4, 5}, false, false, {2, 3, 5}));
  add(matmul("matmul_shared_a_batched_b", {3, 4}, {2, 4, 5}, false, false, {2, 3, 5}));
  add(matmul("matmul_shared_a_batched_b_ta_tb", {4, 3}, {2, 5, 4}, true, true, {2, 3, 5}));
  add(matmul("matmul_broadcast_batches", {2, 1, 3, 4}, {3, 4, 2}, false, false, {2, 3, 3, 2}));

  // softmax on a middle axis and on the last.
  add(unary("softmax_middle_axis", "softmax", P("", {2, 3, 4}), "{axis = 1 : i64}"));
  add(unary("softmax_last_axis", "softmax", P("", {3, 5}), "{axis = 1 : i64}"));

  // Shapes.
  add({"reshape", {P("x", {2, 6})}, "  %y = mt.reshape %x : (" + T({2, 6}) + ") -> " + T({3, 4}),
       std::vector<int64_t>{3, 4}});
  add({"transpose", {P("x", {2, 3, 4})},
       "  %y = mt.transpose %x {perm = array<i64: 2, 0, 1>} : (" + T({2, 3, 4}) + ") -> " +
           T({4, 2, 3}),
       std::vector<int64_t>{4, 2, 3}});
  add({"broadcast_to", {P("x", {3, 1})},
       "  %y = mt.broadcast_to %x : (" + T({3, 1}) + ") -> " + T({2, 3, 4}),
       std::vector<int64_t>{2, 3, 4}});
  add({"sum_to", {P("x", {2, 3, 4})},
       "  %y = mt.sum_to %x : (" + T({2, 3, 4}) + ") -> " + T({3, 1}),
       std::vector<int64_t>{3, 1}});

  // Reductions, with and without keepdims, over one axis, several, or all.
  add(reduce("reduce_sum_middle", "reduce_sum", {2, 3, 4}, "1", false, {2, 4}));
  add(reduce("reduce_sum_middle_keepdims", "reduce_sum", {2, 3, 4}, "1", true, {2, 1, 4}));
  add(reduce("reduce_sum_outer_axes", "reduce_sum", {2, 3, 4}, "0, 2", false, {3}));
  add(reduce("reduce_sum_all", "reduce_sum", {3, 4}, "0, 1", false, {}));
  add(reduce("reduce_mean_middle", "reduce_mean", {2, 3, 4}, "1", false, {2, 4}));
  add(reduce("reduce_mean_outer_axes_keepdims", "reduce_mean", {2, 3, 4}, "0, 2", true, {1, 3, 1}));
  add(reduce("reduce_mean_all_keepdims", "reduce_mean", {3, 4}, "0, 1", true, {1, 1}));

  // gather: repeated indices must accumulate; a negative index counts from
  // the end; a gather along an inner axis.
  add({"gather_repeated_indices", {P("x", {5, 3})},
       "  %ids = mt.constant {value = dense<[[0, 2, 2], [4, 2, 0]]> : tensor<2x3xi64>} : "
       "tensor<2x3xi64>\n"
       "  %y = mt.gather %x, %ids {axis = 0 : i64} : (" + T({5, 3}) +
           ", tensor<2x3xi64>) -> " + T({2, 3, 3}),
       std::vector<int64_t>{2, 3, 3}});
  add({"gather_inner_axis_negative_index", {P("x", {2, 5, 3})},
       "  %ids = mt.constant {value = dense<[1, -1, 1, 0]> : tensor<4xi64>} : tensor<4xi64>\n"
       "  %y = mt.gather %x, %ids {axis = 1 : i64} : (" + T({2, 5, 3}) +
           ", tensor<4xi64>) -> " + T({2, 4, 3}),
       std::vector<int64_t>{2, 4, 3}});

  // layer_norm over the last dim and over the last two.
  add({"layer_norm_last_axis", {P("x", {3, 5}), P("g", {5}), P("b", {5})},
       "  %y = mt.layer_norm %x, %g, %b {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (" +
           T({3, 5}) + ", " + T({5}) + ", " + T({5}) + ") -> " + T({3, 5}),
       std::vector<int64_t>{3, 5}});
  add({"layer_norm_two_axes", {P("x", {2, 3, 4}), P("g", {3, 4}), P("b", {3, 4})},
       "  %y = mt.layer_norm %x, %g, %b {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (" +
           T({2, 3, 4}) + ", " + T({3, 4}) + ", " + T({3, 4}) + ") -> " + T({2, 3, 4}),
       std::vector<int64_t>{2, 3, 4}});

  // Losses, differentiated as the loss itself; ignored labels contribute
  // nothing and do not count in the mean.
  add({"softmax_ce_mean_ignored_labels", {Param{"x", {5, 4}, -2.0, 2.0}},
       "  %labels = mt.constant {value = dense<[1, -100, 3, 0, -100]> : tensor<5xi64>} : "
       "tensor<5xi64>\n"
       "  %y = mt.softmax_ce %x, %labels {ignore_index = -100 : i64, reduction = \"mean\"} : (" +
           T({5, 4}) + ", tensor<5xi64>) -> tensor<f64>",
       std::nullopt});
  add({"softmax_ce_sum_spatial", {Param{"x", {2, 3, 4}, -2.0, 2.0}},
       "  %labels = mt.constant {value = dense<[[0, 2, 1, 2], [1, 1, 0, 2]]> : tensor<2x4xi64>} : "
       "tensor<2x4xi64>\n"
       "  %y = mt.softmax_ce %x, %labels {ignore_index = 1 : i64, reduction = \"sum\"} : (" +
           T({2, 3, 4}) + ", tensor<2x4xi64>) -> tensor<f64>",
       std::nullopt});
  add({"next_token_ce_ignored_targets", {Param{"x", {2, 4, 6}, -2.0, 2.0}},
       "  %tokens = mt.constant {value = dense<[[3, 5, 0, 5], [1, 2, 2, 4]]> : tensor<2x4xi64>} : "
       "tensor<2x4xi64>\n"
       "  %y = mt.next_token_ce %x, %tokens {ignore_index = 5 : i64} : (" + T({2, 4, 6}) +
           ", tensor<2x4xi64>) -> tensor<f64>",
       std::nullopt});

  // Autodiff itself: a parameter used by several ops, and one parameter
  // split over two mt.param ops of one name (tied weights CSE left apart).
  add({"fan_out", {P("w", {3, 3})},
       "  %m = mt.matmul %w, %w : (" + T({3, 3}) + ", " + T({3, 3}) + ") -> " + T({3, 3}) +
           "\n  %t = mt.tanh %w : " + T({3, 3}) +
           "\n  %y = mt.mul %m, %t : (" + T({3, 3}) + ", " + T({3, 3}) + ") -> " + T({3, 3}),
       std::vector<int64_t>{3, 3}});
  add({"tied_param_ops", {P("w", {3, 4})},
       "  %w2 = mt.param {name = \"w\", trainable = true} : " + T({3, 4}) +
           "\n  %y = mt.matmul %w, %w2 {transpose_b = true} : (" + T({3, 4}) + ", " + T({3, 4}) +
           ") -> " + T({3, 3}),
       std::vector<int64_t>{3, 3}});

  for (GradCase& c : llmPrimitiveCases()) add(std::move(c));
  for (GradCase& c : fusedOpCases()) add(std::move(c));
  for (GradCase& c : attentionCases()) add(std::move(c));
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Ops, GradCheck, ::testing::ValuesIn(allCases()),
                         [](const ::testing::TestParamInfo<GradCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace megatrain::gradcheck
