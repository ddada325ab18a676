// WeightSource.cpp - picks the reader for a --weights path, and the "nearest names" of a missing one.
#include "megatrain/runtime/WeightSource.h"

#include <algorithm>
#include <filesystem>

#include "megatrain/plan/Error.h"
#include "megatrain/runtime/OnnxWeights.h"
#include "megatrain/runtime/SafetensorsReader.h"

namespace megatrain::runtime {

WeightFormat weightFormat(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (!fs::exists(status)) throw Error(path + ": no such file or directory");
  if (fs::is_directory(status)) return WeightFormat::SafetensorsDirectory;
  if (fs::path(path).extension() == ".safetensors") return WeightFormat::SafetensorsFile;
  return WeightFormat::Onnx;
}

std::unique_ptr<WeightSource> openWeights(const std::string& path) {
  if (weightFormat(path) == WeightFormat::Onnx) return std::make_unique<OnnxWeights>(path);
  return std::make_unique<SafetensorsWeights>(path);
}

namespace {

// Levenshtein distance, two rows.
size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(previous, current);
  }
  return previous[b.size()];
}

}  // namespace

std::vector<std::string> nearestNames(const std::string& name, const std::vector<std::string>& candidates,
                                      size_t count) {
  std::vector<std::pair<size_t, const std::string*>> scored;
  scored.reserve(candidates.size());
  for (const std::string& candidate : candidates) scored.emplace_back(editDistance(name, candidate), &candidate);
  const size_t keep = std::min(count, scored.size());
  std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(keep), scored.end(),
                    [](const auto& a, const auto& b) { return a.first != b.first ? a.first < b.first : *a.second < *b.second; });
  std::vector<std::string> nearest;
  for (size_t i = 0; i < keep; ++i) nearest.push_back(*scored[i].second);
  return nearest;
}

}  // namespace megatrain::runtime
