// Json.h - reading JSON (nlohmann-json) with failures as one-line Errors naming the file.
//
// Every JSON megatrain reads goes through parseJson: a token file's sidecar,
// the device profile a plan's header carries, the --metrics rows a resumed run
// keeps, the compiler's --device-profile. Malformed text is an Error naming
// the file (or what the text is) and the byte where parsing stopped;
// nlohmann's exceptions never leave it.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace megatrain {

// `text` as one JSON value, or an Error:
//   LABEL: not valid JSON at byte N: <nlohmann's reason, or "a NUL byte">
//     (N counts from 1, as nlohmann does; N = size + 1 is the end of the text)
//   LABEL: duplicate key "K"
//     (an object that names a key twice: which of the two counts is a guess)
nlohmann::json parseJson(const std::string& text, const std::string& label);

// `value` as JSON text for a message: one line, at most about 40 characters
// (longer text is cut and ends in "..."), bytes outside printable ASCII as \xNN.
std::string jsonForMessage(const nlohmann::json& value);

}  // namespace megatrain
