// HfExport.cpp - writes trained parameters as a Hugging Face model directory (safetensors shards, index, config, tokenizer).
#include "megatrain/runtime/HfExport.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <sstream>

#include "megatrain/plan/AtomicFile.h"
#include "megatrain/plan/Bf16.h"
#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/F16.h"
#include "megatrain/plan/Json.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/Safetensors.h"
#include "megatrain/runtime/SafetensorsReader.h"

namespace megatrain::runtime {

namespace fs = std::filesystem;

namespace {

struct Planned {
  size_t index;           // into the parameters
  std::string name;       // as written
  uint64_t elements = 0;
};

std::string storedDType(const std::string& dtype) {
  return dtype == "bf16" ? "BF16" : dtype == "fp16" ? "F16" : "F32";
}

size_t exportElementBytes(const std::string& dtype) { return dtype == "fp32" ? 4 : 2; }

// The source's dtype as --export-dtype names it.
std::string sourceDType(const SafetensorsWeights& source) {
  std::set<std::string> floating;
  for (const auto& [name, tensor] : source.tensors())
    if (tensor.dtype == "F32" || tensor.dtype == "BF16" || tensor.dtype == "F16" || tensor.dtype == "F64")
      floating.insert(tensor.dtype);
  if (floating.size() == 1 && *floating.begin() == "BF16") return "bf16";
  if (floating.size() == 1 && *floating.begin() == "F16") return "fp16";
  return "fp32";
}

// The master's bytes (f32 or f64) in the exported dtype.
std::vector<unsigned char> convert(const std::vector<std::byte>& master, plan::DType masterType, uint64_t elements,
                                   const std::string& dtype, const std::string& name) {
  if (masterType != plan::F32 && masterType != plan::F64)
    throw Error("--export-hf: parameter '" + name + "' is " + dtypeName(masterType) + ", expected an f32 or f64 master");
  if (master.size() != elements * dtypeSize(masterType))
    throw Error("--export-hf: parameter '" + name + "' has " + std::to_string(master.size()) + " bytes, expected " +
                std::to_string(elements * dtypeSize(masterType)));
  auto value = [&](uint64_t i) {
    if (masterType == plan::F32) {
      float v;
      std::memcpy(&v, master.data() + 4 * i, 4);
      return v;
    }
    double v;
    std::memcpy(&v, master.data() + 8 * i, 8);
    return static_cast<float>(v);
  };
  std::vector<unsigned char> out(elements * exportElementBytes(dtype));
  if (dtype == "fp32" && masterType == plan::F32) {
    if (!master.empty()) std::memcpy(out.data(), master.data(), master.size());
  } else if (dtype == "fp32") {
    for (uint64_t i = 0; i < elements; ++i) {
      const float v = value(i);
      std::memcpy(out.data() + 4 * i, &v, 4);
    }
  } else {
    const bool bf16 = dtype == "bf16";
    for (uint64_t i = 0; i < elements; ++i) {
      const uint16_t bits = bf16 ? floatToBf16(value(i)) : floatToF16(value(i));
      std::memcpy(out.data() + 2 * i, &bits, 2);
    }
  }
  return out;
}

std::string readText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// config.json with its dtype fields set to what was written (key order kept).
std::string rewriteConfig(const std::string& path, const std::string& dtype) {
  const std::string text = readText(path);
  (void)parseJson(text, path);  // a clear error for a broken file before the unchecked parse below
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(text);
  if (!config.is_object()) throw Error(path + ": not a JSON object");
  const char* torchName = dtype == "bf16" ? "bfloat16" : dtype == "fp16" ? "float16" : "float32";
  for (const char* key : {"dtype", "torch_dtype"})
    if (config.contains(key)) config[key] = torchName;
  return config.dump(2) + "\n";
}

}  // namespace

std::string parseExportDType(const std::string& text) {
  if (text == "fp32" || text == "bf16" || text == "fp16") return text;
  throw Error("--export-dtype needs fp32, bf16 or fp16, got '" + text + "'");
}

const std::vector<std::string>& hfSourceFiles() {
  static const std::vector<std::string> kFiles = {
      "config.json",       "generation_config.json", "tokenizer.json", "tokenizer_config.json",
      "special_tokens_map.json", "added_tokens.json", "tokenizer.model", "vocab.json",
      "merges.txt",        "chat_template.jinja",    "chat_template.json"};
  return kFiles;
}

HfExportResult exportHf(const std::vector<ParameterValues>& parameters, const FetchParameter& fetch,
                        const HfExportOptions& options) {
  if (options.outDir.empty()) throw Error("--export-hf needs an output directory");
  if (options.shardBytes == 0) throw Error("--export-shard-size must be at least one byte");
  std::unique_ptr<SafetensorsWeights> source;
  if (!options.source.empty()) {
    if (!fs::is_directory(options.source))
      throw Error("--hf-source " + options.source + " is not a directory (give the Hugging Face model directory)");
    source = std::make_unique<SafetensorsWeights>(options.source);
  }
  HfExportResult result;
  result.dtype = !options.dtype.empty() ? parseExportDType(options.dtype) : source ? sourceDType(*source) : "fp32";

  // Names: the source's, a tied parameter under the name the source stores it as.
  std::set<std::string> planNames;
  for (const ParameterValues& p : parameters) planNames.insert(p.name);
  std::vector<std::string> stored;
  if (source)
    for (const auto& entry : source->tensors()) stored.push_back(entry.first);
  std::vector<Planned> planned;
  std::set<std::string> written;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const ParameterValues& p = parameters[i];
    std::string name = p.name;
    if (source && !source->tensors().count(name) && source->tiedEmbeddings().value_or(false)) {
      const std::string partner = tiedEmbeddingPartner(name, stored);
      if (!partner.empty() && !planNames.count(partner)) {
        result.notes.push_back("tied      " + p.name + " written as " + partner + " (the source stores it once)");
        name = partner;
      }
    }
    if (!written.insert(name).second)
      throw Error("--export-hf: two parameters would be written as '" + name + "'");
    uint64_t elements = 1;
    for (int64_t dim : p.shape) elements *= static_cast<uint64_t>(dim);
    planned.push_back({i, name, elements});
  }
  if (source) {
    std::string missing;
    size_t count = 0;
    for (const std::string& name : stored)
      if (!written.count(name) && count++ < 3) missing += (missing.empty() ? "" : ", ") + name;
    if (count)
      result.notes.push_back("note      " + std::to_string(count) + " tensors of " + options.source +
                             " are not parameters of the plan and are not written (" + missing +
                             (count > 3 ? ", ..." : "") + ")");
  }
  std::sort(planned.begin(), planned.end(), [](const Planned& a, const Planned& b) { return a.name < b.name; });

