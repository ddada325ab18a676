// KernelRegistry.h - a backend's compute functions, registered against the kernel manifest.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "megatrain/kernels/Manifest.h"

namespace megatrain::kernels {

// `Entry` is what a backend keeps per kernel (its compute function, its
// scratch size function, ...). A name the manifest lacks, or one registered
// twice, is an Error when the registry is built, so a backend cannot drift
// from the manifest unnoticed.
template <typename Entry>
class KernelRegistry {
 public:
  struct Registered {
    const KernelSpec* spec = nullptr;
    Entry entry;
  };

  void add(const char* name, Entry entry) {
    const KernelSpec* spec = findKernelSpec(name);
    if (!spec) throw Error(std::string("kernel registry: '") + name + "' is not in the kernel manifest");
    if (!entries_.emplace(name, Registered{spec, entry}).second)
      throw Error(std::string("kernel registry: '") + name + "' is registered twice");
  }

  const Registered* find(std::string_view name) const {
    auto it = entries_.find(std::string(name));
    return it == entries_.end() ? nullptr : &it->second;
  }

  std::vector<std::string> names() const {
    std::vector<std::string> result;
    for (const auto& [name, registered] : entries_) result.push_back(name);
    return result;
  }

 private:
  std::unordered_map<std::string, Registered> entries_;
};

}  // namespace megatrain::kernels
