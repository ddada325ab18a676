// OnnxWeights.cpp - reads ONNX initializers (inline or external data) as parameter values.
#include "megatrain/runtime/OnnxWeights.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include "megatrain/plan/DType.h"
#include "megatrain/plan/Error.h"
#include "megatrain/plan/F16.h"
#include "onnx/onnx.pb.h"

namespace megatrain::runtime {
namespace {

std::string joinShape(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// The types rawElement converts.
bool convertible(int dataType) {
  switch (dataType) {
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::DOUBLE:
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16: return true;
    default: return false;
  }
}

// Element i of little-endian raw bytes of ONNX type `dataType`, as a double.
double rawElement(const char* raw, int dataType, size_t i) {
  switch (dataType) {
    case onnx::TensorProto::FLOAT: { float v; std::memcpy(&v, raw + 4 * i, 4); return v; }
    case onnx::TensorProto::DOUBLE: { double v; std::memcpy(&v, raw + 8 * i, 8); return v; }
    case onnx::TensorProto::INT32: { int32_t v; std::memcpy(&v, raw + 4 * i, 4); return v; }
    case onnx::TensorProto::INT64: { int64_t v; std::memcpy(&v, raw + 8 * i, 8); return static_cast<double>(v); }
    case onnx::TensorProto::FLOAT16: { uint16_t v; std::memcpy(&v, raw + 2 * i, 2); return f16ToFloat(v); }
    case onnx::TensorProto::BFLOAT16: { uint16_t v; std::memcpy(&v, raw + 2 * i, 2); return bf16ToFloat(v); }
  }
  return 0;
}

template <typename T>
void storeAll(void* out, size_t count, const std::function<double(size_t)>& element) {
  T* typed = static_cast<T*>(out);
  for (size_t i = 0; i < count; ++i) typed[i] = static_cast<T>(element(i));
}

}  // namespace

size_t onnxElementSize(int dataType) {
  switch (dataType) {
    case onnx::TensorProto::DOUBLE:
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::UINT64:
    case onnx::TensorProto::COMPLEX64: return 8;
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::UINT32: return 4;
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16:
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16: return 2;
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::BOOL: return 1;
    case onnx::TensorProto::COMPLEX128: return 16;
    default: return 0;
  }
}

OnnxWeights::OnnxWeights(const std::string& modelPath)
    : path_(modelPath), model_(std::make_unique<onnx::ModelProto>()) {
  const size_t slash = modelPath.find_last_of('/');
  directory_ = slash == std::string::npos ? "." : modelPath.substr(0, slash);
  if (directory_.empty()) directory_ = "/";

  std::ifstream in(modelPath, std::ios::binary);
  if (!in) throw Error(modelPath + ": cannot open");
  google::protobuf::io::IstreamInputStream stream(&in);
  google::protobuf::io::CodedInputStream coded(&stream);
  // Models with inline weights exceed protobuf's default 64 MiB cap.
  coded.SetTotalBytesLimit(INT_MAX);
  if (!model_->ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage())
    throw Error(modelPath + ": not an ONNX model (protobuf parse failed)");
  for (const onnx::TensorProto& tensor : model_->graph().initializer())
    byName_.emplace(tensor.name(), &tensor);
}

OnnxWeights::~OnnxWeights() = default;
OnnxWeights::OnnxWeights(OnnxWeights&&) noexcept = default;
OnnxWeights& OnnxWeights::operator=(OnnxWeights&&) noexcept = default;

bool OnnxWeights::contains(const std::string& name) const { return byName_.count(name) != 0; }

std::vector<std::string> OnnxWeights::names() const {
  std::vector<std::string> result;
  for (const onnx::TensorProto& tensor : model_->graph().initializer())
    result.push_back(tensor.name());
  return result;
}

const onnx::TensorProto& OnnxWeights::find(const std::string& name) const {
  auto it = byName_.find(name);
  if (it == byName_.end()) throw Error(path_ + ": no initializer named '" + name + "'");
  return *it->second;
}

std::vector<int64_t> OnnxWeights::shape(const std::string& name) const {
  const onnx::TensorProto& tensor = find(name);
  return std::vector<int64_t>(tensor.dims().begin(), tensor.dims().end());
}

ExternalDataRef parseExternalData(const onnx::TensorProto& tensor, const std::string& what) {
  auto number = [&](const std::string& key, const std::string& text) -> uint64_t {
    uint64_t value = 0;
    bool ok = !text.empty() && text.size() <= 20;
    for (char c : text) {
      if (!ok) break;
      const uint64_t digit = static_cast<uint64_t>(c - '0');
      ok = c >= '0' && c <= '9' && value <= (UINT64_MAX - digit) / 10;
      value = value * 10 + digit;
    }
    if (!ok) throw Error(what + ": external data " + key + " '" + text + "' is not a non-negative integer");
    return value;
  };
  ExternalDataRef ref;
  for (const onnx::StringStringEntryProto& entry : tensor.external_data()) {
    if (entry.key() == "location") {
      ref.location = entry.value();
    } else if (entry.key() == "offset") {
      ref.offset = number("offset", entry.value());
    } else if (entry.key() == "length") {
      ref.length = number("length", entry.value());
      ref.hasLength = true;
    }
  }
  if (ref.location.empty()) throw Error(what + ": external data without a location");
  return ref;
}

std::string OnnxWeights::readExternal(const onnx::TensorProto& tensor,
                                      size_t elementBytes) const {
  namespace fs = std::filesystem;
  const std::string what = path_ + ": initializer '" + tensor.name() + "'";
  const ExternalDataRef ref = parseExternalData(tensor, what);
  // Containment, as onnxruntime enforces it: a relative path with no `..`
  // whose real location (symlinks followed) lies inside the model's directory.
  const fs::path location(ref.location);
  auto refuse = [&](const std::string& why) {
    throw Error(what + ": external data location '" + ref.location + "' " + why);
  };
  if (location.is_absolute()) refuse("is absolute; it must be relative to the model's directory");
  for (const fs::path& part : location)
    if (part == "..") refuse("has a '..' component; it must stay inside the model's directory");
  std::error_code error;
  const fs::path directory = fs::weakly_canonical(fs::absolute(directory_, error), error);
  const fs::path file = fs::weakly_canonical(fs::path(directory_) / location, error);
  if (error) throw Error(what + ": cannot resolve external data location '" + ref.location + "': " + error.message());
  const auto [dirEnd, fileIt] = std::mismatch(directory.begin(), directory.end(), file.begin(), file.end());
  if (dirEnd != directory.end() || fileIt == file.end())
    refuse("resolves to " + file.string() + ", outside the model's directory " + directory.string());

  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(what + ": cannot open external data file " + file.string());
  const uint64_t fileBytes = fs::file_size(file, error);
  if (error) throw Error(what + ": cannot size external data file " + file.string() + ": " + error.message());
  const uint64_t want = ref.hasLength ? ref.length : elementBytes;
  if (ref.offset > fileBytes || want > fileBytes - ref.offset)
    throw Error(what + ": external data file " + file.string() + " is too short for " + std::to_string(want) +
                " bytes at offset " + std::to_string(ref.offset) + " (it holds " + std::to_string(fileBytes) + ")");
  in.seekg(static_cast<std::streamoff>(ref.offset));
  std::string bytes(static_cast<size_t>(want), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(want));
  if (!in || static_cast<uint64_t>(in.gcount()) != want)
    throw Error(what + ": external data file " + file.string() + " is too short for " + std::to_string(want) +
                " bytes at offset " + std::to_string(ref.offset));
  return bytes;
}

void OnnxWeights::read(const std::string& name, plan::DType dtype,
                       const std::vector<int64_t>& expectedShape, void* out,
                       size_t outBytes) const {
  const onnx::TensorProto& tensor = find(name);
  const std::string what = path_ + ": initializer '" + name + "'";
  const std::vector<int64_t> actual = shape(name);
  if (actual != expectedShape)
    throw Error(what + " has shape " + joinShape(actual) + ", the plan expects " +
                joinShape(expectedShape));
  if (dtype != plan::F32 && dtype != plan::F64)
    throw Error(what + ": cannot load into a " + std::string(dtypeName(dtype)) + " parameter");
  size_t count = 1;
  for (int64_t dim : actual) count *= static_cast<size_t>(dim);
  if (outBytes != count * dtypeSize(dtype))
    throw Error(what + ": destination holds " + std::to_string(outBytes) + " bytes, expected " +
                std::to_string(count * dtypeSize(dtype)));

  const int dataType = tensor.data_type();
  const size_t elementSize = onnxElementSize(dataType);
  if (!convertible(dataType))
    throw Error(what + " has ONNX data type " +
                onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(dataType)) +
                ", expected a floating or integer type");

