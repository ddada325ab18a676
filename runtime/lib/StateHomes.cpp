// StateHomes.cpp - where a plan keeps each parameter's training state, and its bytes per tier.
#include "megatrain/runtime/StateHomes.h"

#include <unordered_map>

namespace megatrain::runtime {

namespace {

bool isState(plan::Role role) {
  return role == plan::PARAMETER || role == plan::PARAMETER_COMPUTE || role == plan::GRADIENT ||
         role == plan::OPTIMIZER_STATE;
}

// "adam_m:w" -> "w"; a master's own name is its parameter.
std::string parameterOf(const plan::Tensor& tensor) {
  if (tensor.role() == plan::PARAMETER || tensor.role() == plan::PARAMETER_COMPUTE) return tensor.source();
  const std::string& name = tensor.name();
  const size_t colon = name.find(':');
  return colon == std::string::npos ? name : name.substr(colon + 1);
}

}  // namespace

double StateHomes::bytesPerParameter(plan::Tier tier) const {
  if (parameterElements == 0) return 0;
  return static_cast<double>(bytesPerTier[tier]) / static_cast<double>(parameterElements);
}

StateHomes computeStateHomes(const plan::Plan& plan) {
  StateHomes homes;
  std::unordered_map<std::string, size_t> index;
  for (const plan::Tensor& tensor : plan.tensors()) {
    if (tensor.role() != plan::PARAMETER) continue;
    ParameterHome home;
    home.name = tensor.name();
    home.tier = plan.pools(static_cast<int>(tensor.buffer().pool())).tier();
    home.elements = 1;
    for (int64_t dim : tensor.shape()) home.elements *= static_cast<uint64_t>(dim);
    homes.parameterElements += home.elements;
    ++homes.parametersPerTier[home.tier];
    index.emplace(tensor.source(), homes.parameters.size());
    homes.parameters.push_back(home);
  }
  for (const plan::Tensor& tensor : plan.tensors()) {
    if (!isState(tensor.role())) continue;
    const plan::Tier tier = plan.pools(static_cast<int>(tensor.buffer().pool())).tier();
    homes.bytesPerTier[tier] += tensor.buffer().size_bytes();
    auto it = index.find(parameterOf(tensor));
    if (it == index.end()) continue;
    ParameterHome& home = homes.parameters[it->second];
    home.stateBytes += tensor.buffer().size_bytes();
    // A disk home keeps its master on the host and its moments on disk.
    if (tier == plan::DISK && home.tier != plan::DISK) {
      --homes.parametersPerTier[home.tier];
      home.tier = plan::DISK;
      ++homes.parametersPerTier[plan::DISK];
    }
  }
  return homes;
}

}  // namespace megatrain::runtime
