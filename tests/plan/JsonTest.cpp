// JsonTest.cpp - parseJson (plan/lib/Json.cpp): nlohmann's parse, its failures as one-line Errors.
#include "megatrain/plan/Json.h"

#include <gtest/gtest.h>

#include <string>

#include "megatrain/plan/Error.h"

namespace megatrain {
namespace {

std::string parseError(const std::string& text) {
  try {
    parseJson(text, "f.json");
    return "";
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not an Error: ") + e.what();
  }
}

TEST(Json, ParsesOneValue) {
  const nlohmann::json value = parseJson(R"( {"a": [1, -2, 3.5, "x", null, true], "b": {"a": 1}} )", "f.json");
  ASSERT_TRUE(value.is_object());
  EXPECT_EQ(value["a"].size(), 6u);
  EXPECT_TRUE(value["a"][0].is_number_unsigned());
  EXPECT_TRUE(value["a"][1].is_number_integer());
  EXPECT_TRUE(value["a"][2].is_number_float());
  EXPECT_EQ(value["b"]["a"], 1);
  EXPECT_EQ(parseJson("7", "f.json"), 7);
  EXPECT_EQ(parseJson("[]", "f.json"), nlohmann::json::array());
}

TEST(Json, MalformedTextNamesTheLabelAndTheByte) {
  EXPECT_EQ(parseError("{\"a\": 1"),
            "f.json: not valid JSON at byte 8: syntax error while parsing object - unexpected end of input; expected '}'");
  EXPECT_EQ(parseError("[1, 2,]"),
            "f.json: not valid JSON at byte 7: syntax error while parsing value - unexpected ']'; expected '[', '{', or "
            "a literal");
  EXPECT_EQ(parseError("{'a': 1}"),
            "f.json: not valid JSON at byte 2: syntax error while parsing object key - invalid literal; last read: "
            "'{''; expected string literal");
  EXPECT_EQ(parseError("nan"), "f.json: not valid JSON at byte 2: syntax error while parsing value - invalid literal; "
                               "last read: 'na'");
  EXPECT_EQ(parseError("1 2"),
            "f.json: not valid JSON at byte 3: syntax error while parsing value - unexpected number literal; expected "
            "end of input");
  EXPECT_EQ(parseError(std::string("1\0", 2)), "f.json: not valid JSON at byte 2: a NUL byte");
  // Bytes that are not printable ASCII appear as \xNN: the message stays one line.
  EXPECT_EQ(parseError("\"\xc3\""),
            "f.json: not valid JSON at byte 3: syntax error while parsing value - invalid string: ill-formed UTF-8 "
            "byte; last read: '\"\\xc3\"'");
  EXPECT_EQ(parseError("\"a\nb\""),
            "f.json: not valid JSON at byte 3: syntax error while parsing value - invalid string: control character "
            "U+000A (LF) must be escaped to \\u000A or \\n; last read: '\"a<U+000A>'");
}

TEST(Json, DuplicateKeysAreAnErrorAtAnyDepth) {
  EXPECT_EQ(parseError(R"({"a": 1, "a": 1})"), "f.json: duplicate key \"a\"");
  EXPECT_EQ(parseError(R"({"x": [{"k": 1}, {"k": 2, "j": {"q": 0, "q": 0}}]})"), "f.json: duplicate key \"q\"");
  // The first one found is named.
  EXPECT_EQ(parseError(R"({"b": 1, "a": {"c": 1, "c": 2}, "b": 2})"), "f.json: duplicate key \"c\"");
  // Equal keys in different objects, or equal values, are not duplicates.
  EXPECT_EQ(parseError(R"({"a": {"a": {"a": 1}}, "b": [{"a": 1}, {"a": 1}], "c": "a"})"), "");
}

TEST(Json, DeepNestingIsNoCrash) {
  EXPECT_EQ(parseError(std::string(200000, '[') + std::string(200000, ']')), "");
  EXPECT_EQ(parseError(std::string(200000, '[')).rfind("f.json: not valid JSON at byte 200001: ", 0), 0u);
}

TEST(Json, ValuesForMessagesAreShortOneLineText) {
  EXPECT_EQ(jsonForMessage(nlohmann::json(-1)), "-1");
  EXPECT_EQ(jsonForMessage(nlohmann::json(1e30)), "1e+30");
  EXPECT_EQ(jsonForMessage(nlohmann::json("a\nb")), "\"a\\nb\"");
  EXPECT_EQ(jsonForMessage(nlohmann::json("caf\xc3\xa9")), "\"caf\\xc3\\xa9\"");
  EXPECT_EQ(jsonForMessage(nlohmann::json(std::string(100, 'x'))), "\"" + std::string(36, 'x') + "...");
  // Invalid UTF-8 (a value built in code, not parsed) does not throw.
  EXPECT_EQ(jsonForMessage(nlohmann::json("\xff")), "\"\\xef\\xbf\\xbd\"");
}

}  // namespace
}  // namespace megatrain
