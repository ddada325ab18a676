// KernelBench.cpp - times CUDA kernels at the Llama-1.36B training shapes, with the napkin math beside each.
//
// For each case: one-kernel plan, random inputs, 3 warm-up launches, then the
// mean of 20 launches between two synchronizations. Memory-bound kernels are
// reported as GB/s of compulsory traffic (every input read once, every output
// written once) against the H200's 4.2 TB/s device copy (read + write);
// matmuls as TFLOP/s against the ceiling of their precision: 51 TFLOP/s
// fp32, 395 tf32, 777 bf16 (docs/hardware.md).
// Shapes: tokens 8 x 2048, hidden 2048, heads 16 x 128, intermediate 5632,
// vocab 32000 (the loss rows shortened to 4 x 1024 to keep inputs small).
// Matmuls: every product of a Llama-1.36B layer and the LM head at 16384
// tokens, forward (x W), and both backward products (dy W^T, x^T dy), at
// each precision: f32 operands in fp32 and in tf32, bf16 operands into f32.
// Last, the roofline table (docs/cuda.md, "Bandwidth"): the norms, their
// gradients, the pointwise programs and the other memory-bound families of a
// step at 16384 tokens for the 1.36B shape (hidden 2048, intermediate 5632)
// and the 7B shape (4096, 11008), each with its compulsory bytes, the cost
// model's prediction for them (bytes / 4.267 TB/s, bench/profiles/h200.json's
// hbm_bytes_per_s) and measured / predicted, which issue 12 wants within 1.3.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "CudaBackend.h"
#include "PointwiseJit.h"
#include "PointwisePrograms.h"
#include "TestUtil.h"
#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"

namespace megatrain::runtime::testing {
namespace {

struct Operand {
  std::vector<int64_t> shape;
  plan::DType dtype = plan::F32;
  int64_t indexLimit = 0;  // > 0: i64 values in [0, indexLimit)
};

struct BenchCase {
  std::string kernel;
  std::vector<Operand> inputs, outputs;
  std::vector<plan::Attribute> attributes;
  double flops = 0;  // > 0: report TFLOP/s instead of GB/s
  double ceiling = 51;  // TFLOP/s the matmul is measured against
  const char* attentionPath = nullptr;  // MEGATRAIN_ATTENTION for the case (nullptr: unset)
};

int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shapeText(const std::vector<Operand>& operands) {
  std::string text;
  for (const Operand& o : operands) text += formatShape(google::protobuf::RepeatedField<int64_t>(o.shape.begin(), o.shape.end())) + " ";
  return text;
}

// "matmul bf16 a^T": the kernel and the attributes that tell its cases apart.
std::string label(const BenchCase& c) {
  std::string text = c.kernel;
  for (const plan::Attribute& a : c.attributes) {
    if (a.name() == "precision") text += " " + a.s();
    if (a.name() == "transpose_a" && a.i()) text += " a^T";
    if (a.name() == "transpose_b" && a.i()) text += " b^T";
  }
  if (c.kernel == "cast" && !c.inputs.empty() && !c.outputs.empty())
    text += std::string(" ") + plan::DType_Name(c.inputs[0].dtype) + "->" + plan::DType_Name(c.outputs[0].dtype);
  return text;
}

struct Timing {
  double seconds = 0, bytes = 0;
};

Timing measure(Backend& backend, const BenchCase& c) {
  PlanBuilder builder;
  std::vector<uint32_t> in, out;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    in.push_back(builder.tensor("in" + std::to_string(i), c.inputs[i].shape, c.inputs[i].dtype, plan::ACTIVATION));
  for (size_t i = 0; i < c.outputs.size(); ++i)
    out.push_back(builder.tensor("out" + std::to_string(i), c.outputs[i].shape, c.outputs[i].dtype, plan::ACTIVATION));
  builder.kernel(c.kernel, in, out, c.attributes);
  const plan::Plan plan = builder.build();
  backend.prepare(plan);

  std::mt19937 rng(7);
  double bytes = 0;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Operand& o = c.inputs[i];
    const int64_t n = elements(o.shape);
    std::vector<std::byte> data(static_cast<size_t>(n) * dtypeSize(o.dtype));
    if (o.dtype == plan::I64) {
      std::uniform_int_distribution<int64_t> pick(0, o.indexLimit - 1);
      for (int64_t k = 0; k < n; ++k) { const int64_t v = pick(rng); std::memcpy(&data[8 * k], &v, 8); }
    } else {
      // Random floats for the first 2^20 elements, repeated after that (the
      // timings do not depend on the values; the large matmul inputs would
      // take seconds to draw).
      const size_t size = dtypeSize(o.dtype), drawn = std::min<size_t>(static_cast<size_t>(n), size_t{1} << 20);
      std::uniform_real_distribution<float> pick(-1.0f, 1.0f);
      for (size_t k = 0; k < drawn; ++k) {
        const float v = pick(rng);
        if (o.dtype == plan::BF16) { const uint16_t h = floatToBf16(v); std::memcpy(&data[2 * k], &h, 2); }
        else std::memcpy(&data[4 * k], &v, 4);
      }
      for (size_t at = drawn * size; at < data.size(); at += drawn * size)
        std::memcpy(&data[at], data.data(), std::min(drawn * size, data.size() - at));
    }
    backend.write(plan.tensors(static_cast<int>(i)), data.data(), data.size());
    bytes += static_cast<double>(data.size());
  }
  for (const Operand& o : c.outputs) bytes += static_cast<double>(elements(o.shape) * dtypeSize(o.dtype));

