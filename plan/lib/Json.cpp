// Json.cpp - JSON parsing through nlohmann-json, its exceptions turned into Errors.
#include "megatrain/plan/Json.h"

#include <cstdio>
#include <set>
#include <vector>

#include "megatrain/plan/Error.h"

namespace megatrain {
namespace {

// Printable ASCII kept, every other byte as \xNN: a message stays one line of
// text whatever bytes the input held.
std::string printable(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\x%02x", c);
      out += escape;
    }
  }
  return out;
}

// nlohmann's what() is "[json.exception.parse_error.101] parse error at line L,
// column C: REASON"; the reason alone (the byte is reported separately).
std::string parseReason(const std::string& what) {
  const size_t column = what.find("column ");
  const size_t colon = column == std::string::npos ? std::string::npos : what.find(": ", column);
  if (colon != std::string::npos) return what.substr(colon + 2);
  const size_t tag = what.rfind("] ", what.find(' '));
  return tag == std::string::npos ? what : what.substr(tag + 2);
}

}  // namespace

nlohmann::json parseJson(const std::string& text, const std::string& label) {
  // The keys seen in each object being read, innermost last; the first
  // repeated key is reported once the text has parsed.
  std::vector<std::set<std::string>> open;
  std::string duplicate;
  bool hasDuplicate = false;
  const nlohmann::json::parser_callback_t noteKeys = [&](int, nlohmann::json::parse_event_t event,
                                                         nlohmann::json& parsed) {
    switch (event) {
      case nlohmann::json::parse_event_t::object_start:
        open.emplace_back();
        break;
      case nlohmann::json::parse_event_t::object_end:
        if (!open.empty()) open.pop_back();
        break;
      case nlohmann::json::parse_event_t::key:
        if (!open.empty() && !open.back().insert(parsed.get_ref<const std::string&>()).second && !hasDuplicate) {
          hasDuplicate = true;
          duplicate = parsed.get_ref<const std::string&>();
        }
        break;
      default:
        break;
    }
    return true;
  };
  // nlohmann's lexer takes a NUL byte for the end of the input and would accept
  // `{...}<NUL>anything`; JSON allows no raw NUL anywhere.
  const size_t nul = text.find('\0');
  if (nul != std::string::npos)
    throw Error(label + ": not valid JSON at byte " + std::to_string(nul + 1) + ": a NUL byte");
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(text, noteKeys);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(label + ": not valid JSON at byte " + std::to_string(e.byte) + ": " + printable(parseReason(e.what())));
  } catch (const nlohmann::json::exception& e) {
    throw Error(label + ": not valid JSON: " + printable(parseReason(e.what())));
  }
  if (hasDuplicate) throw Error(label + ": duplicate key \"" + printable(duplicate) + "\"");
  return value;
}

std::string jsonForMessage(const nlohmann::json& value) {
  constexpr size_t kLimit = 40;
  std::string text = printable(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  if (text.size() > kLimit) text = text.substr(0, kLimit - 3) + "...";
  return text;
}

}  // namespace megatrain
