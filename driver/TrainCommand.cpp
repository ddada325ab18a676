// TrainCommand.cpp - `megatrain train`: from a Hugging Face model directory and text or token files to a trained model directory.
//
// The stages, each a tool or helper of the project run as a child process, each
// skipped when its output is there and was made by the same command (a stamp in
// RUN_DIR/.megatrain/ holds the command line):
//   1. export the graph: export_hf.py --model HF_DIR (graph only when megatrain-run
//      reads the weights from the checkpoint's safetensors; else with the weights);
//   2. the device profile: RUN_DIR/profile.json when present, else megatrain-profile
//      when a GPU is present; without one the compiler keeps its default figures;
//   3. compile: megatrain-compile, batch and sequence from the flags or the model's
//      config, the device budget from the profile unless --device-memory is given;
//   4. data: token files (.bin) as they are; text and conversations (.jsonl) through
//      tokenize_text.py with the model's tokenizer (EOS between documents; a loss mask for
//      conversations, which the plan then reads through --targets);
//   5. train: megatrain-run, resuming from RUN_DIR/checkpoints when a checkpoint is there;
//   6. write RUN_DIR/hf, a directory transformers loads.
// The resolved configuration goes to RUN_DIR/config.toml before training starts.
#include "TrainCommand.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "Subprocess.h"
#include "megatrain/plan/AtomicFile.h"
#include "megatrain/plan/ByteSize.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/Json.h"

namespace fs = std::filesystem;

namespace megatrain::driver {
namespace {

const char kUsage[] =
    "usage: megatrain train --model HF_DIR --data FILES --out RUN_DIR (--steps N | --tokens N | --epochs F)\n"
    "                       [--config run.toml] [options]\n";

const char kDescription[] =
    "Trains a Hugging Face causal language model (a directory saved by save_pretrained: config.json, "
    "safetensors, tokenizer) on text or token files, and writes RUN_DIR/hf, a directory transformers "
    "loads. Stages: export the graph, measure or reuse the device profile, compile, tokenize, train "
    "(resuming from RUN_DIR/checkpoints when it holds a checkpoint), write the model. Running the "
    "same command again resumes; every flag can also be set in a TOML file (--config), and the "
    "resolved configuration is written to RUN_DIR/config.toml (docs/guide-finetune.md).";

const char kFooter[] = R"(Examples:
  megatrain train --model models/llama --data notes.txt --out runs/notes --steps 200
  megatrain train --config run.toml --out runs/b
  megatrain train --model models/llama --data train.bin --out runs/c --epochs 1 --batch 4 \
      --seq 1024 --device-memory 40GiB --lr 1e-5 --warmup-steps 20 --lr-schedule cosine
)";

constexpr int kStages = 6;

void stage(int number, const std::string& what) {
  std::printf("megatrain train: [%d/%d] %s\n", number, kStages, what.c_str());
  std::fflush(stdout);
}

void note(const std::string& what) {
  std::printf("megatrain train:       %s\n", what.c_str());
  std::fflush(stdout);
}

double positiveReal(const std::string& text, const std::string& flag) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || !std::isfinite(value) || value <= 0)
    throw Error(flag + " needs a positive number, got '" + text + "'");
  return value;
}

void splitList(const std::string& list, const std::string& flag, std::vector<std::string>& into) {
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    if (comma == start) throw Error(flag + " has an empty file name in '" + list + "'");
    into.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
}

std::string readText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A stage's stamp: the command that made its output. Equal stamp and an output
// that exists: the stage is skipped.
struct Stamp {
  fs::path file;
  std::string command;
  bool current(const fs::path& output) const {
    return fs::exists(output) && fs::exists(file) && readText(file) == command;
  }
  void write() const { writeFileAtomically(file.string(), command); }
};

