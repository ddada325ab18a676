// ProfileJsonTest.cpp - megatrain-profile's JSON writer against the compiler's device profile reader.
#include "megatrain/plan/DeviceProfile.h"
#include "megatrain/plan/Json.h"
#include "megatrain/plan/ProfileJson.h"


#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <unistd.h>

namespace megatrain {
namespace {

// The compiler's JSON of a profile, as key -> value (every field, from its kFields).
nlohmann::json compilerFields(const DeviceProfile &profile) {
  nlohmann::json parsed = parseJson(deviceProfileToJson(profile), "the compiler's profile JSON");
  EXPECT_TRUE(parsed.is_object());
  return parsed;
}

// A number field of `object`, or nullopt.
std::optional<double> numberField(const nlohmann::json &object, const char *key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number())
    return std::nullopt;
  return it->get<double>();
}

// A profile with every field set to a distinct value no default has, with
// all 17 significant digits in use.
MeasuredProfile everyField() {
  MeasuredProfile measured;
  measured.name = "NVIDIA H200 \"test\" \\ card";
  measured.deviceMemoryBytes = 150121283584ull;
  double scale = 1.2345678901234567;
  for (const ProfileField &field : profileFields()) {
    measured.set(field.key, field.ceiling * scale);
    scale += 0.0731234567890123;
  }
  return measured;
}

TEST(ProfileJson, WritesTheSameFieldsTheCompilerKnows) {
  std::set<std::string> compiler, writer = {"name", "device_memory_bytes", "host_memory_bytes"};
  const nlohmann::json fields = compilerFields(DeviceProfile());
  for (const auto &entry : fields.items())
    compiler.insert(entry.key());
  for (const ProfileField &field : profileFields())
    writer.insert(field.key);
  EXPECT_EQ(writer, compiler);
  EXPECT_EQ(profileFields().size() + 3, compiler.size());
}

TEST(ProfileJson, CeilingsAreTheCompilerDefaults) {
  // The table megatrain-profile prints compares with the figures the compiler
  // assumes when a field is absent (docs/hardware.md's H200).
  const nlohmann::json defaults = compilerFields(DeviceProfile());
  for (const ProfileField &field : profileFields()) {
    std::optional<double> value = numberField(defaults, field.key);
    ASSERT_TRUE(value) << field.key;
    EXPECT_DOUBLE_EQ(field.ceiling, *value) << field.key;
  }
}

TEST(ProfileJson, EveryFieldRoundTripsThroughTheCompilersReader) {
  const MeasuredProfile measured = everyField();
  DeviceProfile profile;
  std::string error;
  ASSERT_TRUE(parseDeviceProfile(profileJson(measured), profile, error)) << error;
  EXPECT_EQ(profile.name, measured.name);
  EXPECT_EQ(profile.deviceMemoryBytes, measured.deviceMemoryBytes);
  const nlohmann::json read = compilerFields(profile);
  for (const ProfileField &field : profileFields()) {
    std::optional<double> value = numberField(read, field.key);
    ASSERT_TRUE(value) << field.key;
    EXPECT_EQ(*value, *measured.get(field.key)) << field.key << " must read back exactly";
  }
  // Spot checks through the struct's own members.
  EXPECT_EQ(profile.matmulBf16, *measured.get("matmul_bf16_flops"));
  EXPECT_EQ(profile.launchS, *measured.get("launch_s"));
  EXPECT_EQ(profile.hostAdamWParamsPerS, *measured.get("host_adamw_params_per_s"));
}

TEST(ProfileJson, OmittedFiguresKeepTheCompilersDefaults) {
  // No --disk: the disk fields are not written, and the compiler keeps its own.
  MeasuredProfile measured = everyField();
  MeasuredProfile withoutDisk;
  withoutDisk.name = measured.name;
  withoutDisk.deviceMemoryBytes = measured.deviceMemoryBytes;
  for (const auto &figure : measured.figures)
    if (figure.first.rfind("disk_", 0) != 0)
      withoutDisk.set(figure.first, figure.second);
  const std::string json = profileJson(withoutDisk);
  EXPECT_EQ(json.find("disk_"), std::string::npos) << json;
  DeviceProfile profile, defaults;
  std::string error;
  ASSERT_TRUE(parseDeviceProfile(json, profile, error)) << error;
  EXPECT_EQ(profile.diskReadBytesPerS, defaults.diskReadBytesPerS);
  EXPECT_EQ(profile.diskWriteBytesPerS, defaults.diskWriteBytesPerS);
  EXPECT_EQ(profile.h2dBytesPerS, *measured.get("h2d_bytes_per_s"));
}

TEST(ProfileJson, RefusesWhatTheCompilerWouldRefuse) {
  MeasuredProfile measured;
  measured.set("h2d_bandwidth", 25e9);
  EXPECT_THROW(profileJson(measured), std::invalid_argument);
  for (double bad : {0.0, -1.0, std::numeric_limits<double>::infinity(), std::nan("")}) {
    MeasuredProfile one;
    one.set("launch_s", bad);
    EXPECT_THROW(profileJson(one), std::invalid_argument) << bad;
  }
  MeasuredProfile replaced;
  replaced.set("launch_s", -1.0);
  replaced.set("launch_s", 5e-6);  // set replaces: one field, the later value
  EXPECT_EQ(replaced.figures.size(), 1u);
  DeviceProfile profile;
  std::string error;
  ASSERT_TRUE(parseDeviceProfile(profileJson(replaced), profile, error)) << error;
  EXPECT_EQ(profile.launchS, 5e-6);
}

TEST(ProfileJson, TheGpuMachinesCheckerAcceptsItAndCatchesAMissingField) {
  // tests/gpu/check_profile.py stands in for the compiler on the GPU machine;
  // its field list must be this writer's.
  const std::string script = std::string(MEGATRAIN_SOURCE_DIR) + "/tests/gpu/check_profile.py";
  const std::string path = ::testing::TempDir() + "profile_json_test." + std::to_string(::getpid()) + ".json";
  auto check = [&](const MeasuredProfile &measured, const std::string &flags) {
    std::ofstream(path) << profileJson(measured);
    const std::string command = "python3 " + script + " " + flags + " " + path + " > /dev/null";
    return std::system(command.c_str());
  };
  MeasuredProfile full = everyField();
  EXPECT_EQ(check(full, "--disk"), 0);
  // megatrain-profile writes the machine's memory where it reads its pages.
  MeasuredProfile withHost = full;
  withHost.hostMemoryBytes = 134'217'728'000ull;
  EXPECT_EQ(check(withHost, "--disk"), 0) << "checker refused host_memory_bytes";
  for (const ProfileField &field : profileFields()) {
    MeasuredProfile missing;
    missing.name = full.name;
    missing.deviceMemoryBytes = full.deviceMemoryBytes;
    for (const auto &figure : full.figures)
      if (figure.first != field.key)
        missing.set(figure.first, figure.second);
    EXPECT_NE(check(missing, "--disk"), 0) << "checker missed the absence of " << field.key;
  }
  std::remove(path.c_str());
}

TEST(ProfileJson, NameReadsBackFromTheCompilersHeaderText) {
  // megatrain-inspect's "device" row: the name from the JSON the compiler puts
  // in Header.device_profile, quotes, backslashes and all (a search for the
  // next quote used to cut it at the first escaped one).
  DeviceProfile profile;
  profile.name = "NVIDIA H200 \"test\" \\ card";
  EXPECT_EQ(profileName(deviceProfileToJson(profile)), profile.name);
  EXPECT_EQ(profileName(profileJson(everyField())), everyField().name);
  EXPECT_EQ(profileName(R"({"name":"bench-card","launch_s":4e-06})"), "bench-card");
  EXPECT_EQ(profileName(R"({"name": "caf\u00e9"})"), "caf\xc3\xa9");
  // Anything else has no name, and nothing throws.
  for (const char *text : {"", "h200", R"({"name": "cut)", R"({"name":"a"} x)", R"(["name", "a"])", R"({"name": 3})",
                           R"({"launch_s": 4e-06})", R"({"name": "a", "name": "b"})", "{\"name\": \"\xff\"}"})
    EXPECT_EQ(profileName(text), std::nullopt) << text;
}

} // namespace
} // namespace megatrain
