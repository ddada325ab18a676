// RunExports.cpp - megatrain-run's outputs after training: --export-onnx, --export-safetensors, --export-hf, --dump-output.
#include "RunExports.h"

#include <cstdio>

#include "megatrain/plan/ByteSize.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/Format.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/Npy.h"
#include "megatrain/runtime/OnnxWeights.h"
#include "megatrain/runtime/OutputReadout.h"
#include "megatrain/runtime/Safetensors.h"
#include "megatrain/runtime/WeightSource.h"

namespace megatrain::runtime::tools {

void addRunExportOptions(CLI::App& app, RunExports& exports) {
  const std::string group = "After training";
  addValueOption(app, "--export-onnx", "OUT.onnx",
                 "write the --weights model with every trainable initializer replaced by its trained values",
                 group, [&exports](const std::string& v) { exports.onnx = v; });
  addValueOption(app, "--export-external-data", "auto|always|never",
                 "keep --export-onnx initializer data in OUT.onnx.data (auto: when the initializers "
                 "exceed 1 GiB; default auto)",
                 group, [&exports](const std::string& v) { exports.externalData = parseExternalData(v); });
  addValueOption(app, "--export-safetensors", "OUT.safetensors", "write every parameter as safetensors", group,
                 [&exports](const std::string& v) { exports.safetensors = v; });
  addValueOption(app, "--export-hf", "OUT_DIR",
                 "write a directory transformers loads: safetensors shards ({\"format\": \"pt\"}; an index "
                 "when more than one) under the Hugging Face names, plus the config, generation config and "
                 "tokenizer files of --hf-source",
                 group, [&exports](const std::string& v) { exports.hf.outDir = v; });
  addValueOption(app, "--hf-source", "HF_DIR",
                 "the Hugging Face model the run started from (default: --weights when it is a directory)",
                 group, [&exports](const std::string& v) { exports.hf.source = v; });
  addValueOption(app, "--export-dtype", "fp32|bf16|fp16", "dtype of --export-hf (default: --hf-source's, else fp32)",
                 group, [&exports](const std::string& v) { exports.hf.dtype = parseExportDType(v); });
  addValueOption(app, "--export-shard-size", "SIZE", "largest --export-hf shard (default 5GB)", group,
                 [&exports](const std::string& v) { exports.hf.shardBytes = parseSizeFlag(v, "--export-shard-size"); });
  repeatable(addValueOption(
      app, "--dump-output", "NAME=FILE.npy",
      "after the last step, write graph output NAME as that step's forward computed it (the plan "
      "must keep it: megatrain-compile --keep-output NAME; repeatable)",
      group, [&exports](const std::string& spec) {
        const size_t equals = spec.find('=');
        if (equals == std::string::npos || equals == 0 || equals + 1 == spec.size())
          throw Error("--dump-output needs NAME=FILE.npy, got '" + spec + "'");
        exports.dumps.emplace_back(spec.substr(0, equals), spec.substr(equals + 1));
      }));
}

namespace {

void checkDumps(const RunExports& exports, const plan::Plan& plan) {
  for (const auto& [name, file] : exports.dumps) {
    try {
      requireKeptOutput(plan, name);
    } catch (const Error& e) {
      throw Error("--dump-output " + name + ": " + e.what());
    }
  }
}

}  // namespace

void checkRunExports(RunExports& exports, const plan::Plan& plan, const std::string& weights) {
  checkDumps(exports, plan);
  if (!exports.onnx.empty() && (weights.empty() || weightFormat(weights) != WeightFormat::Onnx))
    throw Error("--export-onnx needs --weights MODEL.onnx: the exported model is a copy of it (for a Hugging Face "
                "checkpoint, use --export-hf DIR)");
  HfExportOptions& hf = exports.hf;
  if (hf.outDir.empty()) {
    const char* orphan = !hf.source.empty()                   ? "--hf-source"
                         : !hf.dtype.empty()                  ? "--export-dtype"
                         : hf.shardBytes != kDefaultShardBytes ? "--export-shard-size"
                                                               : nullptr;
    if (orphan) throw Error(std::string(orphan) + " needs --export-hf OUT_DIR");
    return;
  }
  if (hf.source.empty() && !weights.empty() && weightFormat(weights) == WeightFormat::SafetensorsDirectory)
    hf.source = weights;
  if (!hf.source.empty() && weightFormat(hf.source) != WeightFormat::SafetensorsDirectory)
    throw Error("--hf-source " + hf.source + " is not a directory (give the Hugging Face model directory "
                "whose config and tokenizer files --export-hf copies)");
}

void writeRunExports(const RunExports& exports, const Executor& executor, const std::string& weights) {
  for (const auto& [name, file] : exports.dumps) {
    writeNpy(file, readOutput(executor, name));
    std::printf("output    %s -> %s\n", name.c_str(), file.c_str());
  }
  if (!exports.hf.outDir.empty()) {
    HfExportOptions options = exports.hf;
    options.metadata = {{"generator", "megatrain-run"},
                        {"optimizer_steps", std::to_string(executor.optimizerStep())}};
    const HfExportResult result = exportHf(executor, options);
    for (const std::string& note : result.notes) std::printf("%s\n", note.c_str());
    std::printf("exported  %s (%zu tensors, %s as %s, %zu files%s)\n", exports.hf.outDir.c_str(), result.tensors,
                formatBytes(result.bytes).c_str(), result.dtype.c_str(), result.files.size(),
                options.source.empty() ? "; no --hf-source: no config or tokenizer" : "");
  }
  if (exports.onnx.empty() && exports.safetensors.empty()) {
    std::fflush(stdout);
    return;
  }

  const std::vector<ParameterValues> parameters = readParameters(executor);
  if (!exports.onnx.empty()) {
    const OnnxExportResult result =
        exportOnnx(OnnxWeights(weights), parameters, exports.onnx, exports.externalData);
    const std::string where = result.dataPath.empty() ? "data inline" : "data in " + result.dataPath;
    std::printf("exported  %s (%zu trained initializers replaced; %s)\n", exports.onnx.c_str(),
                result.replaced, where.c_str());
  }
  if (!exports.safetensors.empty()) {
    writeSafetensors(exports.safetensors, parameters,
                     // transformers 4.x loads a file only with "format": "pt".
                     {{"format", "pt"},
                      {"source_model", weights},
                      {"generator", "megatrain-run"},
                      {"optimizer_steps", std::to_string(executor.optimizerStep())}});
    uint64_t bytes = 0;
    for (const ParameterValues& values : parameters) bytes += values.bytes.size();
    std::printf("exported  %s (%zu parameters, %s)\n", exports.safetensors.c_str(), parameters.size(),
                formatBytes(bytes).c_str());
  }
  std::fflush(stdout);
}

}  // namespace megatrain::runtime::tools
