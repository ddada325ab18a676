// TokenDataTest.cpp - token windows: consecutive, non-overlapping, wrapping at the end; dtype selection.
#include <fstream>

#include <gtest/gtest.h>

#include "TestUtil.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/TokenData.h"

namespace megatrain::runtime::testing {
namespace {

template <typename T>
std::string writeTokens(const std::string& dir, const std::string& name, int count) {
  const std::string path = dir + "/" + name;
  std::ofstream out(path, std::ios::binary);
  for (int i = 0; i < count; ++i) {
    const T token = static_cast<T>(i * 1000 + 7);  // wide enough to catch a wrong width
    out.write(reinterpret_cast<const char*>(&token), sizeof token);
  }
  return path;
}

std::vector<int64_t> batch(TokenData& data, int64_t b, int64_t t) {
  std::vector<int64_t> out(static_cast<size_t>(b * t));
  data.nextBatch(out.data(), b, t);
  return out;
}

// 10 tokens, windows of 3, two per batch: the fourth window would need tokens
// 9..11, so it starts over at token 0.
TEST(TokenData, WindowsAreConsecutiveAndWrap) {
  const std::string path = writeTokens<uint16_t>(makeTempDir(), "t.bin", 10);
  TokenData data(path, TokenDType::U16);
  EXPECT_EQ(data.tokenCount(), 10u);
  auto tok = [](int i) { return static_cast<int64_t>(i * 1000 + 7); };
  EXPECT_EQ(batch(data, 2, 3), (std::vector<int64_t>{tok(0), tok(1), tok(2), tok(3), tok(4), tok(5)}));
  EXPECT_EQ(batch(data, 2, 3), (std::vector<int64_t>{tok(6), tok(7), tok(8), tok(0), tok(1), tok(2)}));
  EXPECT_EQ(batch(data, 2, 3), (std::vector<int64_t>{tok(3), tok(4), tok(5), tok(6), tok(7), tok(8)}));
  EXPECT_EQ(data.position(), 9u);
}

TEST(TokenData, SidecarDtypeWinsOverTheFlag) {
  const std::string dir = makeTempDir();
  const std::string path = writeTokens<uint32_t>(dir, "t.bin", 6);
  std::ofstream(path + ".json") << "{\"vocab\": 70000, \"dtype\": \"uint32\"}";
  TokenData data(path, TokenDType::U16);
  EXPECT_EQ(data.dtype(), TokenDType::U32);
  EXPECT_EQ(batch(data, 1, 6)[5], 5007);
}

TEST(TokenData, ErrorsNameTheFile) {
  const std::string dir = makeTempDir();
  const std::string small = writeTokens<uint16_t>(dir, "small.bin", 2);
  TokenData data(small, TokenDType::U16);
  std::vector<int64_t> out(4);
  try {
    data.nextBatch(out.data(), 1, 4);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), small + ": holds 2 tokens, fewer than one window of 4");
  }
  std::ofstream(dir + "/odd.bin") << "abc";
  try {
    TokenData odd(dir + "/odd.bin", TokenDType::U16);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), dir + "/odd.bin: size 3 bytes is not a multiple of 2 (uint16 tokens)");
  }
  EXPECT_THROW(parseTokenDType("int8"), Error);
}

}  // namespace
}  // namespace megatrain::runtime::testing
