// SigmoidForm.h - runs ElementMath.cuh's sigmoidOf and the CPU twin's two-branch form on the device
// (SigmoidForm.cu), for SigmoidFormTest.cpp.
#pragma once

#include <string>
#include <vector>

namespace megatrain::runtime::cuda::test {

// Both forms of sigmoid of every x on the device; an empty string, or the CUDA error.
std::string sigmoidForms(const std::vector<float>& x, std::vector<float>& oneExp, std::vector<float>& twoBranch);
std::string sigmoidForms(const std::vector<double>& x, std::vector<double>& oneExp,
                         std::vector<double>& twoBranch);

}  // namespace megatrain::runtime::cuda::test
