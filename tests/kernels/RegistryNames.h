// RegistryNames.h - the kernel names one backend registers; each manifest test binary links one backend's definition.
#pragma once

#include <string>
#include <vector>

namespace megatrain::kernels {

std::vector<std::string> registryNames();
const char* registryLabel();

}  // namespace megatrain::kernels
