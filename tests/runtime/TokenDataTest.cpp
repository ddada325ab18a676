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

// The error TokenData gives for a sidecar holding `json`, or "" if it loads.
std::string sidecarError(const std::string& path, const std::string& json) {
  std::ofstream(path + ".json", std::ios::binary | std::ios::trunc) << json;
  try {
    TokenData data(path, TokenDType::U16);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(TokenData, SidecarKeysAndTheirTypes) {
  const std::string dir = makeTempDir();
  const std::string path = writeTokens<uint16_t>(dir, "t.bin", 4);
  const std::string side = path + ".json: ";
  // What loads: other keys are left alone (the tokenizers write several), vocab is
  // optional and any integer from 0 (no bound) to 2^64 - 1.
  EXPECT_EQ(sidecarError(path, R"({"dtype": "uint16"})"), "");
  EXPECT_EQ(sidecarError(path, R"({"dtype": "uint16", "vocab": 0})"), "");
  EXPECT_EQ(sidecarError(path, " {\n\"tokens\": 4, \"dtype\": \"uint16\", \"files\": [\"a\", {\"b\": null}],"
                               " \"vocab\": 18446744073709551615, \"byte_order\": \"little\"}\n"),
            "");
  {
    std::ofstream(path + ".json", std::ios::trunc) << R"({"sha256": "00", "dtype": "uint32", "vocab": 70000})";
    TokenData data(path, TokenDType::U16);
    EXPECT_EQ(data.dtype(), TokenDType::U32);
    EXPECT_EQ(data.vocab(), 70000u);
    EXPECT_EQ(data.tokenCount(), 2u);
  }
  // Wrong keys and types: one line naming the sidecar and the key.
  EXPECT_EQ(sidecarError(path, R"({"vocab": 5})"), side + "no \"dtype\" key");
  EXPECT_EQ(sidecarError(path, R"({"dtype": 3})"), side + "\"dtype\" is not a string (uint16 or uint32): 3");
  EXPECT_EQ(sidecarError(path, R"({"dtype": null})"), side + "\"dtype\" is not a string (uint16 or uint32): null");
  EXPECT_EQ(sidecarError(path, R"({"dtype": "int8"})"),
            side + "unknown token dtype \"int8\" (expected uint16 or uint32)");
  EXPECT_EQ(sidecarError(path, R"({"dtype": "uint16\n"})"),
            side + "unknown token dtype \"uint16\\n\" (expected uint16 or uint32)");
  EXPECT_EQ(sidecarError(path, R"({"Dtype": "uint16"})"), side + "no \"dtype\" key");
  for (const char* vocab : {"-1", "1e30", "1e3", "3.0", "18446744073709551616", "\"many\"", "true", "null"})
    EXPECT_EQ(sidecarError(path, std::string(R"({"dtype": "uint16", "vocab": )") + vocab + "}"),
              side + "\"vocab\" is not a non-negative integer: " +
                  (std::string(vocab) == "1e30" ? "1e+30" : std::string(vocab) == "1e3" ? "1000.0" :
                   std::string(vocab) == "18446744073709551616" ? "1.8446744073709552e+19" : vocab));
  EXPECT_EQ(sidecarError(path, R"({"dtype": "uint16", "vocab": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]})"),
            side + "\"vocab\" is not a non-negative integer: [1,2,3,4,5,6,7,8,9,10,11,12,13,14]");
  EXPECT_EQ(sidecarError(path, R"({"dtype": "uint16", "vocab": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18]})"),
            side + "\"vocab\" is not a non-negative integer: [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,...");
  EXPECT_EQ(sidecarError(path, R"(["dtype", "uint16"])"),
            side + "expected a JSON object such as {\"dtype\": \"uint16\", \"vocab\": 50257}, got array");
  EXPECT_EQ(sidecarError(path, R"("uint16")"),
            side + "expected a JSON object such as {\"dtype\": \"uint16\", \"vocab\": 50257}, got string");
}

TEST(TokenData, MalformedSidecarsAreOneLineErrors) {
  const std::string dir = makeTempDir();
  const std::string path = writeTokens<uint16_t>(dir, "t.bin", 4);
  const std::string side = path + ".json: ";
  // Truncated, empty, trailing text, bad bytes: nlohmann's reason and the byte
  // (from 1) where it stopped.
  EXPECT_EQ(sidecarError(path, R"({"dtype": "uint16")"),
            side + "not valid JSON at byte 19: syntax error while parsing object - unexpected end of input; "
                   "expected '}'");
  EXPECT_EQ(sidecarError(path, R"({"dtype": "uint)"),
            side + "not valid JSON at byte 16: syntax error while parsing value - invalid string: missing closing "
                   "quote; last read: '\"uint'");
  EXPECT_EQ(sidecarError(path, ""),
            side + "not valid JSON at byte 1: syntax error while parsing value - unexpected end of input; "
                   "expected '[', '{', or a literal");
  EXPECT_EQ(sidecarError(path, R"({"dtype": "uint16"} {})"),
            side + "not valid JSON at byte 21: syntax error while parsing value - unexpected '{'; expected end of "
                   "input");
  EXPECT_EQ(sidecarError(path, R"({"dtype": "uint16",})"),
            side + "not valid JSON at byte 20: syntax error while parsing object key - unexpected '}'; expected "
                   "string literal");
  EXPECT_EQ(sidecarError(path, "{\"dtype\": \"\xff\"}"),
            side + "not valid JSON at byte 12: syntax error while parsing value - invalid string: ill-formed UTF-8 "
                   "byte; last read: '\"\\xff'");
  EXPECT_EQ(sidecarError(path, std::string("{\"dtype\":\0\"uint16\"}", 19)), side + "not valid JSON at byte 10: a NUL byte");
  // (nlohmann alone would end the text at the NUL and accept this.)
  EXPECT_EQ(sidecarError(path, std::string("{\"dtype\": \"uint16\"}\0{", 21)),
            side + "not valid JSON at byte 20: a NUL byte");
  EXPECT_EQ(sidecarError(path, "{\"dtype\": \"uint16\"}\x01"),
            side + "not valid JSON at byte 20: syntax error while parsing value - invalid literal; last read: "
                   "'\"uint16\"}<U+0001>'; expected end of input");
  // A key given twice: which one counts would be a guess, so neither does.
  EXPECT_EQ(sidecarError(path, R"({"dtype": "uint16", "dtype": "uint32"})"), side + "duplicate key \"dtype\"");
  EXPECT_EQ(sidecarError(path, R"({"dtype": "uint16", "vocab": 5, "vocab": 5})"), side + "duplicate key \"vocab\"");
  EXPECT_EQ(sidecarError(path, R"({"dtype": "uint16", "files": [{"a": 1, "a": 2}]})"), side + "duplicate key \"a\"");
  // The same key in two objects is no duplicate.
  EXPECT_EQ(sidecarError(path, R"({"dtype": "uint16", "files": [{"a": 1}, {"a": 2}], "a": 3})"), "");
  // Deep nesting is no crash.
  EXPECT_EQ(sidecarError(path, "{\"dtype\": \"uint16\", \"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}"),
            "");
}

// A loss mask beside the tokens: read with each window, all 1 without one,
// refused when its length or a byte is wrong.
TEST(TokenData, LossMaskIsReadWithItsTokens) {
  const std::string dir = makeTempDir();
  const std::string path = writeTokens<uint16_t>(dir, "t.bin", 6);
  {
    std::ofstream(path + ".json") << R"({"dtype": "uint16", "mask": "t.bin.mask"})";
    std::ofstream mask(path + ".mask", std::ios::binary);
    mask.write("\x00\x01\x01\x00\x01\x00", 6);
  }
  TokenData data(path, TokenDType::U16);
  EXPECT_EQ(data.maskPath(), dir + "/t.bin.mask");
  std::vector<int64_t> tokens(4);
  std::vector<uint8_t> mask(4, 9);
  data.read(2, 4, tokens.data(), mask.data());
  EXPECT_EQ(tokens, (std::vector<int64_t>{2007, 3007, 4007, 5007}));
  EXPECT_EQ(mask, (std::vector<uint8_t>{1, 0, 1, 0}));

  const std::string plain = writeTokens<uint16_t>(dir, "plain.bin", 3);
  TokenData none(plain, TokenDType::U16);
  EXPECT_EQ(none.maskPath(), "");
  std::vector<uint8_t> ones(3, 9);
  none.read(0, 3, tokens.data(), ones.data());
  EXPECT_EQ(ones, (std::vector<uint8_t>{1, 1, 1}));

  auto error = [&](const std::string& sidecar, const std::string& maskBytes) -> std::string {
    std::ofstream(path + ".json") << sidecar;
    std::ofstream(path + ".mask", std::ios::binary | std::ios::trunc) << maskBytes;
    try {
      TokenData bad(path, TokenDType::U16);
      std::vector<uint8_t> m(6);
      bad.read(0, 6, tokens.data(), m.data());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  tokens.resize(6);
  const std::string sidecar = R"({"dtype": "uint16", "mask": "t.bin.mask"})";
  EXPECT_EQ(error(sidecar, std::string(5, '\1')),
            dir + "/t.bin.mask: 5 bytes, but the loss mask needs one per token of " + path + " (6)");
  EXPECT_EQ(error(sidecar, std::string("\1\1\1\2\1\1", 6)),
            dir + "/t.bin.mask: byte 2 at offset 3 is not a loss mask value (0 or 1)");
  EXPECT_EQ(error(R"({"dtype": "uint16", "mask": "gone.mask"})", std::string(6, '\1')),
            dir + "/gone.mask: cannot open the loss mask that " + path + ".json names");
  EXPECT_EQ(error(R"({"dtype": "uint16", "mask": 3})", std::string(6, '\1')),
            path + ".json: \"mask\" is not a file name: 3");
}

}  // namespace
}  // namespace megatrain::runtime::testing
