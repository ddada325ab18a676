// RunExports.h - megatrain-run's outputs after training: --export-onnx, --export-safetensors, --dump-output.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "megatrain/plan/ToolCli.h"
#include "megatrain/plan/plan.pb.h"
#include "megatrain/runtime/ModelExport.h"

namespace megatrain::runtime {
class Executor;
}

namespace megatrain::runtime::tools {

// What to write once the last step has run.
struct RunExports {
  std::string onnx;                                        // --export-onnx
  ExternalData externalData = ExternalData::Auto;          // --export-external-data
  std::string safetensors;                                 // --export-safetensors
  std::vector<std::pair<std::string, std::string>> dumps;  // --dump-output NAME=FILE.npy
};

// Adds the flags above to megatrain-run's command line (group "After training").
void addRunExportOptions(CLI::App& app, RunExports& exports);

// Before training: every --dump-output names an output the plan keeps, and
// --export-onnx has a --weights model to copy.
void checkRunExports(const RunExports& exports, const plan::Plan& plan, const std::string& weights);

// After the last step: writes each file and prints one line per file.
// `weights` is the --weights model, the template of --export-onnx.
void writeRunExports(const RunExports& exports, const Executor& executor, const std::string& weights);

}  // namespace megatrain::runtime::tools
