// Aliases.cpp - the base tensor of each view in a plan (Tensor.alias_of).
#include "megatrain/plan/Aliases.h"

namespace megatrain {

std::vector<uint32_t> aliasBases(const plan::Plan& plan) {
  const uint32_t count = static_cast<uint32_t>(plan.tensors_size());
  std::vector<uint32_t> bases(count);
  for (uint32_t id = 0; id < count; ++id) {
    const plan::Tensor& tensor = plan.tensors(static_cast<int>(id));
    bases[id] = id;
    if (!tensor.has_alias_of()) continue;
    const uint32_t base = tensor.alias_of();
    // A bad alias_of is the verifier's to name; here it changes nothing.
    if (base < count && base != id && !plan.tensors(static_cast<int>(base)).has_alias_of()) bases[id] = base;
  }
  return bases;
}

void mapToBases(const std::vector<uint32_t>& bases, std::vector<uint32_t>& ids) {
  for (uint32_t& id : ids)
    if (id < bases.size()) id = bases[id];
}

size_t countAliases(const plan::Plan& plan) {
  size_t count = 0;
  for (const plan::Tensor& tensor : plan.tensors()) count += tensor.has_alias_of() ? 1 : 0;
  return count;
}

}  // namespace megatrain
