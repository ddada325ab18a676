// HfExport.h - writes trained parameters as a Hugging Face model directory (safetensors shards, index, config, tokenizer).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "megatrain/runtime/ModelExport.h"

namespace megatrain::runtime {

class Executor;

// transformers' default max_shard_size ("5GB", powers of 1000).
inline constexpr uint64_t kDefaultShardBytes = 5'000'000'000;

struct HfExportOptions {
  std::string outDir;
  // The checkpoint the run started from (--hf-source): its tensor names and
  // dtype, and the files copied beside the weights. Empty: none.
  std::string source;
  // "fp32", "bf16", "fp16", or empty: the source's dtype (all its floating
  // tensors BF16: bf16; all F16: fp16; else fp32), fp32 without a source.
  std::string dtype;
  uint64_t shardBytes = kDefaultShardBytes;
  std::map<std::string, std::string> metadata;  // besides {"format": "pt"}
};

struct HfExportResult {
  std::vector<std::string> files;   // every file written, in order
  std::string dtype;                // "fp32", "bf16" or "fp16"
  size_t tensors = 0;
  uint64_t bytes = 0;               // tensor data written
  std::vector<std::string> notes;   // a tie applied, source tensors the plan lacks, ...
};

// "fp32" | "bf16" | "fp16"; Error naming --export-dtype otherwise.
std::string parseExportDType(const std::string& text);

// The files copied from a source directory when present: the model's config,
// generation config and every tokenizer file transformers writes.
const std::vector<std::string>& hfSourceFiles();

// Writes `parameters` (name, shape and master dtype; `bytes` may be empty,
// `fetch(i)` then gives parameter i's master bytes, one at a time, so a model
// never needs a second copy in memory) into options.outDir:
// - model.safetensors, or model-00001-of-0000N.safetensors shards of at most
//   shardBytes each (a larger tensor gets a shard of its own) with
//   model.safetensors.index.json ({"metadata": {"total_size"}, "weight_map"});
//   every shard's metadata has {"format": "pt"};
// - tensors under the source's names: a parameter the source stores once as
//   its tie partner (lm_head.weight as model.embed_tokens.weight, config.json
//   tie_word_embeddings) is written once, under the stored name;
// - with a source, its hfSourceFiles() copied, config.json's "dtype" /
//   "torch_dtype" set to the exported dtype.
// Earlier model*.safetensors shards and index left in outDir by another
// export are removed, so transformers sees one model. Files are written
// atomically. Error (one line) naming the file or parameter at fault.
using FetchParameter = std::function<std::vector<std::byte>(size_t index)>;
HfExportResult exportHf(const std::vector<ParameterValues>& parameters, const FetchParameter& fetch,
                        const HfExportOptions& options);

// The executor's PARAMETER masters, fetched one at a time.
HfExportResult exportHf(const Executor& executor, const HfExportOptions& options);

}  // namespace megatrain::runtime
