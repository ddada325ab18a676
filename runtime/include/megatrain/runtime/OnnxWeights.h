// OnnxWeights.h - the initializers of an ONNX model, read as parameter values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "megatrain/plan/plan.pb.h"
#include "megatrain/runtime/WeightSource.h"

namespace onnx {
class ModelProto;
class TensorProto;
}  // namespace onnx

namespace megatrain::runtime {

// Bytes per element of an ONNX TensorProto data type in raw_data; 0 for
// STRING and for the types this runtime does not size (float8, 4-bit).
size_t onnxElementSize(int dataType);

// An initializer's external_data entries, parsed: `location` as written, and
// `offset` and `length` (absent: 0 and "to be computed"). Error naming the
// initializer and the field for a missing location or a number that is not a
// non-negative decimal integer.
struct ExternalDataRef {
  std::string location;
  uint64_t offset = 0;
  bool hasLength = false;
  uint64_t length = 0;
};
ExternalDataRef parseExternalData(const onnx::TensorProto& tensor, const std::string& what);

// Parses the model once and indexes its graph initializers by name. Values are
// read on request, from the model itself (float_data, double_data, int64_data,
// int32_data, raw_data) or from external data files relative to the model's
// directory.
class OnnxWeights : public WeightSource {
 public:
  explicit OnnxWeights(const std::string& modelPath);
  ~OnnxWeights() override;
  OnnxWeights(OnnxWeights&&) noexcept;
  OnnxWeights& operator=(OnnxWeights&&) noexcept;

  const std::string& path() const override { return path_; }
  bool contains(const std::string& name) const;
  std::vector<std::string> names() const;

  // The initializer's dims; Error if missing.
  std::vector<int64_t> shape(const std::string& name) const;

  // Writes initializer `name` converted to `dtype` (F32 or F64) into `out`,
  // which holds exactly elements * dtypeSize(dtype) bytes. Error if the
  // initializer is missing, its shape differs from `shape`, its type cannot be
  // converted, or its data is short.
  void read(const std::string& name, plan::DType dtype, const std::vector<int64_t>& shape,
            void* out, size_t outBytes) const override;

  // The parsed model, for writers that copy it (ModelExport).
  const onnx::ModelProto& model() const { return *model_; }

  // The bytes an initializer with data_location EXTERNAL points at (`location`
  // relative to the model's directory, `offset`, `length`); `elementBytes` is
  // the size expected when `length` is absent. Error if the file is short, or
  // if `location` leaves the model's directory (absolute, a `..` component, or
  // a symlink resolving outside it), as onnxruntime refuses too. Nothing is
  // allocated before offset and length are checked against the file's size.
  std::string readExternal(const onnx::TensorProto& tensor, size_t elementBytes) const;

 private:
  const onnx::TensorProto& find(const std::string& name) const;

  std::string path_;
  std::string directory_;
  std::unique_ptr<onnx::ModelProto> model_;
  std::unordered_map<std::string, const onnx::TensorProto*> byName_;
};

}  // namespace megatrain::runtime
