// PlanLoader.cpp - reads a plan file and checks its magic, format version and checksum.
#include "megatrain/runtime/PlanLoader.h"

#include <climits>
#include <fstream>
#include <iterator>

#include <google/protobuf/io/coded_stream.h>

#include "megatrain/plan/Error.h"
#include "megatrain/plan/FormatVersion.h"
#include "megatrain/plan/PlanChecksum.h"

namespace megatrain::runtime {

plan::Plan parsePlan(const std::string& bytes, const std::string& label) {
  plan::Plan plan;
  google::protobuf::io::CodedInputStream input(reinterpret_cast<const uint8_t*>(bytes.data()),
                                               static_cast<int>(bytes.size()));
  // Plans carry constants inline; lift protobuf's default 64 MiB cap.
  input.SetTotalBytesLimit(INT_MAX);
  if (bytes.size() > static_cast<size_t>(INT_MAX) || !plan.ParseFromCodedStream(&input) ||
      !input.ConsumedEntireMessage())
    throw Error(label + ": not a megatrain plan (protobuf parse failed)");
  if (plan.magic() != kPlanMagic) {
    // Another protobuf message can parse as a Plan; the magic tells them apart.
    throw Error(label + ": not a megatrain plan (magic '" + plan.magic().substr(0, 32) +
                "', expected '" + kPlanMagic + "')");
  }
  const uint32_t major = plan.header().format_major();
  const uint32_t minor = plan.header().format_minor();
  const std::string version = std::to_string(major) + "." + std::to_string(minor);
  if (major != kPlanFormatMajor)
    throw Error(label + ": format version " + version + ", this runtime reads " +
                std::to_string(kPlanFormatMajor) + ".x");
  if (minor > kPlanFormatMinor)
    throw Error(label + ": format version " + version + ", this runtime reads " +
                std::to_string(kPlanFormatMajor) + "." + std::to_string(kPlanFormatMinor) +
                " at most (update the runtime)");
  checkPlanChecksum(plan, label);
  return plan;
}

plan::Plan loadPlan(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(path + ": read failed");
  return parsePlan(bytes, path);
}

}  // namespace megatrain::runtime
