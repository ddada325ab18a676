// WeightSource.h - where a run's initial parameter values come from: an ONNX model, safetensors, or a seeded init.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "megatrain/plan/plan.pb.h"

namespace megatrain::runtime {

// Values for the plan's PARAMETER tensors, asked for one at a time by the
// name the plan gives as the tensor's `source`. Implementations: OnnxWeights
// (initializers), SafetensorsWeights (Hugging Face checkpoints) and
// NormalInit (--init normal:STD). Reading is const; a source may be asked for
// the same name twice.
class WeightSource {
 public:
  virtual ~WeightSource() = default;

  // What the messages call this source: a path, or "--init normal:0.02".
  virtual const std::string& path() const = 0;

  // Writes parameter `name` converted to `dtype` (F32 or F64) into `out`,
  // which holds exactly elements * dtypeSize(dtype) bytes. Error naming the
  // source and the parameter when it is missing, its shape differs from
  // `shape`, its type cannot be converted, or its data is short or corrupt.
  virtual void read(const std::string& name, plan::DType dtype, const std::vector<int64_t>& shape,
                    void* out, size_t outBytes) const = 0;

  // Lines worth telling the user once loading is done (a tied weight
  // resolved, ...); empty by default.
  virtual std::vector<std::string> notes() const { return {}; }
};

// What PATH holds, by what it is: a directory (a Hugging Face checkpoint:
// model.safetensors or model.safetensors.index.json), a file ending in
// .safetensors, else an ONNX model. Error if PATH does not exist.
enum class WeightFormat { Onnx, SafetensorsFile, SafetensorsDirectory };
WeightFormat weightFormat(const std::string& path);

// Opens PATH as weightFormat says.
std::unique_ptr<WeightSource> openWeights(const std::string& path);

// Up to `count` of `candidates` closest to `name` by edit distance, closest
// first (for "did you mean" lists in messages).
std::vector<std::string> nearestNames(const std::string& name, const std::vector<std::string>& candidates,
                                      size_t count = 3);

}  // namespace megatrain::runtime
