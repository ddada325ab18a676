// megatrain.cpp - the one entry point: `megatrain train` drives the whole pipeline, and the other commands run the tools beside this binary.
#include <cstdio>
#include <string>
#include <vector>

#include "Subprocess.h"
#include "TrainCommand.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/ToolCli.h"
#include "megatrain/plan/ToolMain.h"

namespace megatrain::driver {
namespace {

const char kUsage[] = R"(usage: megatrain train --model HF_DIR --data FILES --out RUN_DIR (--steps N | --tokens N | --epochs N) [options]
       megatrain compile|run|inspect|profile|export [ARGS...]
)";

const char kDescription[] =
    "megatrain trains language models that do not fit in GPU memory on one GPU. `megatrain train` "
    "takes a Hugging Face model directory and text or token files to a trained model directory "
    "in one command (megatrain train --help). The other commands run the tool of the same name "
    "beside this binary with the remaining arguments, unchanged (megatrain compile --help is "
    "megatrain-compile --help).";

const char kFooter[] = R"(Examples:
  megatrain train --model models/llama --data notes.txt --out runs/notes --steps 200
  megatrain compile model.onnx -o model.plan --shape input_ids=8x2048
  megatrain export --model models/llama --batch 8 --seq 2048 -o model.onnx
)";

// The commands that run another program with the arguments after the command name.
struct PassThrough {
  const char* command;
  const char* program;  // a sibling tool, or a Python script for export
  const char* help;
};
constexpr PassThrough kPassThrough[] = {
    {"compile", "megatrain-compile", "compile an ONNX model into a training plan (megatrain-compile)"},
    {"run", "megatrain-run", "train by executing a plan (megatrain-run)"},
    {"inspect", "megatrain-inspect", "print what a plan does (megatrain-inspect)"},
    {"profile", "megatrain-profile", "measure this machine's device profile (megatrain-profile; CUDA builds)"},
    {"export", "export_hf.py", "export a Hugging Face model to ONNX (frontends/python/export_hf.py; needs "
                               "python3 with torch and transformers)"},
};

[[noreturn]] void passThrough(const PassThrough& command, int argc, char** argv) {
  std::vector<std::string> args;
  if (std::string(command.command) == "export") {
    args = {requirePython({"torch", "transformers", "onnx"}), pythonScript(command.program)};
  } else {
    const std::string tool = siblingTool(command.program);
    if (tool.empty())
      throw Error(std::string("no ") + command.program + " beside this binary in " + binaryDir() +
                  (std::string(command.command) == "profile" ? " (it is built only with the CUDA backend)"
                                                             : " (build it: scripts/build.sh)"));
    args = {tool};
  }
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  std::fflush(stdout);
  execProgram(args);
}

int run(int argc, char** argv) {
  // The pass-through commands take their arguments as they are, --help included.
  if (argc >= 2)
    for (const PassThrough& command : kPassThrough)
      if (argv[1] == std::string(command.command)) passThrough(command, argc, argv);

  // `train` is an app of its own: its --config file holds its flags at the top level.
  if (argc >= 2 && argv[1] == std::string("train")) {
    CLI::App train;
    TrainOptions options;
    setupToolApp(train, "megatrain train", trainHelp());
    addTrainOptions(train, options);
    if (parseToolCommandLine(train, argc - 1, argv + 1)) return 0;  // --help or --version
    return runTrain(options);
  }

  CLI::App app;
  setupToolApp(app, "megatrain", {kUsage, kDescription, kFooter});
  app.require_subcommand(0, 1);
  app.add_subcommand("train", "train a Hugging Face model on text or token files, end to end (megatrain train --help)")
      ->group("Commands");
  for (const PassThrough& command : kPassThrough)
    app.add_subcommand(command.command, command.help)->group("Commands");
  if (parseToolCommandLine(app, argc, argv)) return 0;  // --help or --version
  throw Error("no command; give one of train, compile, run, inspect, profile, export (see --help)");
}

}  // namespace
}  // namespace megatrain::driver

int main(int argc, char** argv) {
  return megatrain::runTool("megatrain", [&] { return megatrain::driver::run(argc, argv); });
}