  std::function<double(size_t)> element;
  std::string external;  // the external bytes, kept alive while converting
  bool copied = false;
  auto fromRaw = [&](const std::string& raw, const std::string& where) {
    if (raw.size() != count * elementSize)
      throw Error(what + ": " + where + " holds " + std::to_string(raw.size()) + " bytes, expected " +
                  std::to_string(count * elementSize));
    // The common case, same type on both sides, is a plain copy (none for an
    // empty tensor, whose destination may be null).
    if ((dataType == onnx::TensorProto::FLOAT && dtype == plan::F32) ||
        (dataType == onnx::TensorProto::DOUBLE && dtype == plan::F64)) {
      if (!raw.empty()) std::memcpy(out, raw.data(), raw.size());
      copied = true;
    }
    element = [&raw, dataType](size_t i) { return rawElement(raw.data(), dataType, i); };
  };
  auto checkCount = [&](int have, const char* field) {
    if (static_cast<size_t>(have) != count)
      throw Error(what + ": " + field + " holds " + std::to_string(have) + " values, expected " +
                  std::to_string(count));
  };

  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    external = readExternal(tensor, count * elementSize);
    fromRaw(external, "external data");
  } else if (tensor.has_raw_data()) {
    fromRaw(tensor.raw_data(), "raw_data");
  } else if (dataType == onnx::TensorProto::FLOAT) {
    checkCount(tensor.float_data_size(), "float_data");
    element = [&tensor](size_t i) { return tensor.float_data(static_cast<int>(i)); };
  } else if (dataType == onnx::TensorProto::DOUBLE) {
    checkCount(tensor.double_data_size(), "double_data");
    element = [&tensor](size_t i) { return tensor.double_data(static_cast<int>(i)); };
  } else if (dataType == onnx::TensorProto::INT64) {
    checkCount(tensor.int64_data_size(), "int64_data");
    element = [&tensor](size_t i) { return static_cast<double>(tensor.int64_data(static_cast<int>(i))); };
  } else if (dataType == onnx::TensorProto::INT32) {
    checkCount(tensor.int32_data_size(), "int32_data");
    element = [&tensor](size_t i) { return tensor.int32_data(static_cast<int>(i)); };
  } else {
    // float16/bfloat16 keep their bits in int32_data, one value per entry.
    checkCount(tensor.int32_data_size(), "int32_data");
    element = [&tensor, dataType](size_t i) {
      const auto bits = static_cast<uint16_t>(tensor.int32_data(static_cast<int>(i)));
      return static_cast<double>(dataType == onnx::TensorProto::BFLOAT16 ? bf16ToFloat(bits)
                                                                         : f16ToFloat(bits));
    };
  }

  // Same-type conversions keep every bit (f32 -> f32, f64 -> f64); the rest round.
  if (copied) return;
  if (dtype == plan::F32) storeAll<float>(out, count, element);
  else storeAll<double>(out, count, element);
}

}  // namespace megatrain::runtime
