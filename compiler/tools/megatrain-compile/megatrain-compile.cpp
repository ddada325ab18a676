//===- megatrain-compile.cpp - compile an ONNX model into a training plan -===//
//
// Imports the model, runs the pipeline (Pipeline.h) up to the stage asked for
// and writes either the IR of that stage or the plan. Every failure is one
// line on stderr starting "megatrain-compile: error:" and exit status 1.
//
//===----------------------------------------------------------------------===//
#include "megatrain/plan/DeviceProfile.h"
#include "megatrain/Dialect/MtDialect.h"
#include "megatrain/Frontend/OnnxImporter.h"
#include "megatrain/Passes/Passes.h"
#include "megatrain/Pipeline.h"
#include "megatrain/Plan/PlanEmitter.h"
#include "megatrain/plan/Simulate.h"
#include "megatrain/plan/AtomicFile.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/Format.h"
#include "megatrain/plan/PlanChecksum.h"
#include "megatrain/plan/PlanVerifier.h"
#include "megatrain/plan/ByteSize.h"
#include "megatrain/plan/ToolCli.h"
#include "megatrain/plan/ToolMain.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

#include <google/protobuf/text_format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#ifndef MEGATRAIN_VERSION
#define MEGATRAIN_VERSION "unknown"
#endif

namespace {

constexpr const char *kTool = "megatrain-compile";

constexpr const char *kUsage =
    "usage: megatrain-compile MODEL.onnx -o MODEL.plan [options]\n"
    "       megatrain-compile STEP.mlir -o MODEL.plan [options]\n";

constexpr const char *kDescription =
    "Compiles an ONNX model into a megatrain plan: one training step (forward, "
    "backward, AdamW update), or with --forward-only an evaluation step (forward "
    "and loss), as ordered steps over statically placed tensors. A .mlir input is "
    "taken to be such a step (the output of --emit=training) and only scheduled, "
    "planned and emitted.";

constexpr const char *kExamples = R"(Examples:
  megatrain-compile tiny.onnx -o tiny.plan --shape input_ids=8x64 --lr 3e-3
  megatrain-compile mlp.onnx -o mlp.plan --loss-output loss
  megatrain-compile gpt.onnx --shape input_ids=4x128 --frozen 'wte\..*' --emit=training
  megatrain-compile tiny.onnx --shape input_ids=2x16 --emit=plan-text -o -
  megatrain-compile llama.onnx -o llama.plan --shape input_ids=1x2048 --device-memory 24GiB
)";

[[noreturn]] void fail(const llvm::Twine &message) {
  llvm::errs() << kTool << ": error: " << message << "\n";
  std::exit(1);
}

/// Flushes (closes, for a file) a text output and fails, naming the reason,
/// if any of it could not be written. runTool checks stdio's stdout, which
/// llvm::outs() and the streams of openTextOutput bypass; left unchecked, the
/// stream's destructor would end the process with LLVM's own fatal error.
void finishOutput(llvm::raw_fd_ostream &out, const std::string &path) {
  const bool toStdout = path.empty() || path == "-";
  if (toStdout)
    out.flush();
  else
    out.close();
  if (!out.has_error())
    return;
  const std::error_code error = out.error();
  out.clear_error();
  if (toStdout)
    fail("writing standard output: " + error.message());
  fail("cannot write '" + path + "': " + error.message());
}

struct CompileArgs {
  CompileArgs() { pipeline.precision = "bf16"; }
  std::string model;
  std::string output;
  std::string emit = "plan";
  std::optional<std::string> lossMode;
  megatrain::PipelineOptions pipeline;
  bool optimizerStream = false;
  // --fetch-stream / --no-fetch-stream; neither: only without micro-batches.
  std::optional<bool> fetchStream;
  bool accumulateInProducts = true;
  bool hostUpdateOrder = true;
  megatrain::OnnxImportOptions import;
  bool lossFlags = false; // any of --loss-output/--loss/--logits/--tokens
  megatrain::DeviceProfile profile;
  std::optional<uint64_t> hostMemory; // --host-memory; default: the profile's
};

double parseDouble(llvm::StringRef flag, llvm::StringRef text) {
  double value;
  if (text.getAsDouble(value))
    fail("--" + flag + " expects a number, got '" + text + "'");
  return value;
}

int64_t parseInt(llvm::StringRef flag, llvm::StringRef text) {
  int64_t value;
  if (text.getAsInteger(10, value))
    fail("--" + flag + " expects an integer, got '" + text + "'");
  return value;
}

