// SafetensorsReader.cpp - reads Hugging Face safetensors checkpoints (one file, or a directory of shards) as parameter values.
//
// Opening a checkpoint:
//   1. The path: a directory's model.safetensors.index.json, else its
//      model.safetensors; or the file itself.
//   2. Each file is mapped read-only and its header checked in full (length,
//      JSON, every entry's dtype, shape and offsets, overlaps), so a read
//      never leaves the mapping: a file that is short or lies is refused here,
//      by name, before any pool is filled.
//   3. An index's weight_map is checked against the shards' headers.
//   4. config.json beside it gives tie_word_embeddings.
// Reading a tensor converts from the mapping into the caller's buffer in one
// typed loop per dtype, split over the host threads, so a load runs at the
// speed the page cache or the disk delivers.
#include "megatrain/runtime/SafetensorsReader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "megatrain/plan/Bf16.h"
#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/F16.h"
#include "megatrain/plan/Json.h"
#include "megatrain/runtime/HostThreads.h"

namespace megatrain::runtime {

namespace fs = std::filesystem;

// safetensors' own reader refuses larger headers; so does this one, before
// reading a byte of it.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct SafetensorsWeights::File {
  std::string path;
  int fd = -1;
  const unsigned char* map = nullptr;
  uint64_t size = 0;
  uint64_t dataStart = 0;  // 8 + header length

  ~File() {
    if (map) munmap(const_cast<unsigned char*>(map), size);
    if (fd >= 0) close(fd);
  }
};