Stamp stampFor(const TrainOptions& o, const std::string& name, const std::vector<std::string>& argv) {
  // The interpreter's path is not part of what was made.
  std::vector<std::string> args = argv;
  if (!args.empty() && !o.python.empty() && args[0] == o.python) args.erase(args.begin());
  return {fs::path(o.out) / ".megatrain" / (name + ".cmd"), commandLine(args)};
}

void runStage(const std::vector<std::string>& argv, const std::string& what) {
  const int status = runProgram(argv);
  if (status != 0)
    throw Error(what + " failed (exit status " + std::to_string(status) + "): " + commandLine(argv));
}

// The flags megatrain-run's help lists: what this build's runtime can do.
struct RunFeatures {
  bool weightsFromHf = false;  // --weights HF_DIR or .safetensors
  bool exportHf = false;       // --export-hf OUT_DIR --hf-source HF_DIR
  bool eval = false;           // --eval-plan, --eval-data, --eval-every
};

RunFeatures probeRun(const std::string& run) {
  const std::string help = captureProgram({run, "--help"});
  RunFeatures features;
  features.exportHf = help.find("--export-hf") != std::string::npos && help.find("--hf-source") != std::string::npos;
  features.weightsFromHf = features.exportHf && help.find("safetensors") != std::string::npos;
  features.eval = help.find("--eval-plan") != std::string::npos;
  return features;
}

// An NVIDIA driver with a device: what megatrain-profile needs (a container may show
// the device node without the /proc entry).
bool gpuPresent() {
  std::error_code error;
  const fs::path gpus = "/proc/driver/nvidia/gpus";
  return (fs::is_directory(gpus, error) && !fs::is_empty(gpus, error)) || fs::exists("/dev/nvidia0", error);
}

std::string requireTool(const std::string& name) {
  const std::string path = siblingTool(name);
  if (path.empty()) throw Error("no " + name + " beside this binary in " + binaryDir() + " (build it: scripts/build.sh)");
  return path;
}

// Tokens in a token file: its sidecar's count, else its size over the token width.
uint64_t tokenCount(const std::string& path) {
  const std::string sidecar = path + ".json";
  if (fs::exists(sidecar)) {
    const nlohmann::json meta = parseJson(readText(sidecar), sidecar);
    if (meta.is_object() && meta.contains("tokens") && meta["tokens"].is_number_unsigned())
      return meta["tokens"].get<uint64_t>();
  }
  return fs::file_size(path) / 2;
}

std::string tomlValue(const std::string& value) {
  std::string quoted = "\"";
  for (char c : value) quoted += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
  return quoted + "\"";
}

bool hasFlag(const std::vector<std::pair<std::string, std::string>>& flags, const std::string& name) {
  return std::any_of(flags.begin(), flags.end(), [&name](const auto& flag) { return flag.first == name; });
}

std::string tomlList(const std::vector<std::string>& values) {
  std::string list = "[";
  for (size_t i = 0; i < values.size(); ++i) list += (i ? ", " : "") + tomlValue(values[i]);
  return list + "]";
}

}  // namespace

ToolHelp trainHelp() { return {kUsage, kDescription, kFooter}; }

