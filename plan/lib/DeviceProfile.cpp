//===- DeviceProfile.cpp - device profile JSON ----------------------------===//
#include "megatrain/plan/DeviceProfile.h"

#include "megatrain/plan/Error.h"
#include "megatrain/plan/Json.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

namespace megatrain {

namespace {

struct Field {
  const char *key;
  double DeviceProfile::*member;
};

// One table drives parsing and printing, so the two cannot disagree.
const Field kFields[] = {
    {"matmul_fp32_flops", &DeviceProfile::matmulFp32},
    {"matmul_tf32_flops", &DeviceProfile::matmulTf32},
    {"matmul_bf16_flops", &DeviceProfile::matmulBf16},
    {"hbm_bytes_per_s", &DeviceProfile::hbmBytesPerS},
    {"h2d_bytes_per_s", &DeviceProfile::h2dBytesPerS},
    {"d2h_bytes_per_s", &DeviceProfile::d2hBytesPerS},
    {"duplex_bytes_per_s", &DeviceProfile::duplexBytesPerS},
    {"host_adamw_params_per_s", &DeviceProfile::hostAdamWParamsPerS},
    {"host_bytes_per_s", &DeviceProfile::hostBytesPerS},
    {"disk_read_bytes_per_s", &DeviceProfile::diskReadBytesPerS},
    {"disk_write_bytes_per_s", &DeviceProfile::diskWriteBytesPerS},
    {"launch_s", &DeviceProfile::launchS},
};

} // namespace

bool parseDeviceProfile(const std::string &json, DeviceProfile &profile,
                        std::string &error) {
  // parseJson (nlohmann-json, as every runtime reader): a malformed text, and an
  // object naming a field twice, are errors rather than a guess.
  nlohmann::json parsed;
  try {
    parsed = parseJson(json, "not JSON");
  } catch (const Error &e) {
    error = e.what();
    return false;
  }
  if (!parsed.is_object()) {
    error = "expected a JSON object of profile fields";
    return false;
  }
  auto positive = [](const nlohmann::json &v) {
    return v.is_number() && v.get<double>() > 0 && std::isfinite(v.get<double>());
  };
  for (const auto &[key, value] : parsed.items()) {
    if (key == "name") {
      if (!value.is_string()) {
        error = "field 'name' must be a string";
        return false;
      }
      profile.name = value.get<std::string>();
      continue;
    }
    if (key == "device_memory_bytes" || key == "host_memory_bytes") {
      // Below 2^63, so that the conversion to bytes is defined.
      if (!positive(value) || value.get<double>() >= 9.2e18) {
        error = "field '" + key + "' must be a positive number of bytes below 2^63";
        return false;
      }
      (key == "device_memory_bytes" ? profile.deviceMemoryBytes : profile.hostMemoryBytes) =
          static_cast<uint64_t>(value.get<double>());
      continue;
    }
    if (key == "kernel_efficiency") {
      if (!value.is_object()) {
        error = "field 'kernel_efficiency' must be an object of kernel name -> fraction of the "
                "roofline price, e.g. {\"matmul\": 0.92}";
        return false;
      }
      profile.kernelEfficiency.clear();
      for (const auto &[kernel, fraction] : value.items()) {
        // Above 1: faster than the roofline says, which a fit may find for a
        // kernel whose bytes the price overcounts; up to 4x is believable.
        if (!positive(fraction) || fraction.get<double>() > 4) {
          error = "field 'kernel_efficiency': '" + kernel + "' must be a number in (0, 4]";
          return false;
        }
        profile.kernelEfficiency[kernel] = fraction.get<double>();
      }
      continue;
    }
    const Field *field = nullptr;
    for (const Field &candidate : kFields)
      if (key == candidate.key)
        field = &candidate;
    if (!field) {
      error = "unknown field '" + key +
              "' (fields: name, device_memory_bytes, host_memory_bytes, kernel_efficiency";
      for (const Field &candidate : kFields)
        error += std::string(", ") + candidate.key;
      error += ")";
      return false;
    }
    if (!positive(value)) {
      error = "field '" + key + "' must be a positive number";
      return false;
    }
    profile.*(field->member) = value.get<double>();
  }
  return true;
}

bool loadDeviceProfile(const std::string &path, DeviceProfile &profile,
                       std::string &error) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (in)
    text << in.rdbuf();
  if (!in || in.bad()) {
    error = path + ": cannot read: " + std::strerror(errno);
    return false;
  }
  if (!parseDeviceProfile(text.str(), profile, error)) {
    error = path + ": " + error;
    return false;
  }
  return true;
}

std::string deviceProfileToJson(const DeviceProfile &profile) {
  // nlohmann's object keeps its keys sorted; doubles are printed so that they
  // read back exactly.
  nlohmann::json object = nlohmann::json::object();
  object["name"] = profile.name;
  object["device_memory_bytes"] = profile.deviceMemoryBytes;
  object["host_memory_bytes"] = profile.hostMemoryBytes;
  for (const Field &field : kFields)
    object[field.key] = profile.*(field.member);
  if (!profile.kernelEfficiency.empty()) {
    nlohmann::json efficiency = nlohmann::json::object();
    for (const auto &[kernel, fraction] : profile.kernelEfficiency)
      efficiency[kernel] = fraction;
    object["kernel_efficiency"] = std::move(efficiency);
  }
  return object.dump();
}

} // namespace megatrain
