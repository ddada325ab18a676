// WeightLoading.h - megatrain-run's initial weights: --weights (ONNX, safetensors, a Hugging Face directory) or --init, with progress.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "megatrain/runtime/WeightSource.h"

namespace megatrain::runtime {
class Executor;
}

namespace megatrain::runtime::tools {

// --weights PATH, or --init normal:STD seeded by --init-seed (default --seed).
// Error when both or neither are given (`resuming`: neither is fine, the
// checkpoint has the weights).
std::unique_ptr<WeightSource> openInitialWeights(const std::string& weights, const std::string& init,
                                                 std::optional<uint64_t> initSeed, uint64_t seed);

// Fills the executor's parameters from `source`. Loads of 1 GiB or more
// report progress on stderr every 2 seconds (bytes, percent, GB/s); every
// load adds a summary line and the source's notes (a tie resolved) to `notes`.
void loadInitialWeights(Executor& executor, const WeightSource& source, std::vector<std::string>& notes);

}  // namespace megatrain::runtime::tools
