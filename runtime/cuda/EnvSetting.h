// EnvSetting.h - the CUDA backend's MEGATRAIN_* switches, read from the environment one way.
//
// A switch is unset (or empty) for its default, or one of the values it names;
// anything else is an error that names the variable, the value and the values
// it takes:
//   MEGATRAIN_ATTENTION='flash' is not auto, cudnn or gemm
// Log switches (MEGATRAIN_*_LOG) are on when set to anything but "" or "0".
#pragma once

#include <initializer_list>
#include <string_view>

namespace megatrain::runtime::cuda {

// The index in `names` of the value of `variable`, or -1 when it is unset or
// empty; throws the Error above for any other value.
int envChoice(const char* variable, std::initializer_list<std::string_view> names);

// Whether the log switch `variable` is on.
bool envFlag(const char* variable);

}  // namespace megatrain::runtime::cuda