/// "input_ids=8x64" (or several, comma-separated) into the import options.
void parseShapes(llvm::StringRef text, CompileArgs &args) {
  llvm::SmallVector<llvm::StringRef> bindings;
  text.split(bindings, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef binding : bindings) {
    auto [name, dims] = binding.rsplit('=');
    if (name.empty() || dims.empty() || !binding.contains('='))
      fail("--shape expects NAME=DxD..., got '" + binding + "'");
    std::vector<int64_t> shape;
    llvm::SmallVector<llvm::StringRef> parts;
    dims.split(parts, 'x');
    for (llvm::StringRef part : parts) {
      int64_t dim;
      if (part.getAsInteger(10, dim) || dim <= 0)
        fail("--shape " + binding + ": '" + part +
             "' is not a positive dimension");
      shape.push_back(dim);
    }
    if (!args.import.shapes.emplace(name.str(), shape).second)
      fail("--shape binds '" + name + "' twice");
  }
}

void checkRegex(llvm::StringRef flag, const std::string &pattern) {
  try {
    std::regex check(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error &error) {
    fail("--" + flag + " '" + pattern + "' is not a valid regex: " + error.what());
  }
}

/// Parses the command line; std::nullopt when --help or --version was printed.
std::optional<CompileArgs> parseArgs(int argc, char **argv) {
  CompileArgs args;
  std::vector<std::string> positional;
  CLI::App app;
  megatrain::setupToolApp(app, kTool, {kUsage, kDescription, kExamples});
  app.add_option("MODEL", positional, "the ONNX model, or a training step (.mlir)")
      ->type_name("MODEL.onnx")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);

  const std::string shapes = "Input shapes";
  megatrain::repeatable(megatrain::addValueOption(
      app, "--shape", "NAME=DxDx...",
      "bind a graph input's shape (repeatable, or comma-separated: --shape a=8x64,b=8)",
      shapes, [&](const std::string &v) { parseShapes(v, args); }));

  const std::string loss = "Loss (default: a scalar output named `loss`; else next-token-ce when "
                           "the model has an output `logits` (or only one output) and an input "
                           "`input_ids` (or only one input))";
  megatrain::addValueOption(app, "--loss-output", "NAME", "minimize the scalar graph output NAME", loss,
           [&](const std::string &v) { args.pipeline.lossOutput = v; args.lossFlags = true; });
  megatrain::addValueOption(app, "--loss", "next-token-ce|output",
           "next-token-ce: append next-token cross-entropy of --logits against --tokens "
           "(shifted by one); output: minimize --loss-output", loss,
           [&](const std::string &v) {
             if (v != "next-token-ce" && v != "output")
               fail("--loss expects next-token-ce or output, got '" + v + "'");
             args.lossMode = v;
             args.lossFlags = true;
           });
  megatrain::addValueOption(app, "--logits", "NAME", "[B, T, V] logits output (default logits, or the only output)", loss,
           [&](const std::string &v) { args.pipeline.logits = v; args.lossFlags = true; });
  megatrain::addValueOption(app, "--tokens", "NAME", "[B, T] token input (default input_ids, or the only input)", loss,
           [&](const std::string &v) { args.pipeline.tokens = v; args.lossFlags = true; });
  megatrain::addValueOption(app, "--ignore-index", "N", "target id that contributes no loss (default -100)", loss,
           [&](const std::string &v) { args.pipeline.ignoreIndex = parseInt("ignore-index", v); });
  megatrain::addValueOption(app, "--targets", "NAME",
           "read the targets from a new [B, T] input NAME, which megatrain-run fills from --data and "
           "its loss mask (masked positions get --ignore-index)",
           loss, [&](const std::string &v) {
             if (v.empty())
               fail("--targets needs an input name, such as --targets targets");
             args.pipeline.targets = v;
             args.lossFlags = true;
           });
  megatrain::repeatable(megatrain::addValueOption(
      app, "--keep-output", "NAME",
      "also copy graph output NAME to the host each step, as tensor output:NAME "
      "(repeatable; megatrain-run --dump-output writes it)",
      loss, [&](const std::string &v) { args.pipeline.keepOutputs.push_back(v); }));

  const std::string optimizer = "Optimizer (AdamW, torch defaults except lr)";
  auto real = [&](const char *flag, double &slot) {
    return [flag, &slot](const std::string &v) { slot = parseDouble(flag, v); };
  };
  megatrain::addValueOption(app, "--lr", "F", "learning rate (default 1e-3)", optimizer, real("lr", args.pipeline.lr));
  megatrain::addValueOption(app, "--beta1", "F", "(default 0.9)", optimizer, real("beta1", args.pipeline.beta1));
  megatrain::addValueOption(app, "--beta2", "F", "(default 0.999)", optimizer, real("beta2", args.pipeline.beta2));
  megatrain::addValueOption(app, "--eps", "F", "(default 1e-8)", optimizer, real("eps", args.pipeline.eps));
  megatrain::addValueOption(app, "--weight-decay", "F", "(default 0.01)", optimizer,
           real("weight-decay", args.pipeline.weightDecay));
  megatrain::addValueOption(app, "--microbatches", "N",
           "accumulate the gradients of N micro-batches (each the --shape batch) before one "
           "update (default 1, at most " + std::to_string(megatrain::kMaxMicrobatches) + ")",
           optimizer, [&](const std::string &v) {
             // The pass's limit (megatrain/Passes/Passes.h), said in the flag's words.
             using megatrain::kMaxMicrobatches;
             args.pipeline.microbatches = parseInt("microbatches", v);
             if (args.pipeline.microbatches < 1 || args.pipeline.microbatches > kMaxMicrobatches)
               fail("--microbatches expects 1 <= N <= " + std::to_string(kMaxMicrobatches) +
                    ", got '" + v + "'");
           });

  megatrain::addFlagOption(app, "--forward-only",
                           "compile an evaluation plan: the forward and the loss only (no gradients, "
                           "optimizer state or updates), for megatrain-run --eval-plan; the optimizer "
                           "flags and --microbatches do not apply to it",
                           "Evaluation", [&] { args.pipeline.forwardOnly = true; });

  const std::string params = "Parameters (docs/frontends.md, \"Trainable rule\"; ECMAScript "
                             "regexes, full match, --frozen wins)";
  megatrain::addValueOption(app, "--trainable", "REGEX", "make matching initializers trainable", params,
           [&](const std::string &v) { checkRegex("trainable", v); args.import.trainable = v; });
  megatrain::addValueOption(app, "--frozen", "REGEX", "make matching initializers frozen", params,
           [&](const std::string &v) { checkRegex("frozen", v); args.import.frozen = v; });

  const std::string output = "Output";
  megatrain::addValueOption(app, "-o,--out", "FILE",
           "where to write (required for --emit=plan; other stages default to stdout; `-` is "
           "stdout)", output, [&](const std::string &v) { args.output = v; });
  megatrain::addValueOption(app, "--emit", "STAGE",
           "mt | training | scheduled | planned: print the IR after that stage; plan "
           "(default): write the binary plan; plan-text: print the plan as protobuf text",
           output, [&](const std::string &v) {
             if (v != "plan-text" && !megatrain::parseEmitStage(v))
               fail("--emit expects mt, training, scheduled, planned, plan or plan-text, got '" +
                    v + "'");
             args.emit = v;
           });
  megatrain::addFlagOption(app, "--no-memory-reuse", "give every device value its own bytes",
                           output, [&] { args.pipeline.noMemoryReuse = true; });

  const std::string precision = "Precision (docs/compiler.md)";
  megatrain::addValueOption(app, "--precision", "P",
           "bf16 (default): matmul operands in bf16, fp32 accumulation, parameters fetched from "
           "a host bf16 copy; tf32: fp32 data, TF32 matmul and attention products; fp32: exact "
           "fp32 everywhere",
           precision, [&](const std::string &v) {
             if (v != "fp32" && v != "tf32" && v != "bf16")
               fail("--precision expects fp32, tf32 or bf16, got '" + v + "'");
             args.pipeline.precision = v;
           });

  megatrain::addFlagOption(app, "--bf16-activations",
           "with --precision bf16: products read only by elementwise chains (the gate and up "
           "projections, the MLP activation's gradient) round their result to bf16, as "
           "torch.autocast does: half the bytes kept for the backward, values rounded once more "
           "(mt-bf16-activations)",
           precision, [&] { args.pipeline.bf16Activations = true; });

  const std::string memory = "Memory (docs/tiering.md)";
  megatrain::addValueOption(app, "--device-memory", "SIZE",
           "the device: arena plus device-resident training state: 24GiB, 16000MB, 8GB, "
           "1.5TiB, bytes (default: the profile's device memory minus 4 GiB, and no arena "
           "budget unless state needs the room). Values are kept, offloaded, fetched again or "
           "recomputed to fit",
           memory, [&](const std::string &v) {
             args.pipeline.deviceMemory = megatrain::parseSizeFlag(v, "--device-memory");
           });
  megatrain::addValueOption(app, "--host-memory", "SIZE",
           "pinned host memory for training state (default: the profile's host memory minus "
           "16 GiB)",
           memory, [&](const std::string &v) {
             args.hostMemory = megatrain::parseSizeFlag(v, "--host-memory");
           });
  megatrain::addValueOption(app, "--disk-memory", "SIZE",
           "bytes of state files under megatrain-run --disk-dir (default: none, no disk tier)",
           memory, [&](const std::string &v) {
             args.pipeline.diskCapacity = megatrain::parseSizeFlag(v, "--disk-memory");
           });
  megatrain::repeatable(megatrain::addValueOption(
      app, "--state-home", "TIER[:RE]",
      "force the state of every parameter (or those whose name matches RE) to device, host "
      "or disk, or to visit: on the host, its update run on the device, or visit-master: "
      "the moments on the device, the master visiting it (docs/tiering.md, \"Update "
      "visits\"); repeatable, the first match wins",
      memory, [&](const std::string &v) { args.pipeline.stateHomes.push_back(v); }));
  megatrain::addFlagOption(app, "--keep-gradients",
                           "keep a persistent fp32 gradient for every parameter whose state is "
                           "on the host or disk, as megatrain-run --clip-grad-norm needs "
                           "(default: it passes through a staging ring and is consumed by the "
                           "update in the same step)",
                           memory, [&] { args.pipeline.keepGradients = true; });
  megatrain::addValueOption(app, "--tiering-policy", "P",
           "auto (default: the cost-model planner) | keep | checkpoint | offload (reference "
           "policies) | checkpoint+fill | offload+fill (a reference policy and auto's fill) | "
           "checkpoint+spill (the checkpoint policy and the spill alone)",
           memory, [&](const std::string &v) {
             if (v != "auto" && v != "keep" && v != "checkpoint" && v != "offload" &&
                 v != "checkpoint+fill" && v != "offload+fill" && v != "checkpoint+spill")
               fail("--tiering-policy expects auto, keep, checkpoint, offload, checkpoint+fill, "
                    "offload+fill or checkpoint+spill, got '" + v + "'");
             args.pipeline.tieringPolicy = v;
           });
  megatrain::addFlagOption(app, "--no-tiering-fill",
                           "under --tiering-policy auto, keep the recompute and offloads a "
                           "fitting plan chose even where the budget has room (no fill), and "
                           "plan the arena without leaving room for the device state",
                           memory, [&] { args.pipeline.tieringFill = false; });
  megatrain::addFlagOption(app, "--no-tiering-spill",
                           "keep every recompute the fill leaves, instead of trading some for "
                           "offloads and prefetches that the links' spare time hides (the spill)",
                           memory, [&] { args.pipeline.tieringSpill = false; });
  megatrain::addFlagOption(app, "--no-tiering-fill-search",
                           "where the state competes with the arena for the device, fill only "
                           "what saves more per byte than a byte of state would, instead of "
                           "also choosing how much to fill by the predicted step (the fill's "
                           "search)",
                           memory, [&] { args.pipeline.tieringFillSearch = false; });
  megatrain::addFlagOption(app, "--no-tiering-lead",
                           "leave each parameter fetch where the planner placed it, even where "
                           "the prefetches before it on the link land it after its use (the "
                           "lead)",
                           memory, [&] { args.pipeline.tieringLead = false; });
  megatrain::addValueOption(app, "--tiering-log", "FILE",
           "write why mt-tier chose its plan to FILE ('-': stderr): the budgets it tried, each "
           "portfolio entry's predicted step, each step of the fill's and the spill's searches, "
           "the choice (docs/tiering.md, \"Why this plan\")",
           memory, [&](const std::string &v) { args.pipeline.tieringLog = v; });
  megatrain::addValueOption(app, "--device-profile", "FILE",
           "JSON machine figures for the cost model (default: the H200 of docs/hardware.md; "
           "megatrain-profile measures one); also predicts the step time the summary shows",
           memory, [&](const std::string &v) {
             std::string error;
             if (!megatrain::loadDeviceProfile(v, args.profile, error))
               fail("--device-profile " + error);
             args.pipeline.deviceProfile = v;
           });
  megatrain::addFlagOption(app, "--no-fusion",
                           "keep the imported ops as they are (no RMSNorm, LayerNorm, SiLU, "
                           "SwiGLU, GELU, attention, rotary embedding or next-token "
                           "cross-entropy fusion, and no output projection fused with the loss)",
                           memory, [&] { args.pipeline.fusion = false; });
  megatrain::addFlagOption(app, "--no-fold-transpose",
                           "keep the transposes that feed or read matmuls (no mt-fold-transpose)",
                           memory, [&] { args.pipeline.foldTranspose = false; });
  megatrain::addFlagOption(app, "--no-fold-head-transposes",
                           "keep the [B, H, S, D] <-> [B, S, H, D] transposes around attention and "
                           "rotary (no mt-fold-head-transposes)",
                           memory, [&] { args.pipeline.foldHeadTransposes = false; });
  megatrain::addFlagOption(app, "--no-bf16-attention",
                           "keep f32 q, k, v and y around bf16-precision attention, the "
                           "kernels converting them (no mt-bf16-attention)",
                           memory, [&] { args.pipeline.bf16Attention = false; });
  megatrain::addFlagOption(app, "--no-view-aliases",
                           "emit every reshape as a copy kernel (no mt-view-aliases)",
                           memory, [&] { args.pipeline.viewAliases = false; });
  megatrain::addFlagOption(app, "--no-matmul-epilogues",
                           "keep each residual, gradient or bias add of a product, a GELU "
                           "after a bias and a GELU's backward after a product their own "
                           "kernels, not in the product's epilogue (no mt-fuse-matmul-epilogues)",
                           memory, [&] { args.pipeline.matmulEpilogues = false; });
  megatrain::addFlagOption(app, "--optimizer-stream",
                           "run the AdamW updates of device-resident parameters on a stream of "
                           "their own (`optimizer`), beside the backward's kernels",
                           memory, [&] { args.optimizerStream = true; });
  megatrain::addFlagOption(app, "--fetch-stream",
                           "fetch the host-resident parameters on a stream of their own "
                           "(`fetch`), beside the prefetches on `h2d` (default: only without "
                           "--microbatches)",
                           memory, [&] { args.fetchStream = true; });
  megatrain::addFlagOption(app, "--no-fetch-stream",
                           "fetch the host-resident parameters on the `h2d` stream, in plan "
                           "order with the prefetches, not on a stream of their own (`fetch`)",
                           memory, [&] { args.fetchStream = false; });
  megatrain::addFlagOption(app, "--accumulator-visits",
                           "with --microbatches, keep the gradient accumulators up to a ring "
                           "slot's size on the host, each visiting the device for its parts "
                           "through a ring of --visit-slots slots, so the arena gets the room "
                           "their sums would take (the default; docs/tiering.md, \"Accumulator "
                           "visits\")",
                           memory, [&] { args.pipeline.accumulatorVisits = true; });
  megatrain::addValueOption(app, "--visit-slots", "N",
                            "with --accumulator-visits, the ring's slots of the largest visiting "
                            "accumulator (default 8, at least 3)",
                            memory, [&](const std::string &v) {
                              const int64_t slots = parseInt("visit-slots", v);
                              if (slots < 3)
                                fail("--visit-slots expects N >= 3, got '" + v + "'");
                              args.pipeline.visitSlots = static_cast<uint64_t>(slots);
                            });
  megatrain::addFlagOption(app, "--all-accumulators-visit",
                           "with --accumulator-visits, every accumulator a slot holds visits, even "
                           "where the device has room left for it whole (tests)",
                           memory, [&] { args.pipeline.allAccumulatorsVisit = true; });
  megatrain::addFlagOption(app, "--no-accumulator-visits",
                           "with --microbatches, keep every gradient accumulator whole, on the "
                           "device where it has room, else summed on the host",
                           memory, [&] { args.pipeline.accumulatorVisits = false; });
  megatrain::addFlagOption(app, "--no-product-accumulation",
                           "with micro-batches, keep each weight gradient's part its own tensor, "
                           "copied or added into the device accumulator after its product, "
                           "rather than written into it by the product",
                           memory, [&] { args.accumulateInProducts = false; });
  megatrain::addFlagOption(app, "--no-host-update-order",
                           "run the host updates that go on into the next step in the order "
                           "their gradients come, not earliest deadline first (docs/tiering.md, "
                           "\"The host update order\")",
                           memory, [&] { args.hostUpdateOrder = false; });
  megatrain::addFlagOption(app, "--no-fold-norm-casts",
                           "keep the bf16 cast after an RMS norm its own kernel, the norm "
                           "writing f32 (no mt-fold-norm-casts)",
                           memory, [&] { args.pipeline.foldNormCasts = false; });
  megatrain::addFlagOption(app, "--no-fuse-norm-grad-adds",
                           "keep the add of the residual gradient and its bf16 cast their "
                           "own kernels after an RMS norm's gradient (no mt-fuse-norm-grad-adds)",
                           memory, [&] { args.pipeline.fuseNormGradAdds = false; });
  megatrain::addFlagOption(app, "--no-fold-product-casts",
                           "keep the bf16 cast after a product its own kernel, the product "
                           "writing f32 (no mt-fold-product-casts)",
                           memory, [&] { args.pipeline.foldProductCasts = false; });
  megatrain::addFlagOption(app, "--no-fuse-pointwise",
                           "keep every elementwise op its own kernel (no mt-fuse-pointwise)",
                           memory, [&] { args.pipeline.fusePointwise = false; });
  megatrain::addFlagOption(app, "--no-fuse-linear-ce",
                           "keep the output projection and the next-token loss apart (no "
                           "mt-fuse-linear-ce: the [tokens, vocab] logits exist)",
                           memory, [&] { args.pipeline.fuseLinearCe = false; });
  megatrain::addValueOption(app, "--linear-ce-chunk", "N",
           "vocabulary rows per chunk of the fused projection and loss (default: the "
           "largest multiple of 128 whose f32 logits tile fits 256 MiB)",
           memory, [&](const std::string &v) {
             args.pipeline.linearCeChunk = parseInt("linear-ce-chunk", v);
             if (args.pipeline.linearCeChunk < 1)
               fail("--linear-ce-chunk expects N >= 1, got '" + v + "'");
           });

  if (megatrain::parseToolCommandLine(app, argc, argv))
    return std::nullopt;
  if (positional.empty())
    fail("no input model (usage: megatrain-compile MODEL.onnx -o MODEL.plan; "
         "see --help)");
  if (positional.size() > 1)
    fail("more than one input: '" + positional[0] + "' and '" + positional[1] + "'");
  args.model = positional[0];
  // Capacities for training state (docs/tiering.md "State homes"): the
  // profile's memories minus their margins unless given.
  args.pipeline.deviceCapacity = args.pipeline.deviceMemory != 0
                                     ? args.pipeline.deviceMemory
                                     : megatrain::defaultDeviceCapacity(args.profile);
  args.pipeline.hostCapacity = static_cast<int64_t>(
      args.hostMemory ? *args.hostMemory : megatrain::defaultHostCapacity(args.profile));
  if (args.lossMode == std::string("output") && args.pipeline.lossOutput.empty())
    fail("--loss output needs --loss-output NAME");
  if (args.lossMode == std::string("next-token-ce") && !args.pipeline.lossOutput.empty())
    fail("--loss next-token-ce and --loss-output are exclusive");
  if (!args.pipeline.targets.empty() &&
      (args.lossMode == std::string("output") || !args.pipeline.lossOutput.empty()))
    fail("--targets is for the next-token-ce loss (--loss next-token-ce), not --loss-output");
  if (args.pipeline.bf16Activations && args.pipeline.precision != "bf16")
    fail("--bf16-activations rounds bf16 products; it needs --precision bf16, not " +
         args.pipeline.precision);
  if (args.emit == "plan" && args.output.empty())
    fail("no output file; pass -o FILE.plan (or --emit=plan-text to print the plan)");
  if (args.emit == "plan" && args.output == "-")
    fail("the binary plan cannot go to stdout; use --emit=plan-text for text");
  return args;
}

