// ByteSize.cpp - the one size syntax of every megatrain tool's size flags.
#include "megatrain/plan/ByteSize.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "megatrain/plan/Error.h"

namespace megatrain {

bool parseByteSize(const std::string& text, uint64_t& bytes) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0)
    return false;
  std::string number = text.substr(0, i);
  if (number.find('.') != number.rfind('.'))
    return false;
  double value = std::strtod(number.c_str(), nullptr);
  std::string unit;
  for (size_t j = i; j < text.size(); ++j)
    if (!std::isspace(static_cast<unsigned char>(text[j])))
      unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[j])));
  double scale;
  if (unit.empty() || unit == "b")
    scale = 1;
  else if (unit == "kb" || unit == "k")
    scale = 1e3;
  else if (unit == "mb" || unit == "m")
    scale = 1e6;
  else if (unit == "gb" || unit == "g")
    scale = 1e9;
  else if (unit == "tb" || unit == "t")
    scale = 1e12;
  else if (unit == "kib")
    scale = 1024.0;
  else if (unit == "mib")
    scale = 1024.0 * 1024;
  else if (unit == "gib")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "tib")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else
    return false;
  double total = value * scale;
  if (!(total >= 1) || total > 1.8e19)
    return false;
  bytes = static_cast<uint64_t>(std::llround(total));
  return true;
}

uint64_t parseSizeFlag(const std::string& text, const std::string& flag) {
  uint64_t bytes = 0;
  if (!parseByteSize(text, bytes))
    throw Error(flag + " expects a size such as 24GiB, 16000MB, 8GB, 1.5TiB or a byte count, got '" + text + "'");
  return bytes;
}

}  // namespace megatrain
