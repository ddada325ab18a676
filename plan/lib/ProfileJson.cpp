// ProfileJson.cpp - writes a measured device profile as JSON; reads a profile's name back.
#include "megatrain/plan/ProfileJson.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "megatrain/plan/Error.h"
#include "megatrain/plan/Json.h"

namespace megatrain {

const std::vector<ProfileField>& profileFields() {
  // Ceilings: docs/hardware.md, one H200, 2026-11-30 (the compiler's defaults).
  static const std::vector<ProfileField> fields = {
      {"matmul_fp32_flops", 51e12, 1e12, "TFLOP/s", "matmul fp32 (no TF32)"},
      {"matmul_tf32_flops", 395e12, 1e12, "TFLOP/s", "matmul tf32"},
      {"matmul_bf16_flops", 777e12, 1e12, "TFLOP/s", "matmul bf16, fp32 accumulate"},
      {"hbm_bytes_per_s", 4.2e12, 1e12, "TB/s", "device copy (read + write)"},
      {"h2d_bytes_per_s", 54.2e9, 1e9, "GB/s", "host-to-device, pinned"},
      {"d2h_bytes_per_s", 55.0e9, 1e9, "GB/s", "device-to-host, pinned"},
      {"duplex_bytes_per_s", 83.4e9, 1e9, "GB/s", "both directions at once, total"},
      {"host_adamw_params_per_s", 3.5e9, 1e9, "G params/s", "host AdamW"},
      {"host_bytes_per_s", 90.8e9, 1e9, "GB/s", "host a + b -> c (3 x 4 B / element)"},
      {"disk_read_bytes_per_s", 1.4e9, 1e9, "GB/s", "disk read, direct I/O"},
      {"disk_write_bytes_per_s", 1.6e9, 1e9, "GB/s", "disk write, direct I/O"},
      {"launch_s", 4e-6, 1e-6, "us", "empty kernel launch"},
  };
  return fields;
}

const ProfileField* findProfileField(const std::string& key) {
  for (const ProfileField& field : profileFields())
    if (key == field.key) return &field;
  return nullptr;
}

void MeasuredProfile::set(const std::string& key, double value) {
  for (auto& figure : figures)
    if (figure.first == key) {
      figure.second = value;
      return;
    }
  figures.emplace_back(key, value);
}

std::optional<double> MeasuredProfile::get(const std::string& key) const {
  for (const auto& figure : figures)
    if (figure.first == key) return figure.second;
  return std::nullopt;
}

namespace {

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", c);
      out += escape;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

}  // namespace

std::string profileJson(const MeasuredProfile& profile) {
  std::vector<std::string> lines;
  if (!profile.name.empty()) lines.push_back("\"name\": " + quoted(profile.name));
  if (profile.deviceMemoryBytes > 0)
    lines.push_back("\"device_memory_bytes\": " + std::to_string(profile.deviceMemoryBytes));
  if (profile.hostMemoryBytes > 0)
    lines.push_back("\"host_memory_bytes\": " + std::to_string(profile.hostMemoryBytes));
  // The compiler's order, whatever order the figures were measured in.
  for (const ProfileField& field : profileFields()) {
    const std::optional<double> value = profile.get(field.key);
    if (!value) continue;
    if (!(*value > 0) || !std::isfinite(*value))
      throw std::invalid_argument(std::string("profile field '") + field.key +
                                  "' must be a positive number, got " + number(*value));
    lines.push_back("\"" + std::string(field.key) + "\": " + number(*value));
  }
  for (const auto& figure : profile.figures)
    if (!findProfileField(figure.first))
      throw std::invalid_argument("'" + figure.first + "' is not a device profile field");
  std::string json = "{";
  for (size_t i = 0; i < lines.size(); ++i) json += (i ? ",\n  " : "\n  ") + lines[i];
  return json + "\n}\n";
}

std::optional<std::string> profileName(const std::string& json) {
  nlohmann::json parsed;
  try {
    parsed = parseJson(json, "device profile");
  } catch (const Error&) {
    return std::nullopt;
  }
  if (!parsed.is_object()) return std::nullopt;
  const auto name = parsed.find("name");
  if (name == parsed.end() || !name->is_string()) return std::nullopt;
  return name->get<std::string>();
}

}  // namespace megatrain
