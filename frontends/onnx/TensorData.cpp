//===- TensorData.cpp - reading ONNX TensorProto dtypes, dims and values ---===//
#include "TensorData.h"

#include "llvm/Support/Endian.h"

#include <cstring>

using namespace mlir;

namespace megatrain::onnx_import {

std::string dtypeName(int32_t dtype) {
  if (onnx::TensorProto::DataType_IsValid(dtype))
    return onnx::TensorProto::DataType_Name(
        static_cast<onnx::TensorProto::DataType>(dtype));
  return "dtype " + std::to_string(dtype);
}

bool isFloatDtype(int32_t dtype) {
  return dtype == onnx::TensorProto::FLOAT || dtype == onnx::TensorProto::DOUBLE ||
         isHalfDtype(dtype);
}

bool isHalfDtype(int32_t dtype) {
  return dtype == onnx::TensorProto::FLOAT16 || dtype == onnx::TensorProto::BFLOAT16;
}

float halfBitsToFloat(int32_t dtype, uint16_t bits) {
  if (dtype == onnx::TensorProto::BFLOAT16) {
    uint32_t word = (uint32_t)bits << 16;
    float out;
    std::memcpy(&out, &word, 4);
    return out;
  }
  // IEEE binary16: 1 sign, 5 exponent, 10 mantissa bits.
  uint32_t sign = (uint32_t)(bits & 0x8000) << 16;
  uint32_t exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
  uint32_t word;
  if (exponent == 0x1f) {
    word = sign | 0x7f800000u | (mantissa << 13); // inf, nan
  } else if (exponent != 0) {
    word = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    word = sign; // +-0
  } else {
    // Subnormal: normalize the mantissa.
    int shift = 0;
    while (!(mantissa & 0x400)) {
      mantissa <<= 1;
      ++shift;
    }
    word = sign | ((uint32_t)(113 - shift) << 23) | ((mantissa & 0x3ff) << 13);
  }
  float out;
  std::memcpy(&out, &word, 4);
  return out;
}

bool isIntegerDtype(int32_t dtype) {
  return dtype == onnx::TensorProto::INT64 || dtype == onnx::TensorProto::INT32;
}

Type elementTypeOf(MLIRContext &context, int32_t dtype) {
  switch (dtype) {
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    return Float32Type::get(&context);
  case onnx::TensorProto::DOUBLE:
    return Float64Type::get(&context);
  case onnx::TensorProto::INT64:
  case onnx::TensorProto::INT32:
    return IntegerType::get(&context, 64);
  default:
    return {};
  }
}

std::vector<int64_t> dimsOf(const onnx::TensorProto &tensor) {
  return std::vector<int64_t>(tensor.dims().begin(), tensor.dims().end());
}

static bool elementCount(const onnx::TensorProto &tensor, int64_t &count,
                         std::string &error) {
  count = 1;
  for (int64_t d : tensor.dims()) {
    if (d < 0) {
      error = "has a negative dim";
      return false;
    }
    if (__builtin_mul_overflow(count, d, &count)) {
      error = "has dims whose element count overflows 64 bits";
      return false;
    }
  }
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    error = "stores its data externally; constants must be inline";
    return false;
  }
  return true;
}

// raw_data is little-endian per the ONNX spec; values are copied out
// element by element so the host byte order does not matter.
template <typename T>
static bool readRaw(const onnx::TensorProto &tensor, int64_t count, std::vector<T> &out,
                    std::string &error) {
  const std::string &raw = tensor.raw_data();
  if ((int64_t)raw.size() != count * (int64_t)sizeof(T)) {
    error = "has " + std::to_string(raw.size()) + " bytes of raw data for " +
            std::to_string(count) + " elements";
    return false;
  }
  out.resize(count);
  for (int64_t i = 0; i < count; ++i)
    out[i] = llvm::support::endian::read<T, llvm::endianness::little>(raw.data() +
                                                                      i * sizeof(T));
  return true;
}

template <typename T, typename Field>
static bool readField(const Field &field, int64_t count, std::vector<T> &out,
                      std::string &error) {
  if ((int64_t)field.size() != count) {
    error = "has " + std::to_string(field.size()) + " values for " +
            std::to_string(count) + " elements";
    return false;
  }
  out.assign(field.begin(), field.end());
  return true;
}

bool readIntegers(const onnx::TensorProto &tensor, std::vector<int64_t> &out,
                  std::string &error) {
  int64_t count;
  if (!elementCount(tensor, count, error))
    return false;
  if (tensor.data_type() == onnx::TensorProto::INT64) {
    if (tensor.has_raw_data())
      return readRaw<int64_t>(tensor, count, out, error);
    return readField<int64_t>(tensor.int64_data(), count, out, error);
  }
  if (tensor.data_type() == onnx::TensorProto::INT32) {
    std::vector<int32_t> narrow;
    bool ok = tensor.has_raw_data()
                  ? readRaw<int32_t>(tensor, count, narrow, error)
                  : readField<int32_t>(tensor.int32_data(), count, narrow, error);
    out.assign(narrow.begin(), narrow.end());
    return ok;
  }
  error = "has dtype " + dtypeName(tensor.data_type()) + ", expected INT64 or INT32";
  return false;
}

bool readReals(const onnx::TensorProto &tensor, std::vector<double> &out,
               std::string &error) {
  int64_t count;
  if (!elementCount(tensor, count, error))
    return false;
  if (tensor.data_type() == onnx::TensorProto::DOUBLE) {
    if (tensor.has_raw_data())
      return readRaw<double>(tensor, count, out, error);
    return readField<double>(tensor.double_data(), count, out, error);
  }
  if (tensor.data_type() == onnx::TensorProto::FLOAT) {
    std::vector<float> narrow;
    bool ok = tensor.has_raw_data()
                  ? readRaw<float>(tensor, count, narrow, error)
                  : readField<float>(tensor.float_data(), count, narrow, error);
    out.assign(narrow.begin(), narrow.end());
    return ok;
  }
  if (isHalfDtype(tensor.data_type())) {
    // raw_data holds 2 bytes an element; int32_data one element's bits per value.
    std::vector<uint16_t> bits;
    bool ok = true;
    if (tensor.has_raw_data()) {
      ok = readRaw<uint16_t>(tensor, count, bits, error);
    } else {
      std::vector<int32_t> wide;
      ok = readField<int32_t>(tensor.int32_data(), count, wide, error);
      for (int32_t v : wide)
        bits.push_back((uint16_t)v);
    }
    out.clear();
    for (uint16_t b : bits)
      out.push_back(halfBitsToFloat(tensor.data_type(), b));
    return ok;
  }
  error = "has dtype " + dtypeName(tensor.data_type()) +
          ", expected FLOAT, DOUBLE, FLOAT16 or BFLOAT16";
  return false;
}

} // namespace megatrain::onnx_import
