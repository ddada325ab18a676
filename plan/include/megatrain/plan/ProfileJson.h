// ProfileJson.h - the device profile a measurement writes, as the JSON megatrain-compile --device-profile reads.
//
// A DeviceProfile (DeviceProfile.h) has every field, the H200's figure where
// none was given; a measurement writes only what it measured (no disk figures
// without --disk), with each field's ceiling beside it for its table, so this
// is a second writer of the same fields. The field names are those of
// plan/lib/DeviceProfile.cpp (kFields);
// tests/plan/ProfileJsonTest.cpp checks that every one written here parses
// there and that the two lists name the same fields.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace megatrain {

// One rate field of the profile, with docs/hardware.md's H200 figure beside it (the
// compiler's default for the field) and how to print it for a person.
struct ProfileField {
  const char* key;       // JSON name, e.g. "h2d_bytes_per_s"
  double ceiling;        // the H200 figure of docs/hardware.md
  double displayScale;   // value / displayScale is printed ...
  const char* unit;      // ... in this unit, e.g. "GB/s"
  const char* what;      // a few words, e.g. "host-to-device, pinned"
};

// Every rate field, in the compiler's order (the name and device_memory_bytes
// are separate members of MeasuredProfile).
const std::vector<ProfileField>& profileFields();

// Looks a field up by its JSON name; nullptr when there is none.
const ProfileField* findProfileField(const std::string& key);

// What a measurement found. A figure left empty (e.g. the disk rates when no
// disk was measured) is omitted, so the compiler keeps its default for it.
struct MeasuredProfile {
  std::string name;              // the device's name
  uint64_t deviceMemoryBytes = 0;  // 0: omitted
  uint64_t hostMemoryBytes = 0;    // 0: omitted
  std::vector<std::pair<std::string, double>> figures;  // key -> value

  void set(const std::string& key, double value);  // replaces an earlier value
  std::optional<double> get(const std::string& key) const;
};

// The profile as one JSON object, one field per line. Numbers are written with
// 17 significant digits, so they read back exactly. Throws std::invalid_argument
// on a key that is not a profile field or a value that is not positive and
// finite (the compiler would refuse the file).
std::string profileJson(const MeasuredProfile& profile);

// The "name" of a device profile's JSON, such as the text the compiler stores
// in a plan's Header.device_profile (megatrain-inspect's "device" row); nullopt
// when the text is not JSON (parseJson, Json.h), not an object, or its "name"
// is missing or not a string.
std::optional<std::string> profileName(const std::string& json);

}  // namespace megatrain