  for (int i = 0; i < 3; ++i) backend.launchKernel(0);
  backend.synchronize();
  constexpr int kLaunches = 20;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kLaunches; ++i) backend.launchKernel(0);
  backend.synchronize();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kLaunches;
  return {seconds, bytes};
}

void run(Backend& backend, const BenchCase& c) {
  const auto [seconds, bytes] = measure(backend, c);
  if (c.flops > 0)
    std::printf("%-20s %-44s %9.1f us %8.1f TFLOP/s (%3.0f%% of %.0f)\n", label(c).c_str(), shapeText(c.inputs).c_str(),
                seconds * 1e6, c.flops / seconds / 1e12, 100 * c.flops / seconds / (c.ceiling * 1e12), c.ceiling);
  else
    std::printf("%-20s %-44s %9.1f us %8.0f GB/s    (%3.0f%% of 4200)\n", label(c).c_str(), shapeText(c.inputs).c_str(),
                seconds * 1e6, bytes / seconds / 1e9, 100 * bytes / seconds / 4.2e12);
}

// ---- the roofline table ----

constexpr double kHbmBytesPerS = 4266704512754.257;  // bench/profiles/h200.json

// A pointwise program (PointwiseProgram.h's opcodes): code, constants, outputs.
std::vector<plan::Attribute> pointwiseProgram(const std::vector<int64_t>& code, const std::vector<double>& constants,
                                              const std::vector<int64_t>& outputs) {
  return {intsAttr("code", code), floatsAttr("constants", constants), intsAttr("outputs", outputs)};
}

struct RooflineCase {
  std::string name;  // what the step does with it
  BenchCase kernel;
};

