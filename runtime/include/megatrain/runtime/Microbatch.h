// Microbatch.h - the graph inputs of micro-batches (megatrain-compile --microbatches N).
//
// A plan compiled with N micro-batches holds each graph input N times: the
// plain name for micro-batch 0 and "<name>@<k>" for micro-batch k >= 1 (both
// the tensor's name and its source). These helpers find the copies of one input.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "megatrain/plan/plan.pb.h"

namespace megatrain::runtime {

// k when `name` is "<base>@<k>" with k >= 1 in decimal digits, 0 when name is
// `base` itself, -1 otherwise.
inline int64_t microbatchIndex(const std::string& name, const std::string& base) {
  if (name == base) return 0;
  if (name.size() < base.size() + 2 || name.compare(0, base.size(), base) != 0 || name[base.size()] != '@') return -1;
  const std::string digits = name.substr(base.size() + 1);
  if (digits.empty() || digits.size() > 9 || digits[0] == '0' ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stoll(digits);
}

// The graph input name of an INPUT tensor: its source, or its name when it has none.
inline const std::string& inputName(const plan::Tensor& tensor) {
  return tensor.source().empty() ? tensor.name() : tensor.source();
}

// The names of the INPUT tensors that are `base` or one of its micro-batch
// copies "<base>@<k>", in micro-batch order.
inline std::vector<std::string> microbatchInputs(const plan::Plan& plan, const std::string& base) {
  std::vector<std::pair<int64_t, std::string>> found;
  for (const plan::Tensor& tensor : plan.tensors()) {
    if (tensor.role() != plan::INPUT) continue;
    const int64_t k = microbatchIndex(inputName(tensor), base);
    if (k >= 0) found.emplace_back(k, inputName(tensor));
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> names;
  for (auto& [k, name] : found) names.push_back(std::move(name));
  return names;
}

}  // namespace megatrain::runtime
