// TokenSampler.cpp - [batch, seq] windows drawn from token files in a seeded shuffle, re-shuffled each epoch.
#include "megatrain/runtime/TokenSampler.h"

#include <algorithm>
#include <numeric>

#include "megatrain/plan/Error.h"

namespace megatrain::runtime {

uint64_t SplitMix64::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t SplitMix64::below(uint64_t bound) {
  // Reject the lowest (2^64 mod bound) values so that every residue is equally likely.
  const uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    const uint64_t r = next();
    if (r >= threshold) return r % bound;
  }
}

TokenSampler::TokenSampler(const std::vector<std::string>& paths, TokenDType fallback, int64_t seqLen, uint64_t seed)
    : seqLen_(seqLen), seed_(seed), rng_(seed) {
  if (paths.empty()) throw Error("no token files given");
  if (seqLen <= 0) throw Error("token windows must hold at least one token");
  firstWindow_.push_back(0);
  std::string sizes;
  for (const std::string& path : paths) {
    files_.emplace_back(path, fallback);
    files_.back().reserveWindow(seqLen);
    const uint64_t windows = files_.back().tokenCount() / static_cast<uint64_t>(seqLen);
    firstWindow_.push_back(firstWindow_.back() + windows);
    sizes += (sizes.empty() ? "" : ", ") + path + " " + std::to_string(files_.back().tokenCount());
  }
  if (firstWindow_.back() == 0)
    throw Error("the token files hold no window of " + std::to_string(seqLen) + " tokens (" + sizes + ")");
  order_.resize(firstWindow_.back());
  epochRng_ = rng_.state();
  shuffleEpoch();
}

uint64_t TokenSampler::tokenCount() const {
  uint64_t total = 0;
  for (const TokenData& file : files_) total += file.tokenCount();
  return total;
}

void TokenSampler::shuffleEpoch() {
  // From the identity each epoch, so that an epoch's order depends only on
  // the RNG state before it: restoring needs that one word, not the order.
  std::iota(order_.begin(), order_.end(), uint64_t{0});
  for (uint64_t i = order_.size() - 1; i > 0; --i) std::swap(order_[i], order_[rng_.below(i + 1)]);
}

bool TokenSampler::hasMask() const {
  for (const TokenData& file : files_)
    if (!file.maskPath().empty()) return true;
  return false;
}

void TokenSampler::nextBatch(int64_t* out, int64_t batch, uint8_t* mask) {
  for (int64_t b = 0; b < batch; ++b) {
    if (index_ == order_.size()) {
      ++epoch_;
      index_ = 0;
      epochRng_ = rng_.state();
      shuffleEpoch();
    }
    const uint64_t window = order_[index_++];
    // The file holding this window: the last whose first window is <= it.
    const size_t file =
        static_cast<size_t>(std::upper_bound(firstWindow_.begin(), firstWindow_.end(), window) - firstWindow_.begin()) -
        1;
    const uint64_t start = (window - firstWindow_[file]) * static_cast<uint64_t>(seqLen_);
    files_[file].read(start, seqLen_, out + b * seqLen_, mask ? mask + b * seqLen_ : nullptr);
  }
}

SamplerState TokenSampler::state() const {
  SamplerState state;
  state.seed = seed_;
  state.windows = order_.size();
  state.epoch = epoch_;
  state.index = index_;
  state.epochRng = epochRng_;
  return state;
}

void TokenSampler::restore(const SamplerState& state) {
  if (state.windows != order_.size())
    throw Error("the token files hold " + std::to_string(order_.size()) + " windows of " + std::to_string(seqLen_) +
                " tokens, the saved position is over " + std::to_string(state.windows) + " (other data?)");
  if (state.seed != seed_)
    throw Error("the saved data position was drawn with --seed " + std::to_string(state.seed) +
                ", this run has --seed " + std::to_string(seed_));
  if (state.index > order_.size()) throw Error("the saved data position is past the end of its epoch");
  epoch_ = state.epoch;
  index_ = state.index;
  epochRng_ = state.epochRng;
  rng_ = SplitMix64(state.epochRng);
  shuffleEpoch();
}

}  // namespace megatrain::runtime
