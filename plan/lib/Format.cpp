// Format.cpp - human-readable numbers for the compiler's and the runtime's messages.
#include "megatrain/plan/Format.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace megatrain {

std::string formatBytes(uint64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  while (value >= 1024.0 && unit < 3) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  // Three significant digits read well at every scale: 1.50 KiB, 12.0 MiB, 512 MiB.
  const char* format = value < 10 ? "%.2f %s" : value < 100 ? "%.1f %s" : "%.0f %s";
  std::snprintf(text, sizeof text, format, value, kUnits[unit]);
  return text;
}

std::string formatCount(uint64_t count) {
  std::string digits = std::to_string(count);
  std::string text;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) text += ',';
    text += digits[i];
  }
  return text;
}

bool parseByteSize(const std::string &text, uint64_t &bytes) {
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

}  // namespace megatrain