void addTrainOptions(CLI::App& app, TrainOptions& o) {
  CLI::App* sub = &app;
  const std::string io = "Model and data";
  addValueOption(*sub, "--model", "HF_DIR", "a Hugging Face model directory (config.json, safetensors, tokenizer)",
                 io, [&o](const std::string& v) { o.model = v; });
  repeatable(addValueOption(*sub, "--data", "FILES",
                            "training data (repeatable or comma-separated): text files, tokenized with the "
                            "model's tokenizer, or token files (.bin, from tokenize_text.py) used as they are",
                            io, [&o](const std::string& v) { splitList(v, "--data", o.data); }));
  addValueOption(*sub, "-o,--out", "RUN_DIR",
                 "the run's folder: graph, plan, token files, checkpoints, metrics.jsonl, config.toml and "
                 "the trained model in RUN_DIR/hf",
                 io, [&o](const std::string& v) { o.out = v; });
  repeatable(addValueOption(*sub, "--eval-data", "FILES",
                            "held-out data (text or token files), evaluated every --eval-every steps and "
                            "after the last with a forward-only plan (RUN_DIR/eval.plan)",
                            io, [&o](const std::string& v) { splitList(v, "--eval-data", o.evalData); }));
  addValueOption(*sub, "--eval-every", "N", "evaluate every N steps (default: at the end only)", io,
                 [&o](const std::string& v) { o.evalEvery = parsePositive(v, "--eval-every"); });

  const std::string length = "How long (exactly one)";
  addValueOption(*sub, "--steps", "N", "train until optimizer step N, resumed steps included", length,
                 [&o](const std::string& v) { o.steps = parsePositive(v, "--steps"); });
  addValueOption(*sub, "--tokens", "N", "train on N tokens (rounded up to whole steps)", length,
                 [&o](const std::string& v) { o.tokens = static_cast<uint64_t>(parsePositive(v, "--tokens")); });
  addValueOption(*sub, "--epochs", "F", "pass over the training data F times (rounded up to whole steps)", length,
                 [&o](const std::string& v) { o.epochs = positiveReal(v, "--epochs"); });

  // A flag handed to megatrain-compile or megatrain-run as it is, after `check`.
  enum class To { Compile, Run };
  auto pass = [&o, sub](const std::string& flag, const std::string& metavar, const std::string& help,
                        const std::string& group, To to, auto check) {
    addValueOption(*sub, flag, metavar, help, group, [&o, flag, to, check](const std::string& v) {
      check(v, flag);
      (to == To::Compile ? o.compileFlags : o.runFlags).emplace_back(flag, v);
      o.passedFlags.emplace_back(flag, v);
    });
  };
  auto anyText = [](const std::string&, const std::string&) {};
  auto count = [](const std::string& v, const std::string& flag) { parsePositive(v, flag); };
  auto real = [](const std::string& v, const std::string& flag) { positiveReal(v, flag); };
  auto size = [](const std::string& v, const std::string& flag) { parseSizeFlag(v, flag); };

  const std::string shape = "Batch";
  addValueOption(*sub, "--batch", "B", "sequences per micro-batch (default 1)", shape,
                 [&o](const std::string& v) { o.batch = parsePositive(v, "--batch"); });
  addValueOption(*sub, "--seq", "T", "tokens per sequence (default: the model's context length, at most 2048)",
                 shape, [&o](const std::string& v) { o.seq = parsePositive(v, "--seq"); });
  pass("--microbatches", "N", "accumulate N micro-batches per optimizer step (default 1)", shape, To::Compile, count);

  const std::string optimizer = "Optimizer";
  pass("--lr", "F", "peak learning rate (default 1e-3, megatrain-compile's)", optimizer, To::Run, real);
  pass("--weight-decay", "F", "AdamW weight decay (default 0.01)", optimizer, To::Compile,
       [](const std::string& v, const std::string& flag) {
         if (v != "0") positiveReal(v, flag);
       });
  pass("--lr-schedule", "constant|cosine|linear", "after warmup, hold or decay the lr (default constant)",
       optimizer, To::Run, anyText);
  pass("--warmup-steps", "N", "raise the lr linearly over the first N steps", optimizer, To::Run, count);
  pass("--min-lr", "F", "where the decay ends (default 0)", optimizer, To::Run, anyText);
  pass("--clip-grad-norm", "F",
       "clip the global gradient norm to F (keeps the training state in host memory: an update on "
       "the device cannot wait for every gradient)",
       optimizer, To::Run, real);

  const std::string machine = "Machine";
  pass("--device-memory", "SIZE",
       "device memory budget, e.g. 24GiB (default with a GPU: 90% of the profile's device memory)", machine,
       To::Compile, size);
  pass("--host-memory", "SIZE",
       "pinned host memory for training state (default: the profile's host memory minus 16 GiB)", machine,
       To::Compile, size);
  pass("--disk-memory", "SIZE",
       "room for training state in files under RUN_DIR/disk (default: none, no disk tier)", machine,
       To::Compile, size);
  pass("--precision", "bf16|tf32|fp32", "compute precision (default bf16)", machine, To::Compile, anyText);
  pass("--tiering-policy", "P", "auto (default) | keep | checkpoint | offload", machine, To::Compile, anyText);
  pass("--device-profile", "FILE", "the machine's figures (default: RUN_DIR/profile.json, measured once)",
       machine, To::Compile, anyText);
  pass("--backend", "auto|cpu|cuda", "where to train (default auto: cuda when a GPU is present)", machine,
       To::Run, anyText);

  const std::string run = "Run";
  pass("--export-dtype", "fp32|bf16|fp16", "dtype of RUN_DIR/hf (default: the model's own)", run, To::Run, anyText);
  pass("--seed", "N", "seed of the data order (default 0)", run, To::Run, anyText);
  pass("--save-every", "N", "also save a checkpoint every N steps (always at the end)", run, To::Run, count);
  pass("--keep-checkpoints", "N", "keep only the N newest checkpoints", run, To::Run, count);
  addFlagOption(*sub, "--no-resume", "start from the model's weights even when RUN_DIR holds a checkpoint", run,
                [&o] { o.noResume = true; });
  addValueOption(*sub, "--python", "PATH", "the Python interpreter of the helpers (default: python3 on PATH)",
                 run, [&o](const std::string& v) { o.python = v; });
}

