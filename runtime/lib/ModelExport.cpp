// ModelExport.cpp - trained parameters into a copy of the source ONNX model (inline or external data).
#include "megatrain/runtime/ModelExport.h"

#include <climits>
#include <cmath>
#include <cstring>
#include <optional>
#include <unordered_map>

#include "megatrain/plan/AtomicFile.h"
#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/runtime/Executor.h"
#include "megatrain/runtime/OnnxWeights.h"
#include "onnx/onnx.pb.h"

namespace megatrain::runtime {
namespace {

// Round to nearest, ties to even, as numpy's float32 -> float16 cast does;
// overflow gives infinity and NaN stays NaN.
uint16_t floatToHalf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  const uint32_t sign = (bits >> 16) & 0x8000;
  const uint32_t exponent = (bits >> 23) & 0xFF;
  uint32_t mantissa = bits & 0x7FFFFF;
  if (exponent == 0xFF) return static_cast<uint16_t>(sign | 0x7C00 | (mantissa ? 0x200 : 0));
  const int halfExponent = static_cast<int>(exponent) - 127 + 15;
  if (halfExponent >= 31) return static_cast<uint16_t>(sign | 0x7C00);
  auto roundShift = [](uint32_t full, int shift) {
    const uint32_t kept = full >> shift, rest = full & ((1u << shift) - 1), half = 1u << (shift - 1);
    return kept + ((rest > half || (rest == half && (kept & 1))) ? 1 : 0);
  };
  if (halfExponent <= 0) {
    // A half subnormal counts units of 2^-24; below half of one it is zero.
    if (halfExponent < -10) return static_cast<uint16_t>(sign);
    return static_cast<uint16_t>(sign | roundShift(mantissa | 0x800000, 14 - halfExponent));
  }
  // A carry out of the mantissa correctly bumps the exponent (up to infinity).
  const uint32_t rounded = roundShift((static_cast<uint32_t>(halfExponent) << 23) | mantissa, 13);
  return static_cast<uint16_t>(sign | rounded);
}

std::string joinDims(const std::vector<int64_t>& dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

// The master's values in the initializer's own ONNX data type, as raw_data bytes.
std::string convertToInitializer(const ParameterValues& values, int dataType, const std::string& what) {
  const size_t count = values.bytes.size() / dtypeSize(values.dtype);
  auto element = [&](size_t i) -> double {
    if (values.dtype == plan::F64) {
      double v;
      std::memcpy(&v, values.bytes.data() + 8 * i, 8);
      return v;
    }
    float v;
    std::memcpy(&v, values.bytes.data() + 4 * i, 4);
    return v;
  };
  std::string out(count * onnxElementSize(dataType), '\0');
  const bool sameType = (dataType == onnx::TensorProto::FLOAT && values.dtype == plan::F32) ||
                        (dataType == onnx::TensorProto::DOUBLE && values.dtype == plan::F64);
  if (sameType) {
    std::memcpy(out.data(), values.bytes.data(), out.size());
    return out;
  }
  for (size_t i = 0; i < count; ++i) {
    switch (dataType) {
      case onnx::TensorProto::FLOAT: {
        const float v = static_cast<float>(element(i));
        std::memcpy(out.data() + 4 * i, &v, 4);
        break;
      }
      case onnx::TensorProto::DOUBLE: {
        const double v = element(i);
        std::memcpy(out.data() + 8 * i, &v, 8);
        break;
      }
      case onnx::TensorProto::FLOAT16:
      case onnx::TensorProto::BFLOAT16: {
        // An f64 master rounds twice (to f32, then to 16 bits); masters are f32 in practice.
        const float v = static_cast<float>(element(i));
        const uint16_t bits = dataType == onnx::TensorProto::FLOAT16 ? floatToHalf(v) : floatToBf16(v);
        std::memcpy(out.data() + 2 * i, &bits, 2);
        break;
      }
      default:
        throw Error(what + " has ONNX data type " +
                    onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(dataType)) +
                    "; trained values can be written as FLOAT, DOUBLE, FLOAT16 or BFLOAT16 only");
    }
  }
  return out;
}

uint64_t elementsOf(const onnx::TensorProto& tensor) {
  uint64_t count = 1;
  for (int64_t dim : tensor.dims()) count *= static_cast<uint64_t>(dim);
  return count;
}

// The initializer's data as the model stores it (inline fields or the external length).
uint64_t storedBytes(const onnx::TensorProto& tensor, const std::string& modelPath) {
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    const ExternalDataRef ref = parseExternalData(tensor, modelPath + ": initializer '" + tensor.name() + "'");
    return ref.hasLength ? ref.length : elementsOf(tensor) * onnxElementSize(tensor.data_type());
  }
  uint64_t bytes = tensor.raw_data().size() + 4 * static_cast<uint64_t>(tensor.float_data_size()) +
                   4 * static_cast<uint64_t>(tensor.int32_data_size()) +
                   8 * static_cast<uint64_t>(tensor.int64_data_size()) +
                   8 * static_cast<uint64_t>(tensor.double_data_size()) +
                   8 * static_cast<uint64_t>(tensor.uint64_data_size());
  for (const std::string& text : tensor.string_data()) bytes += text.size();
  return bytes;
}

