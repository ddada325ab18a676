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

}  // namespace megatrain