int runTrain(TrainOptions& o) {
  // ---- check everything that can be checked before the first stage
  if (o.model.empty()) throw Error("train: missing --model HF_DIR (a Hugging Face model directory)");
  if (o.data.empty()) throw Error("train: missing --data FILES (text or token files)");
  if (o.out.empty()) throw Error("train: missing --out RUN_DIR (where the run's files go)");
  const int lengths = o.steps.has_value() + o.tokens.has_value() + o.epochs.has_value();
  if (lengths != 1)
    throw Error(std::string("train: ") + (lengths ? "give only one of" : "say how long to train with one of") +
                " --steps N, --tokens N or --epochs F");
  if (o.evalEvery && o.evalData.empty()) throw Error("--eval-every needs --eval-data FILES to evaluate on");
  const fs::path model = o.model, out = o.out;
  if (!fs::is_regular_file(model / "config.json"))
    throw Error("--model " + o.model + ": no config.json there (a directory written by save_pretrained)");
  const nlohmann::json config = parseJson(readText(model / "config.json"), (model / "config.json").string());
  bool textData = false;
  for (const std::vector<std::string>* files : {&o.data, &o.evalData})
    for (const std::string& file : *files) {
      if (!fs::is_regular_file(file)) throw Error("--data " + file + ": no such file");
      textData = textData || fs::path(file).extension() != ".bin";
    }
  if (textData && !fs::is_regular_file(model / "tokenizer.json"))
    throw Error("--model " + o.model + " has no tokenizer.json to tokenize the text given to --data; give token "
                "files (.bin, frontends/python/tokenize_text.py) instead");
  if (o.seq == 0) {
    int64_t context = 2048;
    for (const char* key : {"max_position_embeddings", "n_positions"})
      if (config.contains(key) && config[key].is_number_integer()) context = config[key].get<int64_t>();
    o.seq = std::min<int64_t>(context, 2048);
  }
  if (o.batch == 0) o.batch = 1;
  // Conversations (.jsonl) get a loss mask from tokenize_text.py, and so may token files
  // (their sidecar names it): the loss then reads targets that megatrain-run masks.
  bool lossMask = false;
  for (const std::string& file : o.data) {
    const fs::path path = file;
    if (path.extension() == ".jsonl") lossMask = true;
    if (path.extension() == ".bin" && fs::exists(file + ".json")) {
      const nlohmann::json meta = parseJson(readText(file + ".json"), file + ".json");
      lossMask = lossMask || (meta.is_object() && meta.contains("mask"));
    }
  }
  int64_t microbatches = 1;
  for (const auto& [flag, value] : o.compileFlags)
    if (flag == "--microbatches") microbatches = parsePositive(value, flag);

  const std::string compile = requireTool("megatrain-compile");
  const std::string runTool = requireTool("megatrain-run");
  const RunFeatures features = probeRun(runTool);
  for (const auto& [flag, value] : o.runFlags)
    if (flag == "--export-dtype" && !features.exportHf)
      throw Error("--export-dtype: this build's megatrain-run has no --export-hf; leave --export-dtype out");
  const bool forwardOnly = captureProgram({compile, "--help"}).find("--forward-only") != std::string::npos;
  if (!o.evalData.empty() && (!features.eval || !forwardOnly))
    throw Error("--eval-data: this build's megatrain-run has no --eval-plan (or megatrain-compile no "
                "--forward-only); train without --eval-data");
  std::vector<std::string> modules = {"torch", "transformers", "onnx"};
  if (textData) modules.push_back("tokenizers");  // tokenize_text.py --tokenizer
  o.python = requirePython(modules, o.python);
  fs::create_directories(out / ".megatrain");

  // ---- 1. the graph
  const fs::path onnx = out / "model.onnx";
  {
    std::vector<std::string> argv = {o.python, pythonScript("export_hf.py"), "--model", o.model, "--batch",
                                     std::to_string(o.batch), "--seq", std::to_string(o.seq), "-o", onnx.string()};
    if (features.weightsFromHf) argv.push_back("--graph-only");
    const Stamp stamp = stampFor(o, "export", argv);
    if (stamp.current(onnx)) {
      stage(1, "the graph: " + onnx.string() + " (exported before, same model and shape)");
    } else {
      stage(1, std::string("exporting the graph") + (features.weightsFromHf ? " (graph only)" : " with its weights") +
                   " to " + onnx.string());
      runStage(argv, "exporting " + o.model);
      stamp.write();
    }
  }

  // ---- 2. the device profile
  std::string profile;
  for (const auto& [flag, value] : o.compileFlags)
    if (flag == "--device-profile") profile = value;
  const fs::path ownProfile = out / "profile.json";
  if (!profile.empty()) {
    stage(2, "device profile: " + profile + " (--device-profile)");
  } else if (fs::exists(ownProfile)) {
    profile = ownProfile.string();
    stage(2, "device profile: " + profile + " (measured before)");
  } else if (gpuPresent() && !siblingTool("megatrain-profile").empty()) {
    stage(2, "measuring this machine's device profile (megatrain-profile, once per run folder)");
    runStage({siblingTool("megatrain-profile"), "-o", ownProfile.string()}, "megatrain-profile");
    profile = ownProfile.string();
  } else {
    stage(2, std::string("device profile: none (") +
                 (gpuPresent() ? "this build has no megatrain-profile" : "no GPU here") +
                 "); the compiler's default figures");
  }
  uint64_t deviceMemory = 0;
  if (!profile.empty()) {
    const nlohmann::json figures = parseJson(readText(profile), profile);
    if (figures.contains("device_memory_bytes") && figures["device_memory_bytes"].is_number())
      deviceMemory = figures["device_memory_bytes"].get<uint64_t>();
  }

  // ---- 3. compile
  const fs::path plan = out / "train.plan";
  const fs::path evalPlan = out / "eval.plan";
  {
    std::vector<std::string> argv = {compile, onnx.string(), "-o", plan.string(), "--shape",
                                     "input_ids=" + std::to_string(o.batch) + "x" + std::to_string(o.seq),
                                     "--loss", "next-token-ce"};
    if (lossMask) argv.insert(argv.end(), {"--targets", "targets"});
    // Clipping needs every gradient before any update: the state stays on the host
    // and keeps its gradients (megatrain-run refuses --clip-grad-norm with device
    // updates or gradients in the staging ring).
    if (hasFlag(o.runFlags, "--clip-grad-norm"))
      argv.insert(argv.end(), {"--state-home", "host", "--keep-gradients"});
    bool budget = false;
    for (const auto& [flag, value] : o.compileFlags) {
      argv.push_back(flag);
      argv.push_back(value);
      budget = budget || flag == "--device-memory";
    }
    if (!profile.empty() && o.compileFlags.end() == std::find_if(o.compileFlags.begin(), o.compileFlags.end(),
                                                                 [](const auto& f) { return f.first == "--device-profile"; }))
      argv.insert(argv.end(), {"--device-profile", profile});
    if (!budget && deviceMemory > 0)
      argv.insert(argv.end(), {"--device-memory", std::to_string(deviceMemory / 10 * 9)});
    const Stamp stamp = stampFor(o, "compile", argv);
    if (stamp.current(plan)) {
      stage(3, "the plan: " + plan.string() + " (compiled before, same flags)");
    } else {
      stage(3, "compiling " + plan.string() + " (batch " + std::to_string(o.batch) + " x seq " +
                   std::to_string(o.seq) + ")");
      runStage(argv, "compiling");
      stamp.write();
    }
    if (!o.evalData.empty()) {
      // The evaluation plan: the same model and flags, forward and loss only.
      argv[3] = evalPlan.string();
      argv.push_back("--forward-only");
      const Stamp evalStamp = stampFor(o, "compile-eval", argv);
      if (evalStamp.current(evalPlan)) {
        note("the evaluation plan: " + evalPlan.string() + " (compiled before)");
      } else {
        note("compiling the evaluation plan " + evalPlan.string());
        runStage(argv, "compiling the evaluation plan");
        evalStamp.write();
      }
    }
  }

  // ---- 4. data
  auto tokenize = [&](const std::vector<std::string>& files, const std::string& name) {
    std::vector<std::string> tokens, texts;
    for (const std::string& file : files)
      (fs::path(file).extension() == ".bin" ? tokens : texts).push_back(file);
    if (!texts.empty()) {
      const fs::path bin = out / "data" / (name + ".bin");
      fs::create_directories(bin.parent_path());
      std::vector<std::string> argv = {o.python, pythonScript("tokenize_text.py")};
      argv.insert(argv.end(), texts.begin(), texts.end());
      // The model's folder: tokenize_text.py takes the EOS and BOS rules from its tokenizer_config.json.
      argv.insert(argv.end(), {"--out", bin.string(), "--tokenizer", model.string()});
      Stamp stamp = stampFor(o, "tokenize-" + name, argv);
      // Changed text is tokenized again: the stamp holds each input's size and time.
      for (const std::string& text : texts)
        stamp.command += "\n" + text + " " + std::to_string(fs::file_size(text)) + " " +
                         std::to_string(fs::last_write_time(text).time_since_epoch().count());
      if (stamp.current(bin)) {
        note(name + " tokens: " + bin.string() + " (tokenized before)");
      } else {
        note("tokenizing " + std::to_string(texts.size()) + " text file(s) into " + bin.string());
        runStage(argv, "tokenizing");
        stamp.write();
      }
      tokens.push_back(bin.string());
    }
    return tokens;
  };
  stage(4, "data");
  const std::vector<std::string> trainTokens = tokenize(o.data, "train");
  const std::vector<std::string> evalTokens = tokenize(o.evalData, "eval");

  // How long, in optimizer steps.
  const uint64_t tokensPerStep = static_cast<uint64_t>(o.batch * o.seq * microbatches);
  int64_t steps = o.steps.value_or(0);
  if (o.tokens) steps = static_cast<int64_t>((*o.tokens + tokensPerStep - 1) / tokensPerStep);
  if (o.epochs) {
    uint64_t total = 0;
    for (const std::string& file : trainTokens) total += tokenCount(file);
    steps = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(*o.epochs * static_cast<double>(total) /
                                                                static_cast<double>(tokensPerStep))));
    note(std::to_string(total) + " tokens x " + std::to_string(*o.epochs) + " epochs = " + std::to_string(steps) +
         " steps of " + std::to_string(tokensPerStep) + " tokens");
  }

  // The resolved configuration: what this run is, as `--config` reads it.
  {
    std::string toml = "# megatrain train: the resolved configuration of this run (megatrain train --config "
                       "this file --out " + o.out + " repeats it)\n";
    toml += "model = " + tomlValue(o.model) + "\n";
    toml += "data = " + tomlList(o.data) + "\n";
    if (!o.evalData.empty()) toml += "eval-data = " + tomlList(o.evalData) + "\n";
    if (o.evalEvery) toml += "eval-every = " + std::to_string(o.evalEvery) + "\n";
    toml += "steps = " + std::to_string(steps) + "\n";
    toml += "batch = " + std::to_string(o.batch) + "\n";
    toml += "seq = " + std::to_string(o.seq) + "\n";
    for (const auto& [flag, value] : o.passedFlags) toml += flag.substr(2) + " = " + tomlValue(value) + "\n";
    if (o.noResume) toml += "no-resume = true\n";
    writeFileAtomically((out / "config.toml").string(), toml);
  }

  // ---- 5. train (and 6. write the model, in the same run)
  const fs::path checkpoints = out / "checkpoints";
  const fs::path hf = out / "hf";
  std::vector<std::string> argv = {runTool, plan.string(), "--weights", features.weightsFromHf ? o.model : onnx.string(),
                                   "--steps", std::to_string(steps), "--save", checkpoints.string(), "--metrics",
                                   (out / "metrics.jsonl").string()};
  for (const std::string& file : trainTokens) argv.insert(argv.end(), {"--data", file});
  for (const auto& [flag, value] : o.runFlags) argv.insert(argv.end(), {flag, value});
  if (hasFlag(o.compileFlags, "--disk-memory")) argv.insert(argv.end(), {"--disk-dir", (out / "disk").string()});
  if (!evalTokens.empty()) {
    argv.insert(argv.end(), {"--eval-plan", evalPlan.string()});
    for (const std::string& file : evalTokens) argv.insert(argv.end(), {"--eval-data", file});
    if (o.evalEvery) argv.insert(argv.end(), {"--eval-every", std::to_string(o.evalEvery)});
  }
  const bool resume = !o.noResume && fs::exists(checkpoints / "latest");
  if (resume) argv.insert(argv.end(), {"--resume", checkpoints.string()});
  if (features.exportHf) {
    argv.insert(argv.end(), {"--export-hf", hf.string(), "--hf-source", o.model});
  } else {
    fs::create_directories(hf);
    argv.insert(argv.end(), {"--export-safetensors", (hf / "model.safetensors").string()});
  }
  stage(5, std::string(resume ? "resuming from " + checkpoints.string() : "training") + " to step " +
               std::to_string(steps) + " (megatrain-run)");
  const int status = runProgram(argv);
  if (status != 0) {
    if (status >= 128) return status;  // stopped by a signal, after its checkpoint
    throw Error("megatrain-run failed (exit status " + std::to_string(status) + "): " + commandLine(argv));
  }

  stage(6, "the trained model: " + hf.string());
  if (!features.exportHf) {
    // The configuration and tokenizer beside the weights, as transformers expects them.
    for (const char* name : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                             "special_tokens_map.json", "tokenizer.model", "vocab.json", "merges.txt",
                             "chat_template.jinja"})
      if (fs::exists(model / name)) fs::copy_file(model / name, hf / name, fs::copy_options::overwrite_existing);
  }
  note("load it with AutoModelForCausalLM.from_pretrained(\"" + hf.string() + "\")");
  return 0;
}

}  // namespace megatrain::driver
