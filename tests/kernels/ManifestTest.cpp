// ManifestTest.cpp - the kernel manifest is whole, and a backend's registry implements exactly it.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "megatrain/kernels/Manifest.h"
#include "RegistryNames.h"

namespace megatrain::kernels {
namespace {

std::vector<std::string> manifestNames() {
  std::vector<std::string> names;
  for (const KernelSpec& spec : kernelManifest()) names.push_back(spec.name);
  std::sort(names.begin(), names.end());
  return names;
}

TEST(KernelManifest, NamesAreUniqueAndEveryKernelHasARule) {
  std::set<std::string> seen;
  for (const KernelSpec& spec : kernelManifest()) {
    EXPECT_TRUE(seen.insert(spec.name).second) << spec.name << " is listed twice";
    EXPECT_NE(spec.rule, nullptr) << spec.name;
    EXPECT_TRUE(spec.inputs >= 0 || spec.inputs == KernelSpec::kAnyInputs) << spec.name;
    EXPECT_TRUE(spec.outputs >= 1 || spec.outputs == KernelSpec::kAnyOutputs) << spec.name;
    EXPECT_EQ(findKernelSpec(spec.name), &spec);
  }
  EXPECT_EQ(findKernelSpec("no_such_kernel"), nullptr);
}

TEST(KernelManifest, TheBackendImplementsExactlyTheManifest) {
  std::vector<std::string> registered = registryNames();
  std::sort(registered.begin(), registered.end());
  EXPECT_EQ(registered, manifestNames()) << "backend: " << registryLabel();
}

TEST(KernelManifest, CountsAreCheckedBeforeTheRule) {
  KernelCall call;
  call.kernel = "matmul";
  call.numIn = 1;
  call.numOut = 1;
  try {
    checkKernelCall(*findKernelSpec("matmul"), call);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "matmul: 1 inputs and 1 outputs, it takes 2 and 1");
  }
}

}  // namespace
}  // namespace megatrain::kernels
