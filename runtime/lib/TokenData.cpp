// TokenData.cpp - a flat binary token file, read as consecutive [batch, seq] windows.
#include "megatrain/runtime/TokenData.h"

#include <iterator>

#include "megatrain/runtime/Error.h"

namespace megatrain::runtime {
namespace {

// The value of "dtype" in a small JSON object; empty if absent. A full JSON
// parser is not worth a dependency for one key.
std::string sidecarDType(const std::string& json) {
  size_t at = json.find("\"dtype\"");
  if (at == std::string::npos) return "";
  at = json.find(':', at);
  if (at == std::string::npos) return "";
  at = json.find('"', at);
  if (at == std::string::npos) return "";
  size_t end = json.find('"', at + 1);
  if (end == std::string::npos) return "";
  return json.substr(at + 1, end - at - 1);
}

}  // namespace

TokenDType parseTokenDType(const std::string& text) {
  if (text == "uint16") return TokenDType::U16;
  if (text == "uint32") return TokenDType::U32;
  throw Error("unknown token dtype '" + text + "' (expected uint16 or uint32)");
}

const char* tokenDTypeName(TokenDType dtype) {
  return dtype == TokenDType::U16 ? "uint16" : "uint32";
}

TokenData::TokenData(const std::string& path, TokenDType fallback)
    : path_(path), dtype_(fallback) {
  std::ifstream sidecar(path + ".json");
  if (sidecar) {
    std::string json((std::istreambuf_iterator<char>(sidecar)), std::istreambuf_iterator<char>());
    const std::string dtype = sidecarDType(json);
    if (dtype.empty()) throw Error(path + ".json: no \"dtype\" key");
    try {
      dtype_ = parseTokenDType(dtype);
    } catch (const Error& e) {
      throw Error(path + ".json: " + e.what());
    }
  }
  file_.open(path, std::ios::binary | std::ios::ate);
  if (!file_) throw Error(path + ": cannot open");
  const auto bytes = static_cast<uint64_t>(file_.tellg());
  const uint64_t tokenSize = dtype_ == TokenDType::U16 ? 2 : 4;
  if (bytes % tokenSize != 0)
    throw Error(path + ": size " + std::to_string(bytes) + " bytes is not a multiple of " +
                std::to_string(tokenSize) + " (" + tokenDTypeName(dtype_) + " tokens)");
  tokens_ = bytes / tokenSize;
}

void TokenData::nextBatch(int64_t* out, int64_t batch, int64_t seqLen) {
  if (seqLen <= 0 || batch <= 0) throw Error(path_ + ": batch and sequence must be positive");
  if (tokens_ < static_cast<uint64_t>(seqLen))
    throw Error(path_ + ": holds " + std::to_string(tokens_) + " tokens, fewer than one window of " +
                std::to_string(seqLen));
  const size_t tokenSize = dtype_ == TokenDType::U16 ? 2 : 4;
  window_.resize(static_cast<size_t>(seqLen) * tokenSize);
  for (int64_t b = 0; b < batch; ++b) {
    if (position_ + static_cast<uint64_t>(seqLen) > tokens_) position_ = 0;
    file_.seekg(static_cast<std::streamoff>(position_ * tokenSize));
    file_.read(reinterpret_cast<char*>(window_.data()), static_cast<std::streamsize>(window_.size()));
    if (!file_) throw Error(path_ + ": read failed at token " + std::to_string(position_));
    int64_t* row = out + b * seqLen;
    const unsigned char* raw = window_.data();
    // Little-endian regardless of the host.
    if (tokenSize == 2) {
      for (int64_t t = 0; t < seqLen; ++t) row[t] = raw[2 * t] | raw[2 * t + 1] << 8;
    } else {
      for (int64_t t = 0; t < seqLen; ++t)
        row[t] = static_cast<int64_t>(static_cast<uint32_t>(raw[4 * t]) |
                                      static_cast<uint32_t>(raw[4 * t + 1]) << 8 |
                                      static_cast<uint32_t>(raw[4 * t + 2]) << 16 |
                                      static_cast<uint32_t>(raw[4 * t + 3]) << 24);
    }
    position_ += static_cast<uint64_t>(seqLen);
  }
}

}  // namespace megatrain::runtime
