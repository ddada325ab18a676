// SafetensorsReader.h - reads Hugging Face safetensors checkpoints (one file, or a directory of shards) as parameter values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "megatrain/runtime/WeightSource.h"

namespace megatrain::runtime {

// One tensor of a safetensors header.
struct SafetensorsTensor {
  std::string dtype;            // as written: "F32", "BF16", "I64", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // data_offsets, relative to the end of the header
  size_t file = 0;              // index into the reader's files
};

// Bytes per element of a safetensors dtype name; 0 for a name this reader
// does not know.
size_t safetensorsDTypeSize(const std::string& dtype);

// The checkpoint at PATH, opened and checked, its data mapped read-only:
// - a .safetensors file;
// - a directory holding model.safetensors.index.json (its weight_map names
//   the shard of every tensor) or else model.safetensors.
// Every header is checked when opened: an 8-byte little-endian length within
// the file (and at most 100 MB), a JSON object of tensors, each with a dtype,
// a shape of non-negative integers and data_offsets [begin, end] with
// end - begin = elements x dtype size, within the file's data, no two
// overlapping; "__metadata__" (string values) is kept. An index must name
// shards that exist inside the directory and hold the tensors it maps to
// them. Errors name the file and the tensor.
//
// Tensors convert from F32, BF16, F16 and F64 to f32 or f64 masters (other
// dtypes are an Error when read). Plan parameters match stored tensors by
// name, except one tie: an output embedding the checkpoint stores once under
// its input embedding's name (lm_head.weight stored as
// model.embed_tokens.weight) resolves to it when config.json beside the
// checkpoint says tie_word_embeddings (true, or absent: transformers'
// default), and the reverse. notes() then says so.
//
// Reads are conversions straight out of the mapping: no per-element calls,
// no copy of a whole file. Not thread-safe.
class SafetensorsWeights : public WeightSource {
 public:
  explicit SafetensorsWeights(const std::string& path);
  ~SafetensorsWeights() override;
  SafetensorsWeights(const SafetensorsWeights&) = delete;
  SafetensorsWeights& operator=(const SafetensorsWeights&) = delete;

  const std::string& path() const override { return path_; }
  void read(const std::string& name, plan::DType dtype, const std::vector<int64_t>& shape, void* out,
            size_t outBytes) const override;
  std::vector<std::string> notes() const override { return notes_; }

  // The stored tensors, by name (as the files hold them, ties not resolved).
  const std::map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }
  // The files opened: the one file, or each shard in index order.
  std::vector<std::string> files() const;
  // The first file's __metadata__.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // config.json's tie_word_embeddings beside the checkpoint; nullopt without a config.json.
  std::optional<bool> tiedEmbeddings() const { return tied_; }

  // The stored name `name` reads from: itself, or its tie partner (see
  // above). Error naming the parameter, the nearest stored names and, for an
  // embedding, why the tie did not apply.
  std::string resolve(const std::string& name) const;

 private:
  struct File;
  void openFile(const std::string& path);
  void readIndex(const std::string& directory, const std::string& indexPath);
  void readConfig(const std::string& directory);

  std::string path_;
  std::vector<std::unique_ptr<File>> files_;
  std::map<std::string, SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
  std::optional<bool> tied_;
  std::string configPath_;
  mutable std::vector<std::string> notes_;
};

// The tie partner of an embedding name among `stored` names: for an output
// embedding (lm_head.weight, embed_out.weight) the one stored input
// embedding (a name ending in embed_tokens.weight, wte.weight or
// embed_in.weight), and the reverse; empty when there is none or more than one.
std::string tiedEmbeddingPartner(const std::string& name, const std::vector<std::string>& stored);

}  // namespace megatrain::runtime