// Leaves only the tensor's description (name, dims, type, doc) so new data can be attached.
void clearData(onnx::TensorProto& tensor) {
  tensor.clear_float_data();
  tensor.clear_int32_data();
  tensor.clear_string_data();
  tensor.clear_int64_data();
  tensor.clear_double_data();
  tensor.clear_uint64_data();
  tensor.clear_raw_data();
  tensor.clear_external_data();
  tensor.clear_data_location();
}

void addEntry(onnx::TensorProto& tensor, const char* key, const std::string& value) {
  onnx::StringStringEntryProto* entry = tensor.add_external_data();
  entry->set_key(key);
  entry->set_value(value);
}

std::string baseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::vector<ParameterValues> readParameters(const Executor& executor) {
  std::vector<ParameterValues> parameters;
  for (const plan::Tensor& tensor : executor.plan().tensors()) {
    if (tensor.role() != plan::PARAMETER) continue;
    ParameterValues values;
    values.name = tensor.source();
    values.shape.assign(tensor.shape().begin(), tensor.shape().end());
    values.dtype = tensor.dtype();
    values.trainable = tensor.trainable();
    values.bytes = executor.readBytes(tensor.name());
    parameters.push_back(std::move(values));
  }
  return parameters;
}

ExternalData parseExternalData(const std::string& text) {
  if (text == "auto") return ExternalData::Auto;
  if (text == "always") return ExternalData::Always;
  if (text == "never") return ExternalData::Never;
  throw Error("--export-external-data needs auto, always or never, got '" + text + "'");
}

OnnxExportResult exportOnnx(const OnnxWeights& source, const std::vector<ParameterValues>& parameters,
                            const std::string& outPath, ExternalData mode, uint64_t threshold) {
  onnx::ModelProto model = source.model();
  std::unordered_map<std::string, onnx::TensorProto*> byName;
  for (onnx::TensorProto& tensor : *model.mutable_graph()->mutable_initializer())
    byName.emplace(tensor.name(), &tensor);

  // Convert everything first: a bad parameter fails before any file is touched.
  OnnxExportResult result;
  std::unordered_map<const onnx::TensorProto*, std::string> trained;
  for (const ParameterValues& values : parameters) {
    if (!values.trainable) continue;
    const std::string what = source.path() + ": initializer '" + values.name + "'";
    auto it = byName.find(values.name);
    if (it == byName.end())
      throw Error(source.path() + ": no initializer named '" + values.name +
                  "' to receive the trained parameter (is --weights the model the plan was compiled from?)");
    const std::vector<int64_t> dims(it->second->dims().begin(), it->second->dims().end());
    if (dims != values.shape)
      throw Error(what + " has shape " + joinDims(dims) + ", the trained parameter " +
                  joinDims(values.shape));
    trained[it->second] = convertToInitializer(values, it->second->data_type(), what);
  }
  result.replaced = trained.size();
  for (const onnx::TensorProto& tensor : model.graph().initializer())
    result.initializerBytes += storedBytes(tensor, source.path());

  const bool external = mode == ExternalData::Always ||
                        (mode == ExternalData::Auto && result.initializerBytes > threshold);
  std::optional<AtomicFile> data;
  if (external) {
    result.dataPath = outPath + ".data";
    data.emplace(result.dataPath);
  }
  for (onnx::TensorProto& tensor : *model.mutable_graph()->mutable_initializer()) {
    std::string bytes;
    if (auto it = trained.find(&tensor); it != trained.end()) {
      bytes = std::move(it->second);
    } else if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
      // Its `location` is relative to the source model; the bytes move with the export.
      bytes = source.readExternal(tensor, elementsOf(tensor) * onnxElementSize(tensor.data_type()));
    } else {
      continue;  // inline and untrained: left exactly as it was
    }
    clearData(tensor);
    if (!external) {
      tensor.set_raw_data(std::move(bytes));
      continue;
    }
    data->padTo(kExternalDataAlignment);
    const uint64_t offset = data->size();
    data->write(bytes.data(), bytes.size());
    tensor.set_data_location(onnx::TensorProto::EXTERNAL);
    addEntry(tensor, "location", baseName(result.dataPath));
    addEntry(tensor, "offset", std::to_string(offset));
    addEntry(tensor, "length", std::to_string(bytes.size()));
  }

  const size_t modelBytes = model.ByteSizeLong();
  if (modelBytes > static_cast<size_t>(INT_MAX))
    throw Error(outPath + ": the model would be " + std::to_string(modelBytes) +
                " bytes, over protobuf's 2 GiB limit; use --export-external-data auto or always");
  std::string serialized;
  if (!model.SerializeToString(&serialized)) throw Error(outPath + ": cannot serialize the model");
  // The data first: a model never points at data that is not there yet.
  if (data) data->commit();
  writeFileAtomically(outPath, serialized);
  return result;
}

}  // namespace megatrain::runtime
