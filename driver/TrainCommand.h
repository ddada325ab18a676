// TrainCommand.h - `megatrain train`: from a Hugging Face model directory and text or token files to a trained model directory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "megatrain/plan/ToolCli.h"

namespace megatrain::driver {

// Every flag of `megatrain train`; a flag left out keeps the tool's own default
// (text empty), except those the command resolves itself (batch, seq, steps).
struct TrainOptions {
  std::string model;                    // --model HF_DIR
  std::vector<std::string> data;        // --data: text files, or token files (.bin)
  std::string out;                      // -o/--out RUN_DIR
  std::optional<int64_t> steps;         // exactly one of --steps,
  std::optional<uint64_t> tokens;       //   --tokens
  std::optional<double> epochs;         //   and --epochs
  int64_t batch = 0;                    // --batch (default 1)
  int64_t seq = 0;                      // --seq (default: the model's context, at most 2048)
  std::vector<std::string> evalData;    // --eval-data
  int64_t evalEvery = 0;                // --eval-every
  bool noResume = false;                // --no-resume
  std::string python;                   // --python
  // Handed to megatrain-compile as they are (checked there, or here where cheap).
  std::vector<std::pair<std::string, std::string>> compileFlags;
  // Handed to megatrain-run as they are.
  std::vector<std::pair<std::string, std::string>> runFlags;
  // The same flags, kept for the resolved configuration (config.toml).
  std::vector<std::pair<std::string, std::string>> passedFlags;
};

// What `megatrain train --help` shows besides the flags.
ToolHelp trainHelp();

// Adds the flags of `megatrain train` to `app` (an app of its own, set up by
// setupToolApp, so that --config reads them at the top level of the TOML file).
void addTrainOptions(CLI::App& app, TrainOptions& options);

// Runs the stages; returns the exit status (megatrain-run's on a stopped run).
int runTrain(TrainOptions& options);

}  // namespace megatrain::driver
