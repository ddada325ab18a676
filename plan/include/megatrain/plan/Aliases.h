// Aliases.h - views in a plan (Tensor.alias_of, minor 8): the base tensor whose bytes each tensor is.
//
// A view is a tensor with `alias_of` set: its base's bytes read with another
// shape (docs/plan.md "Aliases"). Every analysis that follows accesses over
// the steps (the schedule verifier, event insertion, the simulator, the
// timeline, the executor's poisoning) treats an access of a view as an
// access of its base, and never frees or poisons a view by itself.
#pragma once

#include <cstdint>
#include <vector>

#include "megatrain/plan/plan.pb.h"

namespace megatrain {

// Per tensor id, the id of the tensor whose bytes it is: its base for a view,
// else itself. An alias_of that names no tensor, the tensor itself or another
// view maps to the tensor itself (the schedule verifier reports it).
std::vector<uint32_t> aliasBases(const plan::Plan& plan);

// Replaces every id in `ids` that `bases` covers by its base.
void mapToBases(const std::vector<uint32_t>& bases, std::vector<uint32_t>& ids);

// The number of views in the plan.
size_t countAliases(const plan::Plan& plan);

}  // namespace megatrain