/// The loss configuration: from the flags, or guessed from the model's
/// outputs and inputs when no loss flag was given.
void chooseLoss(mlir::ModuleOp module, CompileArgs &args) {
  megatrain::PipelineOptions &pipeline = args.pipeline;
  if (args.lossFlags) {
    pipeline.lossMode = args.lossMode.value_or(
        pipeline.lossOutput.empty() ? "next-token-ce" : "output");
    return;
  }
  std::vector<std::string> outputs, inputs;
  bool scalarLoss = false, logits = false, inputIds = false;
  for (auto func : module.getOps<mlir::func::FuncOp>()) {
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      auto name = func.getResultAttrOfType<mlir::StringAttr>(i, "mt.output_name");
      if (!name)
        continue;
      outputs.push_back(name.str());
      auto type = mlir::dyn_cast<mlir::RankedTensorType>(func.getResultTypes()[i]);
      if (name.getValue() == "loss" && type && type.getRank() == 0)
        scalarLoss = true;
      if (name.getValue() == "logits")
        logits = true;
    }
    for (auto input : func.getOps<megatrain::mt::InputOp>()) {
      inputs.push_back(input.getName().str());
      if (input.getName() == "input_ids")
        inputIds = true;
    }
  }
  // One output and one input (torch.onnx.export's linear_14 and ids): the
  // logits and the tokens (mt-add-loss picks them).
  logits = logits || outputs.size() == 1;
  inputIds = inputIds || inputs.size() == 1;
  if (scalarLoss) {
    pipeline.lossMode = "output";
    pipeline.lossOutput = "loss";
  } else if (logits && inputIds) {
    pipeline.lossMode = "next-token-ce";
  } else {
    fail("cannot tell what to minimize: the model's outputs are [" +
         llvm::join(outputs, ", ") + "] and inputs [" + llvm::join(inputs, ", ") +
         "]; pass --loss-output NAME (a scalar output) or --loss next-token-ce "
         "--logits NAME --tokens NAME");
  }
}

