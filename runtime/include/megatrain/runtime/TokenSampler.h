// TokenSampler.h - [batch, seq] windows drawn from token files in a seeded shuffle, re-shuffled each epoch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "megatrain/runtime/TokenData.h"

namespace megatrain::runtime {

// splitmix64: one 64-bit word of state, fast, and the same sequence on every
// platform (std::mt19937 plus std::uniform_int_distribution is not: the
// distribution is implementation-defined, and resuming must be bit-exact).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state = 0) : state_(state) {}
  uint64_t next();
  // Uniform in [0, bound), bound > 0, without modulo bias.
  uint64_t below(uint64_t bound);
  uint64_t state() const { return state_; }

 private:
  uint64_t state_;
};

// Where a sampler stands: enough to continue it bit-exactly (checkpoints hold it).
struct SamplerState {
  uint64_t seed = 0;
  uint64_t windows = 0;   // windows across all files; a check that the data is the same
  uint64_t epoch = 0;     // 0-based
  uint64_t index = 0;     // next position in this epoch's order
  uint64_t epochRng = 0;  // RNG state before this epoch's shuffle
};

// The files are cut into windows of seqLen tokens at offsets 0, seqLen,
// 2 seqLen, ... (a file's last seqLen-1 tokens or fewer form no window).
// Each epoch visits every window once, in an order drawn by a Fisher-Yates
// shuffle from an RNG seeded with `seed` and carried from epoch to epoch;
// a batch takes the next `batch` windows and may span two epochs. Memory is
// one 8-byte index per window, allocated at construction; nextBatch
// allocates nothing.
class TokenSampler {
 public:
  TokenSampler(const std::vector<std::string>& paths, TokenDType fallback, int64_t seqLen, uint64_t seed);

  uint64_t windowCount() const { return order_.size(); }
  uint64_t tokenCount() const;
  const std::vector<TokenData>& files() const { return files_; }

  // Fills out[b * seqLen + t] for b < batch, and with `mask` the tokens' loss
  // mask bytes (1 for files without a mask).
  void nextBatch(int64_t* out, int64_t batch, uint8_t* mask = nullptr);
  // Whether any file has a loss mask (TokenData::maskPath).
  bool hasMask() const;

  SamplerState state() const;
  // Continues from a saved state; Error if it was taken over other data (a
  // different window count) or another seed.
  void restore(const SamplerState& state);

 private:
  void shuffleEpoch();  // order_ for epoch_, from rng_ (which it advances)

  std::vector<TokenData> files_;
  std::vector<uint64_t> firstWindow_;  // [files + 1]: window index where each file starts
  int64_t seqLen_;
  uint64_t seed_;
  std::vector<uint64_t> order_;  // this epoch's window order
  SplitMix64 rng_;
  uint64_t epoch_ = 0;
  uint64_t index_ = 0;
  uint64_t epochRng_ = 0;
};

}  // namespace megatrain::runtime
