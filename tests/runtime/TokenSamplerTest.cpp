// TokenSamplerTest.cpp - windows from several token files: each once per epoch, seeded, resumable, vocab-checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "TestUtil.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/TokenSampler.h"

namespace megatrain::runtime::testing {
namespace {

template <typename T>
std::string writeTokens(const std::string& path, const std::vector<uint32_t>& tokens) {
  std::ofstream out(path, std::ios::binary);
  for (uint32_t t : tokens) {
    const T token = static_cast<T>(t);
    out.write(reinterpret_cast<const char*>(&token), sizeof token);
  }
  return path;
}

std::vector<uint32_t> range(uint32_t from, uint32_t count) {
  std::vector<uint32_t> tokens(count);
  for (uint32_t i = 0; i < count; ++i) tokens[i] = from + i;
  return tokens;
}

class TokenSamplerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = makeTempDir();
    // 14 uint16 tokens (4 windows of 3, 2 left over) and 19 uint32 ones (6
    // windows, 1 left over) whose values tell file and offset apart.
    a_ = writeTokens<uint16_t>(dir_ + "/a.bin", range(0, 14));
    b_ = writeTokens<uint32_t>(dir_ + "/b.bin", range(70000, 19));
    std::ofstream(b_ + ".json") << "{\"dtype\": \"uint32\", \"vocab\": 80000}";
  }

  TokenSampler sampler(uint64_t seed) { return TokenSampler({a_, b_}, TokenDType::U16, 3, seed); }

  // The first token of each of the next `windows` windows, two per batch.
  static std::vector<int64_t> starts(TokenSampler& s, int windows) {
    std::vector<int64_t> out;
    int64_t batch[6];
    for (int i = 0; i < windows; i += 2) {
      s.nextBatch(batch, 2);
      // Windows are contiguous runs of the file.
      EXPECT_EQ(batch[1], batch[0] + 1);
      EXPECT_EQ(batch[5], batch[3] + 2);
      out.push_back(batch[0]);
      out.push_back(batch[3]);
    }
    return out;
  }

  std::string dir_, a_, b_;
};

TEST_F(TokenSamplerTest, EachEpochVisitsEveryWindowOnceInANewOrder) {
  TokenSampler s = sampler(0);
  EXPECT_EQ(s.windowCount(), 10u);
  EXPECT_EQ(s.tokenCount(), 33u);
  const std::vector<int64_t> epoch0 = starts(s, 10), epoch1 = starts(s, 10);
  const std::set<int64_t> all = {0, 3, 6, 9, 70000, 70003, 70006, 70009, 70012, 70015};
  EXPECT_EQ(std::set<int64_t>(epoch0.begin(), epoch0.end()), all);
  EXPECT_EQ(std::set<int64_t>(epoch1.begin(), epoch1.end()), all);
  EXPECT_NE(epoch0, epoch1);
  EXPECT_EQ(s.state().epoch, 1u);
  EXPECT_EQ(s.state().index, 10u);
}

TEST_F(TokenSamplerTest, SameSeedSameWindowsOtherSeedOthers) {
  TokenSampler a = sampler(5), b = sampler(5), c = sampler(6);
  const std::vector<int64_t> first = starts(a, 30);
  EXPECT_EQ(starts(b, 30), first);
  EXPECT_NE(starts(c, 30), first);
}

TEST_F(TokenSamplerTest, RestoredStateContinuesIdenticallyAcrossEpochs) {
  TokenSampler a = sampler(3);
  starts(a, 8);  // mid-epoch
  const SamplerState saved = a.state();
  TokenSampler b = sampler(3);
  b.restore(saved);
  EXPECT_EQ(starts(b, 16), starts(a, 16));  // through the end of epoch 0 and into epoch 1

  TokenSampler other = sampler(4);
  try {
    other.restore(saved);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "the saved data position was drawn with --seed 3, this run has --seed 4");
  }
  TokenSampler fewer({a_}, TokenDType::U16, 3, 3);
  EXPECT_THROW(fewer.restore(saved), Error);
}

TEST_F(TokenSamplerTest, SplitMix64MatchesTheReference) {
  SplitMix64 rng(0);
  EXPECT_EQ(rng.next(), 0xe220a8397b1dcdafull);
  EXPECT_EQ(rng.next(), 0x6e789e6aa1b965f4ull);
  for (int i = 0; i < 1000; ++i) EXPECT_LT(rng.below(7), 7u);
}

TEST_F(TokenSamplerTest, TokensOutsideTheVocabularyNameFileAndOffset) {
  const std::string bad = writeTokens<uint16_t>(dir_ + "/bad.bin", {1, 2, 3, 4, 7, 1});
  std::ofstream(bad + ".json") << "{\"dtype\": \"uint16\", \"vocab\": 5}";
  TokenSampler s({bad}, TokenDType::U16, 6, 0);
  int64_t out[6];
  try {
    s.nextBatch(out, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              bad + ": token 7 at byte offset 8 (token 4) is outside the vocabulary of 5 (" + bad + ".json)");
  }
  std::ofstream(bad + ".json") << "{\"dtype\": \"uint16\", \"vocab\": \"many\"}";
  EXPECT_THROW(TokenData(bad, TokenDType::U16), Error);
}

TEST_F(TokenSamplerTest, FilesWithoutAWholeWindowAreAnError) {
  const std::string tiny = writeTokens<uint16_t>(dir_ + "/tiny.bin", {1, 2});
  try {
    TokenSampler({tiny}, TokenDType::U16, 3, 0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "the token files hold no window of 3 tokens (" + tiny + " 2)");
  }
}

}  // namespace
}  // namespace megatrain::runtime::testing