/// Opens -o (or stdout for "" and "-") for text output.
std::unique_ptr<llvm::raw_fd_ostream> openTextOutput(const std::string &path) {
  std::error_code error;
  auto out = std::make_unique<llvm::raw_fd_ostream>(
      path.empty() ? "-" : path, error, llvm::sys::fs::OF_Text);
  if (error)
    fail("cannot write '" + path + "': " + error.message());
  return out;
}

/// formatBytes with the exact count, which scripts read: "1.50 MiB (1572864
/// bytes)"; below a KiB the two agree and it is just "512 B".
std::string bytesWithCount(uint64_t bytes) {
  std::string text = megatrain::formatBytes(bytes);
  return bytes < 1024 ? text : text + " (" + std::to_string(bytes) + " bytes)";
}

void printSummary(llvm::raw_ostream &os, const megatrain::plan::Plan &plan,
                  const megatrain::HostOrderResult &hostOrder) {
  uint64_t params = 0, paramElements = 0, trainable = 0, trainableElements = 0;
  for (const auto &tensor : plan.tensors()) {
    if (tensor.role() != megatrain::plan::PARAMETER)
      continue;
    uint64_t elements = 1;
    for (int64_t dim : tensor.shape())
      elements *= static_cast<uint64_t>(dim);
    ++params;
    paramElements += elements;
    if (tensor.trainable()) {
      ++trainable;
      trainableElements += elements;
    }
  }
  uint64_t devicePeak = 0;
  for (const auto &usage : plan.header().predicted_peak())
    if (usage.pool() == 0)
      devicePeak = usage.peak_bytes();
  if (plan.header().evaluation())
    os << "  kind           evaluation plan (forward and loss only)\n";
  os << "  parameters     " << params << " (" << paramElements << " elements), "
     << trainable << " trainable (" << trainableElements << " elements), "
     << params - trainable << " frozen (" << paramElements - trainableElements
     << " elements)\n"
     << "  device arena   " << bytesWithCount(plan.pools(0).size_bytes()) << "\n"
     << "  predicted peak " << bytesWithCount(devicePeak) << " on the device\n"
     << "  host pool      " << bytesWithCount(plan.pools(1).size_bytes()) << "\n"
     << "  steps          " << plan.steps_size() << "\n";
  const megatrain::plan::Header &header = plan.header();
  const megatrain::plan::StepTimeBreakdown &b = header.predicted_breakdown();
  auto ms = [](double seconds) { return llvm::formatv("{0:f3}", seconds * 1e3).str(); };
  os << "  predicted step " << ms(header.predicted_step_s()) << " ms (compute "
     << ms(b.compute_s()) << ", exposed transfer " << ms(b.exposed_transfer_s())
     << ", recompute " << ms(b.recompute_s()) << ", host optimizer "
     << ms(b.host_optimizer_s()) << ", idle " << ms(b.idle_s()) << ")\n"
     << "  link bytes     h2d " << bytesWithCount(header.h2d_bytes()) << ", d2h "
     << bytesWithCount(header.d2h_bytes()) << "\n";
  if (hostOrder.applied)
    os << "  host order     " << hostOrder.moved << " of the " << hostOrder.tasks
       << " host tasks after the loss moved, earliest deadline first (" << ms(hostOrder.before)
       << " ms in plan order)\n";
  else if (hostOrder.tasks >= 2)
    os << "  host order     plan order kept: " << hostOrder.why << "\n";
  const std::string hostRate = megatrain::describeHostRateFloor(plan);
  if (!hostRate.empty())
    os << "  host rate      " << hostRate << "\n";
}

