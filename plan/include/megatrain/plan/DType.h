// DType.h - sizes, names and shape arithmetic for the plan's element types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "megatrain/plan/Bf16.h"
#include "megatrain/plan/plan.pb.h"

namespace megatrain {

// Bytes per element; 0 for DTYPE_UNSPECIFIED.
size_t dtypeSize(plan::DType dtype);

// Lower-case short name: "f32", "i64", ...
const char* dtypeName(plan::DType dtype);

bool isFloating(plan::DType dtype);

// Product of the dimensions (1 for a scalar); -1 if a dimension is negative or
// the product overflows.
int64_t elementCount(const google::protobuf::RepeatedField<int64_t>& shape);

// "[4, 3]"; "[]" for a scalar.
std::string formatShape(const google::protobuf::RepeatedField<int64_t>& shape);

const char* roleName(plan::Role role);

const char* tierName(plan::Tier tier);

}  // namespace megatrain