  // Shards: in name order, each up to shardBytes of data (a bigger tensor alone).
  const size_t elementBytes = exportElementBytes(result.dtype);
  std::vector<std::vector<const Planned*>> shards(1);
  uint64_t shardFill = 0;
  for (const Planned& p : planned) {
    const uint64_t bytes = p.elements * elementBytes;
    if (!shards.back().empty() && shardFill + bytes > options.shardBytes) {
      shards.emplace_back();
      shardFill = 0;
    }
    shards.back().push_back(&p);
    shardFill += bytes;
  }

  std::error_code error;
  fs::create_directories(options.outDir, error);
  if (error) throw Error("--export-hf " + options.outDir + ": cannot create the directory: " + error.message());

  std::map<std::string, std::string> metadata = options.metadata;
  metadata["format"] = "pt";  // transformers 4.x loads a file only with this
  nlohmann::ordered_json weightMap = nlohmann::ordered_json::object();
  std::set<std::string> shardNames;
  for (size_t s = 0; s < shards.size(); ++s) {
    char name[64];
    if (shards.size() == 1) std::snprintf(name, sizeof name, "model.safetensors");
    else std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
    const std::string path = (fs::path(options.outDir) / name).string();
    std::vector<SafetensorsEntry> entries;
    for (const Planned* p : shards[s]) {
      entries.push_back({p->name, storedDType(result.dtype), parameters[p->index].shape, p->elements * elementBytes});
      weightMap[p->name] = name;
    }
    const std::string header = safetensorsHeader(entries, metadata);
    unsigned char length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(static_cast<uint64_t>(header.size()) >> (8 * i));
    AtomicFile file(path);
    file.write(length, sizeof length);
    file.write(header.data(), header.size());
    for (const Planned* p : shards[s]) {
      const ParameterValues& parameter = parameters[p->index];
      const std::vector<unsigned char> bytes =
          convert(parameter.bytes.empty() && p->elements ? fetch(p->index) : parameter.bytes, parameter.dtype,
                  p->elements, result.dtype, parameter.name);
      file.write(bytes.data(), bytes.size());
      result.bytes += bytes.size();
    }
    file.commit();
    result.files.push_back(path);
    shardNames.insert(name);
  }
  result.tensors = planned.size();

  if (shards.size() > 1) {
    nlohmann::ordered_json index;
    index["metadata"]["total_size"] = result.bytes;
    index["weight_map"] = weightMap;
    const std::string path = (fs::path(options.outDir) / "model.safetensors.index.json").string();
    writeFileAtomically(path, index.dump(2) + "\n");
    result.files.push_back(path);
    shardNames.insert("model.safetensors.index.json");
  }

  // What an earlier export left: another shard count, or an index beside one file.
  static const std::regex kModelFile(R"(model(-\d{5}-of-\d{5})?\.safetensors(\.index\.json)?)");
  for (const auto& entry : fs::directory_iterator(options.outDir, error)) {
    const std::string file = entry.path().filename().string();
    if (std::regex_match(file, kModelFile) && !shardNames.count(file)) {
      fs::remove(entry.path(), error);
      result.notes.push_back("removed   " + entry.path().string() + " (left by an earlier export)");
    }
  }

  if (source) {
    for (const std::string& file : hfSourceFiles()) {
      const fs::path from = fs::path(options.source) / file;
      if (!fs::is_regular_file(from, error)) continue;
      const std::string to = (fs::path(options.outDir) / file).string();
      writeFileAtomically(to, file == "config.json" ? rewriteConfig(from.string(), result.dtype) : readText(from.string()));
      result.files.push_back(to);
    }
    if (!fs::exists(fs::path(options.source) / "config.json", error))
      result.notes.push_back("note      " + options.source + " has no config.json: transformers needs one to load " +
                             options.outDir);
  }
  return result;
}

HfExportResult exportHf(const Executor& executor, const HfExportOptions& options) {
  std::vector<ParameterValues> parameters;
  std::vector<std::string> tensorNames;
  for (const plan::Tensor& tensor : executor.plan().tensors()) {
    if (tensor.role() != plan::PARAMETER) continue;
    ParameterValues values;
    values.name = tensor.source();
    values.shape.assign(tensor.shape().begin(), tensor.shape().end());
    values.dtype = tensor.dtype();
    values.trainable = tensor.trainable();
    parameters.push_back(std::move(values));
    tensorNames.push_back(tensor.name());
  }
  return exportHf(parameters, [&](size_t i) { return executor.readBytes(tensorNames[i]); }, options);
}

}  // namespace megatrain::runtime