// The norms, their gradients and the pointwise programs of one layer's step
// at `tokens` x hidden, intermediate; then the step's other memory-bound
// families at their shapes (heads of 128, batch 8 x 2048, vocab 32000).
std::vector<RooflineCase> rooflineCases(int64_t tokens, int64_t hidden, int64_t inter) {
  using plan::BF16;
  using plan::I64;
  const int64_t batch = 8, seq = tokens / batch, headDim = 128, heads = hidden / headDim, vocab = 32000;
  const Operand q{{batch, heads, seq, headDim}}, table{{1, 1, seq, headDim}}, qRows{{batch, seq, heads, headDim}},
      qRowsBf16{{batch, seq, heads, headDim}, BF16},
      logits{{batch, seq, vocab}}, labels{{batch, seq}, I64, vocab}, scalar{{}};
  const Operand x{{tokens, hidden}}, w{{hidden}}, h{{tokens, inter}}, hBf16{{tokens, inter}, BF16},
      xBf16{{tokens, hidden}, BF16};
  const std::vector<plan::Attribute> norm = {intAttr("axis", 1), floatAttr("epsilon", 1e-5)};
  std::vector<RooflineCase> cases = {
      {"rms_norm", {"rms_norm", {x, w}, {x}, norm}},
      {"rms_norm_grad", {"rms_norm_grad", {x, w, x}, {x, w}, norm}},
      // The residual block's form: x, dy and the addend read, dx and its bf16 copy written (18 bytes an element).
      {"rms_norm_grad_add (bf16 copy)", {"rms_norm_grad_add", {x, w, x, x}, {x, w, xBf16}, norm}},
      {"layer_norm", {"layer_norm", {x, w, w}, {x}, norm}},
      {"layer_norm_grad", {"layer_norm_grad", {x, w, x}, {x, w, w}, norm}},
      {"add (residual)", {"add", {x, x}, {x}}},
      {"swiglu", {"swiglu", {h, h}, {h}}},
      {"swiglu_grad", {"swiglu_grad", {h, h, h}, {h, h}}},
      {"rotary (q)", {"rotary", {q, table, table}, {q}}},
      {"rotary_grad (q)", {"rotary_grad", {q, table, table}, {q}}},
      // The Llama plans' layout ([B, S, H, D]), f32 and --precision bf16's bf16 x and y.
      {"rotary bshd (q)", {"rotary", {qRows, table, table}, {qRows}, {intAttr("bshd", 1)}}},
      {"rotary bshd bf16 (q)", {"rotary", {qRowsBf16, table, table}, {qRowsBf16}, {intAttr("bshd", 1)}}},
      {"rotary_grad bshd bf16 (q)", {"rotary_grad", {qRowsBf16, table, table}, {qRowsBf16}, {intAttr("bshd", 1)}}},
      {"cast f32 -> bf16", {"cast", {x}, {xBf16}}},
      {"transpose heads", {"transpose", {qRows}, {q}, {intsAttr("perm", {0, 2, 1, 3})}}},
      {"next_token_ce", {"next_token_ce", {logits, labels}, {scalar}}},
      {"next_token_ce_grad", {"next_token_ce_grad", {logits, labels, scalar}, {logits}}},
  };
  // The pointwise programs (PointwisePrograms.h), after the norms.
  auto operand = [&](char letter) {
    switch (letter) {
      case 'X': return xBf16;
      case 'h': return h;
      case 'H': return hBf16;
      case 'w': return w;
      default: return x;
    }
  };
  std::vector<RooflineCase> programs;
  for (const PointwiseProgramText& p : rooflinePrograms()) {
    BenchCase c{"pointwise", {}, {}, pointwiseProgram(p.code, p.constants, p.outputs)};
    for (char letter : p.in) c.inputs.push_back(operand(letter));
    for (char letter : p.out) c.outputs.push_back(operand(letter));
    programs.push_back({"pointwise " + p.name, c});
  }
  cases.insert(cases.begin() + 4, programs.begin(), programs.end());
  return cases;
}

void printRoofline(Backend& backend, const char* shape, const std::vector<RooflineCase>& cases) {
  std::printf("\nroofline, %s (predicted = bytes / %.3f TB/s)\n", shape, kHbmBytesPerS / 1e12);
  std::printf("%-44s %10s %10s %9s %12s %8s\n", "kernel", "MB moved", "measured", "GB/s", "predicted", "x pred");
  auto row = [&](const std::string& name, const BenchCase& kernel) {
    const auto [seconds, bytes] = measure(backend, kernel);
    const double predicted = bytes / kHbmBytesPerS;
    std::printf("%-44s %10.1f %8.1f us %9.0f %9.1f us %7.2f%s\n", name.c_str(), bytes / 1e6, seconds * 1e6,
                bytes / seconds / 1e9, predicted * 1e6, seconds / predicted, seconds / predicted > 1.3 ? "  > 1.3" : "");
  };
  for (const RooflineCase& c : cases) {
    if (c.kernel.kernel != "pointwise") {
      row(c.name, c.kernel);
      continue;
    }
    // Both paths of the pointwise kernel (PointwiseJit.h): the interpreter, then the compiled kernel.
    const cuda::PointwiseMode saved = cuda::pointwiseMode();
    for (const cuda::PointwiseMode mode : {cuda::PointwiseMode::Interp, cuda::PointwiseMode::Jit}) {
      cuda::setPointwiseMode(mode);
      row(c.name + (mode == cuda::PointwiseMode::Jit ? " (jit)" : " (interp)"), c.kernel);
    }
    cuda::setPointwiseMode(saved);
  }
}

}  // namespace
}  // namespace megatrain::runtime::testing

