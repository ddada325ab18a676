// TokenData.h - a flat binary token file, read as consecutive [batch, seq] windows.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace megatrain::runtime {

enum class TokenDType { U16, U32 };

// Parses "uint16" / "uint32"; Error otherwise.
TokenDType parseTokenDType(const std::string& text);
const char* tokenDTypeName(TokenDType dtype);

// The file holds little-endian unsigned tokens and nothing else. The element
// type comes from a sidecar `FILE.json` ({"dtype": "uint16", "vocab": 50257})
// if one exists, else from `fallback` (the --data-dtype flag); the sidecar's
// optional "vocab" bounds every token read. Its optional "mask" names a loss
// mask file (relative to FILE's folder): one byte per token, 1 where the
// token counts as a target of the loss, 0 where it does not.
class TokenData {
 public:
  TokenData(const std::string& path, TokenDType fallback);

  const std::string& path() const { return path_; }
  TokenDType dtype() const { return dtype_; }
  uint64_t tokenCount() const { return tokens_; }
  // The sidecar's vocabulary size; 0 when it gives none.
  uint64_t vocab() const { return vocab_; }
  // The loss mask file's path; empty when the sidecar names none.
  const std::string& maskPath() const { return maskPath_; }

  // Sizes the read buffer for windows of up to `count` tokens, so that reads
  // of that size allocate nothing.
  void reserveWindow(int64_t count);

  // Reads tokens [start, start + count) into out, and with `mask` their loss
  // mask bytes (all 1 without a mask file). Error naming the file and the
  // byte offset if the range passes the end, a token is not below vocab() or
  // a mask byte is neither 0 nor 1.
  void read(uint64_t start, int64_t count, int64_t* out, uint8_t* mask = nullptr);
  // Index of the first token of the next window.
  uint64_t position() const { return position_; }

  // Fills out[b * seqLen + t], b < batch, t < seqLen, with the next `batch`
  // windows of `seqLen` tokens: consecutive, non-overlapping, continuing where
  // the previous call stopped. A window that would run past the end of the
  // file starts again at token 0. Error if the file is shorter than seqLen.
  void nextBatch(int64_t* out, int64_t batch, int64_t seqLen);

 private:
  void readMask(uint64_t start, int64_t count, uint8_t* mask);

  std::string path_;
  TokenDType dtype_;
  uint64_t tokens_ = 0;
  uint64_t vocab_ = 0;
  uint64_t position_ = 0;
  std::ifstream file_;
  std::string maskPath_;
  std::ifstream mask_;
  std::vector<unsigned char> window_;  // one window's raw bytes, reused
};

}  // namespace megatrain::runtime