/// Adds the model's path and hash to the module for the plan header.
void recordProvenance(mlir::ModuleOp module, const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    fail("cannot read '" + path + "': " + buffer.getError().message());
  llvm::SHA256 sha;
  sha.update(llvm::arrayRefFromStringRef((*buffer)->getBuffer()));
  std::array<uint8_t, 32> digest = sha.final();
  mlir::Builder builder(module.getContext());
  if (!module->hasAttr("mt.source_model"))
    module->setAttr("mt.source_model", builder.getStringAttr(path));
  if (!module->hasAttr("mt.source_sha256"))
    module->setAttr("mt.source_sha256",
                    builder.getStringAttr(llvm::toHex(digest, /*LowerCase=*/true)));
}

int compile(int argc, char **argv) {
  std::optional<CompileArgs> parsed = parseArgs(argc, argv);
  if (!parsed)
    return 0; // --help or --version
  CompileArgs &args = *parsed;
  if (!llvm::sys::fs::exists(args.model))
    fail("cannot open '" + args.model + "': no such file");
  if (llvm::sys::fs::is_directory(args.model))
    fail("'" + args.model + "' is a directory, not a model");

  mlir::DialectRegistry registry;
  registry.insert<megatrain::mt::MtDialect, mlir::func::FuncDialect>();
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // A failing pass would otherwise attach the whole function to its error.
  context.printOpOnDiagnostic(false);
  // One line per diagnostic, its location first; notes follow on their own.
  mlir::ScopedDiagnosticHandler handler(&context, [](mlir::Diagnostic &diag) {
    auto print = [](llvm::StringRef severity, mlir::Location loc,
                    std::string message) {
      std::replace(message.begin(), message.end(), '\n', ' ');
      std::string where = megatrain::formatLocation(loc);
      llvm::errs() << kTool << ": " << severity << ": "
                   << (where.empty() ? "" : where + ": ") << message << "\n";
    };
    llvm::StringRef severity =
        diag.getSeverity() == mlir::DiagnosticSeverity::Error     ? "error"
        : diag.getSeverity() == mlir::DiagnosticSeverity::Warning ? "warning"
                                                                  : "note";
    print(severity, diag.getLocation(), diag.str());
    for (const mlir::Diagnostic &note : diag.getNotes())
      print("note", note.getLocation(), note.str());
    return mlir::success();
  });

  bool fromMlir = llvm::StringRef(args.model).ends_with(".mlir");
  mlir::OwningOpRef<mlir::ModuleOp> module;
  if (fromMlir) {
    module = mlir::parseSourceFile<mlir::ModuleOp>(args.model, &context);
  } else {
    megatrain::ToolActivity activity("importing '" + args.model + "'");
    module = megatrain::importOnnxModel(context, args.model, args.import);
  }
  if (!module)
    return 1; // the parser or importer has reported why
  if (mlir::failed(mlir::verify(*module)))
    return 1;

  std::optional<megatrain::EmitStage> stage = megatrain::parseEmitStage(
      args.emit == "plan-text" ? "plan" : args.emit);
  if (!fromMlir) {
    recordProvenance(*module, args.model);
    if (*stage != megatrain::EmitStage::Mt)
      chooseLoss(*module, args);
  }

  if (fromMlir && args.pipeline.forwardOnly)
    fail("--forward-only needs an ONNX model: a .mlir step is planned as it "
         "is (the --emit=training output of a --forward-only compile is "
         "already an evaluation step)");
  if (fromMlir && args.pipeline.microbatches > 1)
    fail("--microbatches needs an ONNX model: a --emit=training step already "
         "has its updates");

  // mt-tier appends to the tiering log; each compile starts it empty.
  if (!args.pipeline.tieringLog.empty() && args.pipeline.tieringLog != "-") {
    std::ofstream logFile(args.pipeline.tieringLog, std::ios::trunc);
    if (!logFile)
      fail("--tiering-log: cannot write '" + args.pipeline.tieringLog + "'");
  }
  megatrain::ToolActivity activity("compiling '" + args.model + "'");
  mlir::PassManager pm(&context);
  if (fromMlir)
    megatrain::buildPlanningPipeline(pm, args.pipeline, *stage);
  else
    megatrain::buildPipeline(pm, args.pipeline, *stage);
  if (mlir::failed(pm.run(*module)))
    return 1;

  if (*stage != megatrain::EmitStage::Plan) {
    auto out = openTextOutput(args.output);
    module->print(*out);
    finishOutput(*out, args.output);
    return 0;
  }

  megatrain::PlanEmitOptions emitOptions;
  emitOptions.generator = std::string(kTool) + " " + MEGATRAIN_VERSION;
  emitOptions.optimizerStream = args.optimizerStream;
  // Measured on the H200 (docs/tiering.md, "Streams and events"): the fetches' own queue
  // helps a single batch and costs a step of micro-batches, whose prefetches it delays.
  emitOptions.fetchStream = args.fetchStream.value_or(args.pipeline.microbatches <= 1);
  emitOptions.accumulateInProducts = args.accumulateInProducts;
  megatrain::HostOrderResult hostOrder;
  if (args.hostUpdateOrder) {
    emitOptions.hostOrderProfile = &args.profile;
    emitOptions.hostOrder = &hostOrder;
  }
  for (int i = 1; i < argc; ++i)
    emitOptions.compileOptions.push_back(argv[i]);
  mlir::FailureOr<megatrain::plan::Plan> plan =
      megatrain::emitPlan(*module, emitOptions);
  if (mlir::failed(plan))
    return 1;
  // Fills the steps' predicted times and the header's predictions. A matmul
  // or attention step runs at the rate of its `precision` attribute (tf32,
  // bf16); one without runs in exact fp32.
  megatrain::simulatePlan(*plan, args.profile, megatrain::Precision::FP32);
  // The runtime proves every plan it loads the same way; a plan that fails
  // here is the compiler's bug, and is not written.
  std::vector<std::string> failures = megatrain::verifySchedule(*plan);
  if (!failures.empty()) {
    for (const std::string &failure : failures)
      llvm::errs() << kTool << ": error: plan verifier: " << failure << "\n";
    return 1;
  }

  // Last: the checksum covers everything above (PlanChecksum.h).
  megatrain::sealPlan(*plan);
  if (args.emit == "plan-text") {
    std::string text;
    if (!google::protobuf::TextFormat::PrintToString(*plan, &text))
      fail("cannot print the plan as text");
    auto out = openTextOutput(args.output);
    *out << text;
    finishOutput(*out, args.output);
    return 0;
  }
  std::string bytes;
  if (!plan->SerializeToString(&bytes))
    fail("cannot serialize the plan");
  // Through a temporary, fsync and rename: a reader never sees half a plan,
  // and a failure leaves no file.
  try {
    megatrain::writeFileAtomically(args.output, bytes);
  } catch (const megatrain::Error &error) {
    fail(error.what());
  }
  llvm::outs() << kTool << ": wrote " << args.output << " (" << bytes.size()
               << " bytes)\n";
  printSummary(llvm::outs(), *plan, hostOrder);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  // Any exception (std::bad_alloc from a hostile file included) is one line
  // and exit status 1, like every other failure.
  return megatrain::runTool(kTool, [&] {
    const int status = compile(argc, argv);
    finishOutput(llvm::outs(), "-");
    return status;
  });
}