int main(int argc, char** argv) {
  using namespace megatrain::runtime;
  using namespace megatrain::runtime::testing;
  using megatrain::plan::F32;
  using megatrain::plan::I64;
  const int64_t tokens = 8 * 2048, hidden = 2048, inter = 5632, vocab = 32000;
  std::vector<BenchCase> cases = {
      {"add", {{{tokens, hidden}}, {{hidden}}}, {{{tokens, hidden}}}},
      {"mul", {{{tokens, hidden}}, {{tokens, hidden}}}, {{{tokens, hidden}}}},
      {"sigmoid", {{{tokens, inter}}}, {{{tokens, inter}}}},
      {"scale", {{{tokens, hidden}}}, {{{tokens, hidden}}}, {floatAttr("alpha", 0.5)}},
      {"transpose", {{{8, 2048, 16, 128}}}, {{{8, 16, 2048, 128}}}, {intsAttr("perm", {0, 2, 1, 3})}},
      {"transpose", {{{hidden, inter}}}, {{{inter, hidden}}}, {intsAttr("perm", {1, 0})}},
      {"broadcast_to", {{{hidden}}}, {{{tokens, hidden}}}},
      {"sum_to", {{{tokens, hidden}}}, {{{hidden}}}},
      {"reduce_sum", {{{tokens, hidden}}}, {{{tokens, 1}}}, {intsAttr("axes", {1})}},
      {"softmax", {{{8, 16, 512, 512}}}, {{{8, 16, 512, 512}}}, {intAttr("axis", 3)}},
      {"softmax_grad", {{{8, 16, 512, 512}}, {{8, 16, 512, 512}}}, {{{8, 16, 512, 512}}}, {intAttr("axis", 3)}},
      {"layer_norm", {{{tokens, hidden}}, {{hidden}}, {{hidden}}}, {{{tokens, hidden}}}, {intAttr("axis", 1)}},
      {"layer_norm_grad", {{{tokens, hidden}}, {{hidden}}, {{tokens, hidden}}}, {{{tokens, hidden}}, {{hidden}}, {{hidden}}},
       {intAttr("axis", 1)}},
      {"gather", {{{vocab, hidden}}, {{8, 2048}, I64, vocab}}, {{{8, 2048, hidden}}}, {intAttr("axis", 0)}},
      {"gather_grad", {{{8, 2048}, I64, vocab}, {{8, 2048, hidden}}}, {{{vocab, hidden}}}, {intAttr("axis", 0)}},
      {"next_token_ce", {{{4, 1024, vocab}}, {{4, 1024}, I64, vocab}}, {{{}}}},
      {"next_token_ce_grad", {{{4, 1024, vocab}}, {{4, 1024}, I64, vocab}, {{}}}, {{{4, 1024, vocab}}}},
      // the output projection fused with the loss, bf16, chunks of 4096 (mt-fuse-linear-ce's choice at 16k
      // tokens): one product forward, three backward (the logits again, dhidden, dweight)
      {"linear_ce",
       {{{8, 2048, hidden}, megatrain::plan::BF16}, {{vocab, hidden}, megatrain::plan::BF16}, {{8, 2048}, I64, vocab}},
       {{{}}, {{8, 2048}}}, {intAttr("chunk", 4096), stringAttr("precision", "bf16")},
       2.0 * tokens * hidden * vocab, 777},
      {"linear_ce_grad",
       {{{8, 2048, hidden}, megatrain::plan::BF16}, {{vocab, hidden}, megatrain::plan::BF16}, {{8, 2048}, I64, vocab},
        {{8, 2048}}, {{}}},
       {{{8, 2048, hidden}}, {{vocab, hidden}}}, {intAttr("chunk", 4096), stringAttr("precision", "bf16")},
       6.0 * tokens * hidden * vocab, 777},
      // the bf16 casts of a step: activations and weights down, gradients up
      {"cast", {Operand{{tokens, hidden}}}, {Operand{{tokens, hidden}, megatrain::plan::BF16}}},
      {"cast", {Operand{{hidden, inter}}}, {Operand{{hidden, inter}, megatrain::plan::BF16}}},
      {"cast", {Operand{{tokens, hidden}, megatrain::plan::BF16}}, {Operand{{tokens, hidden}}}},
      {"matmul", {{{tokens, hidden}}, {{hidden, hidden}}}, {{{tokens, hidden}}}, {}, 2.0 * tokens * hidden * hidden},
      {"matmul", {{{tokens, hidden}}, {{tokens, inter}}}, {{{hidden, inter}}}, {intAttr("transpose_a", 1)},
       2.0 * tokens * hidden * inter},
      {"matmul", {{{128, 512, 128}}, {{128, 512, 128}}}, {{{128, 512, 512}}}, {intAttr("transpose_b", 1)},
       2.0 * 128 * 512 * 512 * 128},
  };
  // Matmuls at each precision: the Llama-1.36B products at 16384 tokens.
  struct Product {
    int64_t in, out;  // x [tokens, in] W [in, out]
  };
  const Product products[] = {{hidden, hidden}, {hidden, inter}, {inter, hidden}, {hidden, vocab}};
  struct PrecisionCase {
    const char* name;
    megatrain::plan::DType operands;
    double ceiling;
  };
  const PrecisionCase precisions[] = {{"fp32", F32, 51}, {"tf32", F32, 395}, {"bf16", megatrain::plan::BF16, 777}};
  for (const PrecisionCase& p : precisions)
    for (const Product& w : products) {
      const double flops = 2.0 * tokens * w.in * w.out;
      const auto dt = p.operands;
      const auto precision = stringAttr("precision", p.name);
      // forward y = x W; backward dx = dy W^T and dW = x^T dy
      cases.push_back({"matmul", {{{tokens, w.in}, dt}, {{w.in, w.out}, dt}}, {{{tokens, w.out}}}, {precision}, flops,
                       p.ceiling});
      cases.push_back({"matmul", {{{tokens, w.out}, dt}, {{w.in, w.out}, dt}}, {{{tokens, w.in}}},
                       {precision, intAttr("transpose_b", 1)}, flops, p.ceiling});
      cases.push_back({"matmul", {{{tokens, w.in}, dt}, {{tokens, w.out}, dt}}, {{{w.in, w.out}}},
                       {precision, intAttr("transpose_a", 1)}, flops, p.ceiling});
    }

  // ---- attention at the benchmark shape (B 8, H 16, S = T = 2048, D 128,
  // causal), forward and backward per precision: effective TFLOP/s of
  // 4 B H S T D (forward; 2.5x that backward), halved for causal, against
  // the precision's matmul rate (docs/hardware.md). bf16 three times: on the
  // GEMM path (MEGATRAIN_ATTENTION=gemm) and on cuDNN's fused attention
  // (MEGATRAIN_ATTENTION=cudnn) with f32 operands (its time includes the
  // f32 <-> bf16 copies), then on cuDNN with bf16 operands (none) ----
  std::vector<BenchCase> attentionCases;
  {
    const int64_t b = 8, h = 16, s = 2048, d = 128;
    const double forwardFlops = 4.0 * b * h * s * s * d / 2;
    struct Variant {
      const char* precision;
      double peak;
      const char* path;
      megatrain::plan::DType operands;
    };
    const Variant variants[] = {{"fp32", 51, nullptr, F32}, {"tf32", 395, nullptr, F32}, {"bf16", 777, "gemm", F32},
                                {"bf16", 777, "cudnn", F32}, {"bf16", 777, "cudnn", megatrain::plan::BF16}};
    for (const Variant& v : variants) {
      const std::vector<megatrain::plan::Attribute> attrs = {floatAttr("scale", 1.0 / std::sqrt(double(d))),
                                                             intAttr("causal", 1), stringAttr("precision", v.precision)};
      const Operand q{{b, h, s, d}, v.operands}, lse{{b, h, s}};
      attentionCases.push_back({"attention", {q, q, q}, {q, lse}, attrs, forwardFlops, v.peak, v.path});
      attentionCases.push_back(
          {"attention_grad", {q, q, q, q, lse, q}, {q, q, q}, attrs, 2.5 * forwardFlops, v.peak, v.path});
    }
  }
  // --roofline: the roofline table alone.
  const bool rooflineOnly = argc == 2 && std::strcmp(argv[1], "--roofline") == 0;
  if (argc > 2 || (argc == 2 && !rooflineOnly)) {
    std::fprintf(stderr, "gpu_kernel_bench: unknown argument '%s' (the one option is --roofline: the roofline table alone)\n",
                 argv[argc - 1]);
    return 2;
  }
  try {
    std::unique_ptr<Backend> backend = makeCudaBackend();
    if (rooflineOnly) cases.clear(), attentionCases.clear();
    else std::printf("%-20s %-44s %12s %s\n", "kernel", "inputs", "per launch", "throughput");
    for (const BenchCase& c : cases) run(*backend, c);
    for (const BenchCase& c : attentionCases) {
      if (c.attentionPath) setenv("MEGATRAIN_ATTENTION", c.attentionPath, 1);
      std::printf("precision %s%s%s%s\n", c.attributes.back().s().c_str(),
                  c.attentionPath ? ", MEGATRAIN_ATTENTION=" : "", c.attentionPath ? c.attentionPath : "",
                  c.inputs[0].dtype == megatrain::plan::BF16 ? ", bf16 operands" : "");
      run(*backend, c);
      unsetenv("MEGATRAIN_ATTENTION");
    }
    printRoofline(*backend, "Llama 1.36B: 16384 tokens, hidden 2048, intermediate 5632",
                  rooflineCases(tokens, hidden, inter));
    printRoofline(*backend, "Llama 7B: 16384 tokens, hidden 4096, intermediate 11008",
                  rooflineCases(tokens, 4096, 11008));
  } catch (const megatrain::Error& e) {
    std::fprintf(stderr, "gpu_kernel_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
