// RunExports.h - megatrain-run's outputs after training: --export-onnx, --export-safetensors, --export-hf, --dump-output.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "megatrain/plan/ToolCli.h"
#include "megatrain/plan/plan.pb.h"
#include "megatrain/runtime/HfExport.h"
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
  HfExportOptions hf;                                      // --export-hf DIR, --hf-source, --export-dtype,
                                                           // --export-shard-size
  std::vector<std::pair<std::string, std::string>> dumps;  // --dump-output NAME=FILE.npy
};

// Adds the flags above to megatrain-run's command line (group "After training").
void addRunExportOptions(CLI::App& app, RunExports& exports);

// Before training: every --dump-output names an output the plan keeps,
// --export-onnx has an ONNX --weights model to copy, the --export-hf flags
// go together and --hf-source is a directory. Without --hf-source, an
// --export-hf run whose --weights is a directory takes it as the source.
void checkRunExports(RunExports& exports, const plan::Plan& plan, const std::string& weights);

// After the last step: writes each file and prints one line per file.
// `weights` is the --weights model, the template of --export-onnx.
void writeRunExports(const RunExports& exports, const Executor& executor, const std::string& weights);

}  // namespace megatrain::runtime::tools
