// PlanChecksum.cpp - the plan's CRC-32 over its deterministic serialization.
#include "megatrain/plan/PlanChecksum.h"

#include <zlib.h>

#include <cstdio>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "megatrain/plan/Error.h"
#include "megatrain/plan/FormatVersion.h"

namespace megatrain {
namespace {

std::string hex(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

}  // namespace

uint32_t computePlanChecksum(const plan::Plan& plan) {
  plan::Plan unsealed = plan;
  unsealed.mutable_header()->clear_checksum();
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!unsealed.SerializeToCodedStream(&coded)) throw Error("plan checksum: the plan does not serialize");
  }
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes lengths as uInt: feed large plans in pieces.
  constexpr size_t kPiece = size_t(1) << 30;
  for (size_t at = 0; at < bytes.size(); at += kPiece) {
    const size_t piece = bytes.size() - at < kPiece ? bytes.size() - at : kPiece;
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + at), static_cast<uInt>(piece));
  }
  return static_cast<uint32_t>(crc);
}

void sealPlan(plan::Plan& plan) {
  requirePlanFormatMinor(*plan.mutable_header(), kPlanMinorChecksum);
  plan.mutable_header()->set_checksum(computePlanChecksum(plan));
}

void checkPlanChecksum(const plan::Plan& plan, const std::string& label) {
  if (plan.header().format_minor() < kPlanMinorChecksum) return;
  if (!plan.header().has_checksum())
    throw Error(label + ": the plan has no checksum (format " + std::to_string(plan.header().format_major()) + "." +
                std::to_string(plan.header().format_minor()) + " requires one); recompile it");
  const uint32_t expected = computePlanChecksum(plan);
  if (plan.header().checksum() != expected)
    throw Error(label + ": checksum mismatch: the plan says " + hex(plan.header().checksum()) +
                ", its contents give " + hex(expected) + "; the file is corrupt or was edited (recompile it)");
}

}  // namespace megatrain
