// DeviceProfileTest.cpp - device profile JSON (fields, defaults, errors) and byte sizes.
#include "megatrain/plan/DeviceProfile.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

namespace megatrain {
namespace {

std::string writeTemp(const std::string &name, const std::string &text) {
  std::string path = ::testing::TempDir() + name + "." + std::to_string(::getpid());
  std::ofstream(path) << text;
  return path;
}

TEST(DeviceProfile, ReadsAFileAndKeepsDefaultsForAbsentFields) {
  std::string path = writeTemp("profile.json", R"({"name": "test-card",
      "h2d_bytes_per_s": 25e9, "matmul_fp32_flops": 1.5e13, "launch_s": 5e-6,
      "device_memory_bytes": 80000000000})");
  DeviceProfile profile, defaults;
  std::string error;
  ASSERT_TRUE(loadDeviceProfile(path, profile, error)) << error;
  EXPECT_EQ(profile.name, "test-card");
  EXPECT_DOUBLE_EQ(profile.h2dBytesPerS, 25e9);
  EXPECT_DOUBLE_EQ(profile.matmulFp32, 1.5e13);
  EXPECT_DOUBLE_EQ(profile.launchS, 5e-6);
  EXPECT_EQ(profile.deviceMemoryBytes, 80000000000ull);
  EXPECT_DOUBLE_EQ(profile.d2hBytesPerS, defaults.d2hBytesPerS);
  EXPECT_DOUBLE_EQ(profile.hbmBytesPerS, defaults.hbmBytesPerS);
  std::remove(path.c_str());

  // What the plan header records reads back as the same profile.
  DeviceProfile again;
  ASSERT_TRUE(parseDeviceProfile(deviceProfileToJson(profile), again, error)) << error;
  EXPECT_EQ(again.name, "test-card");
  EXPECT_DOUBLE_EQ(again.h2dBytesPerS, 25e9);
  EXPECT_EQ(again.deviceMemoryBytes, 80000000000ull);
}

TEST(DeviceProfile, KernelEfficiencyReadsBackAndIsChecked) {
  DeviceProfile profile;
  std::string error;
  ASSERT_TRUE(parseDeviceProfile(R"({"kernel_efficiency": {"matmul": 0.9, "pointwise": 0.25}})", profile, error))
      << error;
  EXPECT_DOUBLE_EQ(profile.efficiencyOf("matmul"), 0.9);
  EXPECT_DOUBLE_EQ(profile.efficiencyOf("pointwise"), 0.25);
  EXPECT_DOUBLE_EQ(profile.efficiencyOf("rms_norm"), 1.0);
  DeviceProfile again;
  ASSERT_TRUE(parseDeviceProfile(deviceProfileToJson(profile), again, error)) << error;
  EXPECT_EQ(again.kernelEfficiency, profile.kernelEfficiency);
  for (const char *bad : {R"({"kernel_efficiency": 0.9})", R"({"kernel_efficiency": {"matmul": 0}})",
                          R"({"kernel_efficiency": {"matmul": "fast"}})", R"({"kernel_efficiency": {"add": 9}})"}) {
    DeviceProfile p;
    EXPECT_FALSE(parseDeviceProfile(bad, p, error)) << bad;
    EXPECT_NE(error.find("kernel_efficiency"), std::string::npos) << error;
  }
}

TEST(DeviceProfile, UnknownFieldIsAnErrorNamingTheFileAndField) {
  std::string path = writeTemp("unknown.json", R"({"h2d_bandwidth": 25e9})");
  DeviceProfile profile;
  std::string error;
  EXPECT_FALSE(loadDeviceProfile(path, profile, error));
  EXPECT_EQ(error.rfind(path + ": unknown field 'h2d_bandwidth' (fields: name,", 0), 0u) << error;
  EXPECT_NE(error.find("h2d_bytes_per_s"), std::string::npos) << error;
  std::remove(path.c_str());
}

TEST(DeviceProfile, NonNumericFieldIsAnError) {
  DeviceProfile profile;
  std::string error;
  EXPECT_FALSE(parseDeviceProfile(R"({"hbm_bytes_per_s": "fast"})", profile, error));
  EXPECT_EQ(error, "field 'hbm_bytes_per_s' must be a positive number");
  EXPECT_FALSE(parseDeviceProfile(R"({"launch_s": -1})", profile, error));
  EXPECT_EQ(error, "field 'launch_s' must be a positive number");
  EXPECT_FALSE(parseDeviceProfile(R"({"name": 3})", profile, error));
  EXPECT_EQ(error, "field 'name' must be a string");
  EXPECT_FALSE(parseDeviceProfile(R"([1, 2])", profile, error));
  EXPECT_EQ(error, "expected a JSON object of profile fields");
  EXPECT_FALSE(parseDeviceProfile("{not json", profile, error));
  EXPECT_EQ(error.rfind("not JSON: not valid JSON at byte 3: ", 0), 0u) << error;
  // A field named twice: which one counts would be a guess (LLVM's parser took the last).
  EXPECT_FALSE(parseDeviceProfile(R"({"launch_s": 1e-6, "launch_s": 2e-6})", profile, error));
  EXPECT_EQ(error, "not JSON: duplicate key \"launch_s\"");
  // A size past 2^63 bytes would not convert to uint64 (undefined behaviour).
  EXPECT_FALSE(parseDeviceProfile(R"({"device_memory_bytes": 1e30})", profile, error));
  EXPECT_EQ(error, "field 'device_memory_bytes' must be a positive number of bytes below 2^63");
}

TEST(DeviceProfile, MissingFileNamesIt) {
  DeviceProfile profile;
  std::string error;
  EXPECT_FALSE(loadDeviceProfile("/nonexistent/profile.json", profile, error));
  EXPECT_EQ(error.rfind("/nonexistent/profile.json: cannot read: ", 0), 0u) << error;
}

} // namespace
} // namespace megatrain
