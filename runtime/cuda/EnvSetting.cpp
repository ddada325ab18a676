// EnvSetting.cpp - the CUDA backend's MEGATRAIN_* switches (EnvSetting.h).
#include "EnvSetting.h"

#include <cstdlib>
#include <string>

#include "megatrain/plan/Error.h"

namespace megatrain::runtime::cuda {

int envChoice(const char* variable, std::initializer_list<std::string_view> names) {
  const char* value = std::getenv(variable);
  const std::string_view text = value ? value : "";
  if (text.empty()) return -1;
  int index = 0;
  for (std::string_view name : names) {
    if (text == name) return index;
    ++index;
  }
  std::string list;
  index = 0;
  for (std::string_view name : names) {
    if (index > 0) list += index + 1 == static_cast<int>(names.size()) ? " or " : ", ";
    list += name;
    ++index;
  }
  throw Error(std::string(variable) + "='" + std::string(text) + "' is not " + list);
}

bool envFlag(const char* variable) {
  const char* value = std::getenv(variable);
  return value && *value && std::string_view(value) != "0";
}

}  // namespace megatrain::runtime::cuda
