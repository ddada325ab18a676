// TokenData.cpp - a flat binary token file, read as consecutive [batch, seq] windows.
#include "megatrain/runtime/TokenData.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

#include "megatrain/plan/Error.h"
#include "megatrain/plan/Json.h"

namespace megatrain::runtime {
namespace {

// The sidecar's two keys: "dtype" (required, "uint16" or "uint32") and "vocab"
// (optional, a non-negative integer; 0 or absent: no bound). Other keys (the
// tokenizers write "tokens", "source", "sha256", ...) are left alone.
// Every failure names the sidecar and the key.
struct Sidecar {
  TokenDType dtype = TokenDType::U16;
  uint64_t vocab = 0;
  std::string mask;  // the loss mask file as the sidecar names it; empty: none
};

Sidecar readSidecar(const std::string& text, const std::string& label) {
  const nlohmann::json json = parseJson(text, label);
  if (!json.is_object())
    throw Error(label + ": expected a JSON object such as {\"dtype\": \"uint16\", \"vocab\": 50257}, got " +
                std::string(json.type_name()));
  Sidecar sidecar;
  const auto dtype = json.find("dtype");
  if (dtype == json.end()) throw Error(label + ": no \"dtype\" key");
  if (!dtype->is_string())
    throw Error(label + ": \"dtype\" is not a string (uint16 or uint32): " + jsonForMessage(*dtype));
  const std::string& name = dtype->get_ref<const std::string&>();
  if (name != "uint16" && name != "uint32")  // parseTokenDType's message, the name printable
    throw Error(label + ": unknown token dtype " + jsonForMessage(*dtype) + " (expected uint16 or uint32)");
  sidecar.dtype = parseTokenDType(name);
  const auto vocab = json.find("vocab");
  if (vocab != json.end()) {
    // nlohmann reads a non-negative integer written without fraction or
    // exponent, up to 2^64 - 1, as unsigned; -1, 1.5, 1e3 and 2^64 are not.
    if (!vocab->is_number_unsigned())
      throw Error(label + ": \"vocab\" is not a non-negative integer: " + jsonForMessage(*vocab));
    sidecar.vocab = vocab->get<uint64_t>();
  }
  const auto mask = json.find("mask");
  if (mask != json.end()) {
    if (!mask->is_string() || mask->get_ref<const std::string&>().empty())
      throw Error(label + ": \"mask\" is not a file name: " + jsonForMessage(*mask));
    sidecar.mask = mask->get<std::string>();
  }
  return sidecar;
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
    const std::string text((std::istreambuf_iterator<char>(sidecar)), std::istreambuf_iterator<char>());
    const Sidecar parsed = readSidecar(text, path + ".json");
    dtype_ = parsed.dtype;
    vocab_ = parsed.vocab;
    if (!parsed.mask.empty()) {
      const size_t slash = path.rfind('/');
      maskPath_ = parsed.mask[0] == '/' || slash == std::string::npos ? parsed.mask
                                                                       : path.substr(0, slash + 1) + parsed.mask;
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
  if (!maskPath_.empty()) {
    mask_.open(maskPath_, std::ios::binary | std::ios::ate);
    if (!mask_) throw Error(maskPath_ + ": cannot open the loss mask that " + path + ".json names");
    const auto maskBytes = static_cast<uint64_t>(mask_.tellg());
    if (maskBytes != tokens_)
      throw Error(maskPath_ + ": " + std::to_string(maskBytes) + " bytes, but the loss mask needs one per token of " +
                  path + " (" + std::to_string(tokens_) + ")");
  }
}

void TokenData::reserveWindow(int64_t count) {
  const size_t tokenSize = dtype_ == TokenDType::U16 ? 2 : 4;
  if (count > 0) window_.reserve(static_cast<size_t>(count) * tokenSize);
}

void TokenData::read(uint64_t start, int64_t count, int64_t* out, uint8_t* mask) {
  const size_t tokenSize = dtype_ == TokenDType::U16 ? 2 : 4;
  if (count < 0 || start + static_cast<uint64_t>(count) > tokens_)
    throw Error(path_ + ": tokens " + std::to_string(start) + ".." + std::to_string(start + count) +
                " pass the end (" + std::to_string(tokens_) + " tokens)");
  window_.resize(static_cast<size_t>(count) * tokenSize);
  file_.clear();
  file_.seekg(static_cast<std::streamoff>(start * tokenSize));
  file_.read(reinterpret_cast<char*>(window_.data()), static_cast<std::streamsize>(window_.size()));
  if (!file_) throw Error(path_ + ": read failed at byte offset " + std::to_string(start * tokenSize));
  const unsigned char* raw = window_.data();
  // Little-endian regardless of the host.
  if (tokenSize == 2) {
    for (int64_t t = 0; t < count; ++t) out[t] = raw[2 * t] | raw[2 * t + 1] << 8;
  } else {
    for (int64_t t = 0; t < count; ++t)
      out[t] = static_cast<int64_t>(static_cast<uint32_t>(raw[4 * t]) |
                                    static_cast<uint32_t>(raw[4 * t + 1]) << 8 |
                                    static_cast<uint32_t>(raw[4 * t + 2]) << 16 |
                                    static_cast<uint32_t>(raw[4 * t + 3]) << 24);
  }
  if (mask) readMask(start, count, mask);
  if (vocab_ == 0) return;
  for (int64_t t = 0; t < count; ++t)
    if (static_cast<uint64_t>(out[t]) >= vocab_) {
      const uint64_t index = start + static_cast<uint64_t>(t);
      throw Error(path_ + ": token " + std::to_string(out[t]) + " at byte offset " +
                  std::to_string(index * tokenSize) + " (token " + std::to_string(index) +
                  ") is outside the vocabulary of " + std::to_string(vocab_) + " (" + path_ + ".json)");
    }
}

void TokenData::readMask(uint64_t start, int64_t count, uint8_t* mask) {
  if (maskPath_.empty()) {
    std::fill(mask, mask + count, uint8_t{1});
    return;
  }
  mask_.clear();
  mask_.seekg(static_cast<std::streamoff>(start));
  mask_.read(reinterpret_cast<char*>(mask), static_cast<std::streamsize>(count));
  if (!mask_) throw Error(maskPath_ + ": read failed at byte offset " + std::to_string(start));
  for (int64_t t = 0; t < count; ++t)
    if (mask[t] > 1)
      throw Error(maskPath_ + ": byte " + std::to_string(mask[t]) + " at offset " +
                  std::to_string(start + static_cast<uint64_t>(t)) + " is not a loss mask value (0 or 1)");
}

void TokenData::nextBatch(int64_t* out, int64_t batch, int64_t seqLen) {
  if (seqLen <= 0 || batch <= 0) throw Error(path_ + ": batch and sequence must be positive");
  if (tokens_ < static_cast<uint64_t>(seqLen))
    throw Error(path_ + ": holds " + std::to_string(tokens_) + " tokens, fewer than one window of " +
                std::to_string(seqLen));
  for (int64_t b = 0; b < batch; ++b) {
    if (position_ + static_cast<uint64_t>(seqLen) > tokens_) position_ = 0;
    read(position_, seqLen, out + b * seqLen);
    position_ += static_cast<uint64_t>(seqLen);
  }
}

}  // namespace megatrain::runtime
