// OnnxWeights.h - the initializers of an ONNX model, read as parameter values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "megatrain/plan/plan.pb.h"

namespace onnx {
class ModelProto;
class TensorProto;
}  // namespace onnx

namespace megatrain::runtime {

// Parses the model once and indexes its graph initializers by name. Values are
// read on request, from the model itself (float_data, double_data, int64_data,
// int32_data, raw_data) or from external data files relative to the model's
// directory.
class OnnxWeights {
 public:
  explicit OnnxWeights(const std::string& modelPath);
  ~OnnxWeights();
  OnnxWeights(OnnxWeights&&) noexcept;
  OnnxWeights& operator=(OnnxWeights&&) noexcept;

  const std::string& path() const { return path_; }
  bool contains(const std::string& name) const;
  std::vector<std::string> names() const;

  // The initializer's dims; Error if missing.
  std::vector<int64_t> shape(const std::string& name) const;

  // Writes initializer `name` converted to `dtype` (F32 or F64) into `out`,
  // which holds exactly elements * dtypeSize(dtype) bytes. Error if the
  // initializer is missing, its shape differs from `shape`, its type cannot be
  // converted, or its data is short.
  void read(const std::string& name, plan::DType dtype, const std::vector<int64_t>& shape,
            void* out, size_t outBytes) const;

 private:
  const onnx::TensorProto& find(const std::string& name) const;

  std::string path_;
  std::string directory_;
  std::unique_ptr<onnx::ModelProto> model_;
  std::unordered_map<std::string, const onnx::TensorProto*> byName_;
};

}  // namespace megatrain::runtime
