// DType.cpp - sizes, names and shape arithmetic for the plan's element types.
#include "megatrain/plan/DType.h"

#include <limits>

namespace megatrain {

size_t dtypeSize(plan::DType dtype) {
  switch (dtype) {
    case plan::F64:
    case plan::I64:
      return 8;
    case plan::F32:
    case plan::I32:
      return 4;
    case plan::BF16:
    case plan::F16:
      return 2;
    case plan::U8:
    case plan::BOOL:
      return 1;
    default:
      return 0;
  }
}

const char* dtypeName(plan::DType dtype) {
  switch (dtype) {
    case plan::F32: return "f32";
    case plan::F64: return "f64";
    case plan::BF16: return "bf16";
    case plan::F16: return "f16";
    case plan::I64: return "i64";
    case plan::I32: return "i32";
    case plan::U8: return "u8";
    case plan::BOOL: return "bool";
    default: return "unspecified";
  }
}

bool isFloating(plan::DType dtype) {
  return dtype == plan::F32 || dtype == plan::F64 || dtype == plan::BF16 ||
         dtype == plan::F16;
}

int64_t elementCount(const google::protobuf::RepeatedField<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0) return -1;
    if (dim != 0 && count > std::numeric_limits<int64_t>::max() / dim) return -1;
    count *= dim;
  }
  return count;
}

std::string formatShape(const google::protobuf::RepeatedField<int64_t>& shape) {
  std::string text = "[";
  for (int i = 0; i < shape.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

const char* roleName(plan::Role role) {
  switch (role) {
    case plan::PARAMETER: return "PARAMETER";
    case plan::PARAMETER_COPY: return "PARAMETER_COPY";
    case plan::GRADIENT: return "GRADIENT";
    case plan::OPTIMIZER_STATE: return "OPTIMIZER_STATE";
    case plan::ACTIVATION: return "ACTIVATION";
    case plan::INPUT: return "INPUT";
    case plan::CONSTANT: return "CONSTANT";
    case plan::LOSS: return "LOSS";
    case plan::LOSS_READOUT: return "LOSS_READOUT";
    case plan::OUTPUT_READOUT: return "OUTPUT_READOUT";
    case plan::OFFLOADED: return "OFFLOADED";
    case plan::PARAMETER_COMPUTE: return "PARAMETER_COMPUTE";
    case plan::STATE_STAGE: return "STATE_STAGE";
    default: return "ROLE_UNSPECIFIED";
  }
}

const char* tierName(plan::Tier tier) {
  switch (tier) {
    case plan::DEVICE: return "DEVICE";
    case plan::HOST_PINNED: return "HOST_PINNED";
    case plan::DISK: return "DISK";
    default: return "TIER_UNSPECIFIED";
  }
}

}  // namespace megatrain