namespace {

std::string joinShape(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// A stored name as messages print it: control bytes escaped, one line.
std::string printableName(const std::string& name) {
  std::string out;
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\x%02x", c);
      out += escape;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string readSmallFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open " + what);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A JSON number that is a non-negative integer, as uint64.
bool asIndex(const nlohmann::json& value, uint64_t& out) {
  if (value.is_number_unsigned()) {
    out = value.get<uint64_t>();
    return true;
  }
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    out = static_cast<uint64_t>(value.get<int64_t>());
    return true;
  }
  return false;
}

template <typename From, typename To, typename Convert>
void convertAll(const unsigned char* src, To* dst, size_t count, Convert convert) {
  for (size_t i = 0; i < count; ++i) {
    From value;
    std::memcpy(&value, src + i * sizeof(From), sizeof(From));
    dst[i] = static_cast<To>(convert(value));
  }
}

template <typename To>
void convertTo(const std::string& dtype, const unsigned char* src, To* dst, size_t count) {
  if (dtype == "F32") convertAll<float>(src, dst, count, [](float v) { return v; });
  else if (dtype == "BF16") convertAll<uint16_t>(src, dst, count, [](uint16_t v) { return bf16ToFloat(v); });
  else if (dtype == "F16") convertAll<uint16_t>(src, dst, count, [](uint16_t v) { return f16ToFloat(v); });
  else convertAll<double>(src, dst, count, [](double v) { return v; });  // F64
}

bool isOutputEmbedding(const std::string& name) { return name == "lm_head.weight" || name == "embed_out.weight"; }

bool isInputEmbedding(const std::string& name) {
  auto endsWith = [&](const std::string& suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
           (name.size() == suffix.size() || name[name.size() - suffix.size() - 1] == '.');
  };
  return endsWith("embed_tokens.weight") || endsWith("wte.weight") || endsWith("embed_in.weight");
}

}  // namespace

size_t safetensorsDTypeSize(const std::string& dtype) {
  static const std::map<std::string, size_t> kSizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},  {"I8", 1},
      {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1},   {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  auto it = kSizes.find(dtype);
  return it == kSizes.end() ? 0 : it->second;
}

std::string tiedEmbeddingPartner(const std::string& name, const std::vector<std::string>& stored) {
  std::vector<std::string> found;
  if (isOutputEmbedding(name)) {
    for (const std::string& candidate : stored)
      if (isInputEmbedding(candidate)) found.push_back(candidate);
  } else if (isInputEmbedding(name)) {
    for (const std::string& candidate : stored)
      if (isOutputEmbedding(candidate)) found.push_back(candidate);
  }
  return found.size() == 1 ? found.front() : std::string();
}

SafetensorsWeights::SafetensorsWeights(const std::string& path) : path_(path) {
  std::error_code error;
  if (fs::is_directory(path, error)) {
    const std::string index = (fs::path(path) / "model.safetensors.index.json").string();
    const std::string single = (fs::path(path) / "model.safetensors").string();
    if (fs::exists(index, error)) {
      readIndex(path, index);
    } else if (fs::exists(single, error)) {
      openFile(single);
    } else {
      std::string others;
      for (const auto& entry : fs::directory_iterator(path, error))
        if (entry.path().extension() == ".safetensors")
          others += (others.empty() ? "" : ", ") + entry.path().filename().string();
      throw Error(path + ": holds neither model.safetensors nor model.safetensors.index.json" +
                  (others.empty() ? std::string(" (no .safetensors file at all)")
                                  : " (it has " + others + "; give --weights one of those files)"));
    }
    readConfig(path);
  } else {
    if (!fs::exists(path, error)) throw Error(path + ": no such file or directory");
    openFile(path);
    readConfig(fs::path(path).parent_path().empty() ? "." : fs::path(path).parent_path().string());
  }
}

SafetensorsWeights::~SafetensorsWeights() = default;

std::vector<std::string> SafetensorsWeights::files() const {
  std::vector<std::string> paths;
  for (const auto& file : files_) paths.push_back(file->path);
  return paths;
}

void SafetensorsWeights::openFile(const std::string& path) {
  auto file = std::make_unique<File>();
  file->path = path;
  file->fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file->fd < 0) throw Error(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat info {};
  if (fstat(file->fd, &info) != 0 || !S_ISREG(info.st_mode)) throw Error(path + ": not a regular file");
  file->size = static_cast<uint64_t>(info.st_size);
  if (file->size < 8)
    throw Error(path + ": truncated safetensors file: " + std::to_string(file->size) +
                " bytes, shorter than the 8-byte header length");
  void* map = mmap(nullptr, file->size, PROT_READ, MAP_PRIVATE, file->fd, 0);
  if (map == MAP_FAILED) throw Error(path + ": cannot map (" + std::strerror(errno) + ")");
  file->map = static_cast<const unsigned char*>(map);

  uint64_t headerBytes = 0;
  for (int i = 0; i < 8; ++i) headerBytes |= static_cast<uint64_t>(file->map[i]) << (8 * i);
  if (headerBytes > kMaxHeaderBytes)
    throw Error(path + ": corrupt safetensors header: its length " + std::to_string(headerBytes) +
                " is above the 100 MB limit (not a safetensors file?)");
  if (headerBytes > file->size - 8)
    throw Error(path + ": truncated safetensors file: the header claims " + std::to_string(headerBytes) +
                " bytes, the file holds " + std::to_string(file->size - 8) + " after the length");
  file->dataStart = 8 + headerBytes;
  const uint64_t dataBytes = file->size - file->dataStart;
  const std::string text(reinterpret_cast<const char*>(file->map + 8), headerBytes);
  const nlohmann::json header = parseJson(text, path + ": safetensors header");
  if (!header.is_object()) throw Error(path + ": corrupt safetensors header: not a JSON object");

  const size_t fileIndex = files_.size();
  const bool first = files_.empty();
  std::vector<std::pair<const std::string*, const SafetensorsTensor*>> placed;
  std::map<std::string, SafetensorsTensor> local;
  for (const auto& [name, entry] : header.items()) {
    const std::string what = path + ": tensor '" + printableName(name) + "'";
    if (name == "__metadata__") {
      if (!entry.is_object()) throw Error(path + ": corrupt safetensors header: __metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string())
          throw Error(path + ": corrupt safetensors header: __metadata__ '" + printableName(key) +
                      "' is not a string");
        if (first) metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    if (!entry.is_object()) throw Error(what + ": header entry is not an object");
    const auto dtype = entry.find("dtype");
    const auto shape = entry.find("shape");
    const auto offsets = entry.find("data_offsets");
    if (dtype == entry.end() || !dtype->is_string()) throw Error(what + ": header entry has no dtype string");
    if (shape == entry.end() || !shape->is_array()) throw Error(what + ": header entry has no shape array");
    if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2)
      throw Error(what + ": header entry has no data_offsets [begin, end]");
    SafetensorsTensor tensor;
    tensor.dtype = dtype->get<std::string>();
    tensor.file = fileIndex;
    uint64_t elements = 1;
    bool overflow = false;
    for (const nlohmann::json& dim : *shape) {
      uint64_t value = 0;
      if (!asIndex(dim, value) || value > static_cast<uint64_t>(INT64_MAX))
        throw Error(what + ": shape " + jsonForMessage(*shape) + " has a dimension that is not a non-negative integer");
      tensor.shape.push_back(static_cast<int64_t>(value));
      overflow = overflow || __builtin_mul_overflow(elements, value, &elements);
    }
    if (!asIndex((*offsets)[0], tensor.begin) || !asIndex((*offsets)[1], tensor.end))
      throw Error(what + ": data_offsets " + jsonForMessage(*offsets) + " are not non-negative integers");
    if (tensor.end < tensor.begin)
      throw Error(what + ": data_offsets [" + std::to_string(tensor.begin) + ", " + std::to_string(tensor.end) +
                  "] end before they begin");
    if (tensor.end > dataBytes)
      throw Error(what + ": data_offsets [" + std::to_string(tensor.begin) + ", " + std::to_string(tensor.end) +
                  "] are out of range: the file holds " + std::to_string(dataBytes) +
                  " bytes of data (truncated file?)");
    const size_t elementBytes = safetensorsDTypeSize(tensor.dtype);
    uint64_t expected = 0;
    if (elementBytes && (overflow || __builtin_mul_overflow(elements, elementBytes, &expected) ||
                         expected != tensor.end - tensor.begin))
      throw Error(what + ": " + tensor.dtype + " shape " + joinShape(tensor.shape) + " needs " +
                  (overflow ? std::string("more than 2^64") : std::to_string(expected)) + " bytes, data_offsets [" +
                  std::to_string(tensor.begin) + ", " + std::to_string(tensor.end) + "] hold " +
                  std::to_string(tensor.end - tensor.begin));
    local.emplace(name, std::move(tensor));
  }
  // No two tensors share a byte (empty ones may sit anywhere).
  for (const auto& [name, tensor] : local)
    if (tensor.end > tensor.begin) placed.emplace_back(&name, &tensor);
  std::sort(placed.begin(), placed.end(), [](const auto& a, const auto& b) { return a.second->begin < b.second->begin; });
  for (size_t i = 1; i < placed.size(); ++i)
    if (placed[i].second->begin < placed[i - 1].second->end)
      throw Error(path + ": tensors '" + printableName(*placed[i - 1].first) + "' [" +
                  std::to_string(placed[i - 1].second->begin) + ", " + std::to_string(placed[i - 1].second->end) +
                  ") and '" + printableName(*placed[i].first) + "' [" + std::to_string(placed[i].second->begin) +
                  ", " + std::to_string(placed[i].second->end) + ") overlap");
  for (auto& [name, tensor] : local) {
    auto [it, added] = tensors_.emplace(name, tensor);
    if (!added)
      throw Error(path + ": tensor '" + printableName(name) + "' is also stored in " + files_[it->second.file]->path);
  }
  files_.push_back(std::move(file));
}

void SafetensorsWeights::readIndex(const std::string& directory, const std::string& indexPath) {
  const nlohmann::json index = parseJson(readSmallFile(indexPath, "the shard index"), indexPath);
  const auto map = index.is_object() ? index.find("weight_map") : index.end();
  if (map == index.end() || !map->is_object() || map->empty())
    throw Error(indexPath + ": no weight_map object naming each tensor's shard");
  // Shards in order of first mention; each tensor's shard remembered for the check below.
  std::vector<std::string> shards;
  std::map<std::string, std::string> shardOf;
  for (const auto& [name, shard] : map->items()) {
    if (!shard.is_string())
      throw Error(indexPath + ": weight_map entry '" + printableName(name) + "' is not a file name");
    const std::string file = shard.get<std::string>();
    const fs::path relative(file);
    bool inside = !file.empty() && !relative.is_absolute();
    for (const fs::path& part : relative) inside = inside && part != "..";
    if (!inside)
      throw Error(indexPath + ": shard '" + printableName(file) + "' (of tensor '" + printableName(name) +
                  "') is not a file name inside " + directory);
    if (std::find(shards.begin(), shards.end(), file) == shards.end()) shards.push_back(file);
    shardOf[name] = file;
  }
  std::error_code error;
  for (const std::string& shard : shards) {
    const std::string shardPath = (fs::path(directory) / shard).string();
    if (!fs::exists(shardPath, error)) {
      size_t count = 0;
      std::string example;
      for (const auto& [name, file] : shardOf)
        if (file == shard && count++ == 0) example = name;
      throw Error(indexPath + " names shard " + shard + " (" + std::to_string(count) + " tensors, e.g. '" +
                  printableName(example) + "'), but " + shardPath + " is missing");
    }
    openFile(shardPath);
  }
  for (const auto& [name, shard] : shardOf) {
    auto it = tensors_.find(name);
    const std::string& actual = it == tensors_.end() ? std::string() : files_[it->second.file]->path;
    if (it == tensors_.end() || fs::path(actual).filename() != fs::path(shard).filename())
      throw Error(indexPath + ": weight_map puts '" + printableName(name) + "' in " + shard + ", but " +
                  (it == tensors_.end() ? "no shard holds it" : actual + " holds it"));
  }
}

void SafetensorsWeights::readConfig(const std::string& directory) {
  const std::string config = (fs::path(directory) / "config.json").string();
  std::error_code error;
  if (!fs::exists(config, error)) return;
  configPath_ = config;
  const nlohmann::json json = parseJson(readSmallFile(config, "the model config"), config);
  if (!json.is_object()) throw Error(config + ": not a JSON object");
  const auto tie = json.find("tie_word_embeddings");
  if (tie == json.end()) {
    tied_ = true;  // transformers' PretrainedConfig default
  } else if (tie->is_boolean()) {
    tied_ = tie->get<bool>();
  } else {
    throw Error(config + ": tie_word_embeddings is " + jsonForMessage(*tie) + ", expected true or false");
  }
}

std::string SafetensorsWeights::resolve(const std::string& name) const {
  if (tensors_.count(name)) return name;
  std::vector<std::string> stored;
  stored.reserve(tensors_.size());
  for (const auto& entry : tensors_) stored.push_back(entry.first);
  const std::string partner = tiedEmbeddingPartner(name, stored);
  std::string why;
  if (!partner.empty()) {
    if (tied_.value_or(false)) return partner;
    why = tied_ ? "; " + configPath_ + " says tie_word_embeddings false, so '" + partner + "' does not stand for it"
                : "; '" + partner + "' could stand for it if the weights were tied, but no config.json beside " +
                      path_ + " says so (give --weights the model's directory)";
  }
  std::string nearest;
  for (const std::string& candidate : nearestNames(name, stored))
    nearest += (nearest.empty() ? "" : ", ") + printableName(candidate);
  throw Error(path_ + ": no tensor named '" + name + "', which the plan needs (" + std::to_string(tensors_.size()) +
              " tensors stored; nearest: " + (nearest.empty() ? "none" : nearest) + ")" + why);
}

void SafetensorsWeights::read(const std::string& name, plan::DType dtype, const std::vector<int64_t>& shape,
                              void* out, size_t outBytes) const {
  const std::string stored = resolve(name);
  const SafetensorsTensor& tensor = tensors_.at(stored);
  const File& file = *files_[tensor.file];
  const std::string what = file.path + ": tensor '" + printableName(stored) + "'" +
                           (stored == name ? std::string() : " (tied, for '" + name + "')");
  if (tensor.shape != shape)
    throw Error(what + " has shape " + joinShape(tensor.shape) + ", the plan expects " + joinShape(shape));
  if (tensor.dtype != "F32" && tensor.dtype != "BF16" && tensor.dtype != "F16" && tensor.dtype != "F64")
    throw Error(what + " has dtype " + printableName(tensor.dtype) +
                "; parameters load from F32, BF16, F16 or F64 (converted to fp32 masters)");
  if (dtype != plan::F32 && dtype != plan::F64)
    throw Error(what + ": cannot load into a " + std::string(dtypeName(dtype)) + " parameter");
  const size_t count = (tensor.end - tensor.begin) / safetensorsDTypeSize(tensor.dtype);
  if (outBytes != count * dtypeSize(dtype))
    throw Error(what + ": destination holds " + std::to_string(outBytes) + " bytes, expected " +
                std::to_string(count * dtypeSize(dtype)));
  if (stored != name) {
    const std::string note = "tied      " + name + " reads " + stored + " (" + configPath_ + ": tie_word_embeddings)";
    if (std::find(notes_.begin(), notes_.end(), note) == notes_.end()) notes_.push_back(note);
  }
  if (count == 0) return;
  const unsigned char* src = file.map + file.dataStart + tensor.begin;
  // Read ahead: the kernel fetches the range in large requests.
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(src) & ~(page - 1);
  const size_t span = reinterpret_cast<uintptr_t>(src) + (tensor.end - tensor.begin) - begin;
  madvise(reinterpret_cast<void*>(begin), span, MADV_SEQUENTIAL);
  madvise(reinterpret_cast<void*>(begin), span, MADV_WILLNEED);
  // Split over the host threads: more pages in flight from the disk, and the
  // conversion's arithmetic on every core. Each range is independent.
  const size_t elementBytes = safetensorsDTypeSize(tensor.dtype);
  const bool copy = (dtype == plan::F32 && tensor.dtype == "F32") || (dtype == plan::F64 && tensor.dtype == "F64");
  const unsigned chunks = count >= (size_t{1} << 20) ? hostThreadCount() : 1;
  hostParallelRanges(count, chunks, [&](size_t begin, size_t end) {
    const unsigned char* from = src + begin * elementBytes;
    if (copy) std::memcpy(static_cast<unsigned char*>(out) + begin * elementBytes, from, (end - begin) * elementBytes);
    else if (dtype == plan::F32) convertTo(tensor.dtype, from, static_cast<float*>(out) + begin, end - begin);
    else convertTo(tensor.dtype, from, static_cast<double*>(out) + begin, end - begin);
  });
}

}  // namespace megatrain::runtime
