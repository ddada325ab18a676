//===- ConstTensor.cpp - values known at import time ------------------------===//
#include "ConstTensor.h"
#include "TensorData.h"

#include "mlir/IR/BuiltinTypes.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace megatrain::onnx_import {

ConstTensor ConstTensor::zeros(ConstKind kind, std::vector<int64_t> shape) {
  ConstTensor t;
  t.kind = kind;
  t.shape = std::move(shape);
  if (t.isFloat())
    t.f.assign(t.elements(), 0.0);
  else
    t.i.assign(t.elements(), 0);
  return t;
}

int64_t ConstTensor::elements() const { return numElements(shape); }

int64_t ConstTensor::bytes() const {
  const int64_t size = kind == ConstKind::F32 ? 4 : kind == ConstKind::Bool ? 1 : 8;
  int64_t out; // saturating, as elements() is
  if (__builtin_mul_overflow(elements(), size, &out))
    return std::numeric_limits<int64_t>::max();
  return out;
}

std::optional<ConstKind> constKindOf(int32_t dtype) {
  switch (dtype) {
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::FLOAT16:  // widened: 16-bit models compute in f32
  case onnx::TensorProto::BFLOAT16:
    return ConstKind::F32;
  case onnx::TensorProto::DOUBLE:
    return ConstKind::F64;
  case onnx::TensorProto::INT64:
  case onnx::TensorProto::INT32:
    return ConstKind::I64;
  case onnx::TensorProto::BOOL:
    return ConstKind::Bool;
  default:
    return std::nullopt;
  }
}

const char *kindName(ConstKind kind) {
  switch (kind) {
  case ConstKind::F32:
    return "f32";
  case ConstKind::F64:
    return "f64";
  case ConstKind::I64:
    return "i64";
  case ConstKind::Bool:
    return "bool";
  }
  return "?";
}

Type mlirTypeOf(MLIRContext &context, ConstKind kind) {
  switch (kind) {
  case ConstKind::F32:
    return Float32Type::get(&context);
  case ConstKind::F64:
    return Float64Type::get(&context);
  case ConstKind::I64:
    return IntegerType::get(&context, 64);
  case ConstKind::Bool:
    return IntegerType::get(&context, 1);
  }
  return {};
}

std::optional<ConstKind> constKindOf(Type element) {
  if (element.isF32())
    return ConstKind::F32;
  if (element.isF64())
    return ConstKind::F64;
  if (element.isInteger(64))
    return ConstKind::I64;
  if (element.isInteger(1))
    return ConstKind::Bool;
  return std::nullopt;
}

int64_t floatToInt(double x) {
  if (std::isnan(x))
    return 0;
  if (x >= 9.2233720368547758e18)
    return std::numeric_limits<int64_t>::max();
  if (x <= -9.2233720368547758e18)
    return std::numeric_limits<int64_t>::min();
  return (int64_t)x;
}

bool readConstTensor(const onnx::TensorProto &tensor, ConstTensor &out,
                     std::string &error) {
  std::optional<ConstKind> kind = constKindOf(tensor.data_type());
  if (!kind) {
    error = "has unsupported dtype " + dtypeName(tensor.data_type());
    return false;
  }
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    error = "stores its data externally; it is not read at import time";
    return false;
  }
  out = ConstTensor();
  out.kind = *kind;
  out.shape = dimsOf(tensor);
  for (int64_t d : out.shape)
    if (d < 0) {
      error = "has a negative dim";
      return false;
    }
  int64_t count = out.elements();
  if (count > kMaxFoldElements) {
    error = "has " + std::to_string(count) +
            " elements; values read at import time "
            "are limited to " +
            std::to_string(kMaxFoldElements);
    return false;
  }
  if (*kind == ConstKind::Bool) {
    // BOOL is one byte per element in raw_data, int32_data otherwise.
    if (tensor.has_raw_data()) {
      const std::string &raw = tensor.raw_data();
      if ((int64_t)raw.size() != count) {
        error = "has " + std::to_string(raw.size()) + " bytes of raw data for " +
                std::to_string(count) + " elements";
        return false;
      }
      for (char c : raw)
        out.i.push_back(c != 0);
    } else {
      if (tensor.int32_data_size() != count) {
        error = "has " + std::to_string(tensor.int32_data_size()) + " values for " +
                std::to_string(count) + " elements";
        return false;
      }
      for (int32_t v : tensor.int32_data())
        out.i.push_back(v != 0);
    }
    return true;
  }
  if (*kind == ConstKind::I64)
    return readIntegers(tensor, out.i, error);
  return readReals(tensor, out.f, error);
}

DenseElementsAttr toAttr(MLIRContext &context, const ConstTensor &value) {
  auto type = RankedTensorType::get(value.shape, mlirTypeOf(context, value.kind));
  switch (value.kind) {
  case ConstKind::F32: {
    std::vector<float> data(value.f.begin(), value.f.end());
    return DenseElementsAttr::get(type, llvm::ArrayRef<float>(data));
  }
  case ConstKind::F64:
    return DenseElementsAttr::get(type, llvm::ArrayRef<double>(value.f));
  case ConstKind::I64:
    return DenseElementsAttr::get(type, llvm::ArrayRef<int64_t>(value.i));
  case ConstKind::Bool: {
    llvm::SmallVector<bool> data;
    for (int64_t v : value.i)
      data.push_back(v != 0);
    return DenseElementsAttr::get(type, llvm::ArrayRef<bool>(data));
  }
  }
  return {};
}

bool dropRepeatedDims(const ConstTensor &value, ConstTensor &reduced) {
  ConstTensor current = value;
  bool any = false;
  for (size_t d = 0; d < current.shape.size(); ++d) {
    int64_t n = current.shape[d];
    if (n <= 1)
      continue;
    std::vector<int64_t> strides = stridesOf(current.shape);
    int64_t outer = numElements(llvm::ArrayRef<int64_t>(current.shape).take_front(d));
    int64_t inner = strides[d];
    bool repeats = true;
    for (int64_t o = 0; repeats && o < outer; ++o)
      for (int64_t k = 1; repeats && k < n; ++k)
        for (int64_t j = 0; j < inner; ++j) {
          int64_t a = o * n * inner + j, b = a + k * inner;
          if (current.isFloat() ? current.f[a] != current.f[b]
                                : current.i[a] != current.i[b]) {
            repeats = false;
            break;
          }
        }
    if (!repeats)
      continue;
    std::vector<int64_t> shape = current.shape;
    shape[d] = 1;
    ConstTensor next = ConstTensor::zeros(current.kind, shape);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < inner; ++j)
        copyElement(current, o * n * inner + j, next, o * inner + j);
    current = std::move(next);
    any = true;
  }
  if (any)
    reduced = std::move(current);
  return any;
}

ConstTensor sliceConst(const ConstTensor &x, const std::vector<SliceDim> &dims) {
  std::vector<int64_t> shape;
  for (const SliceDim &d : dims)
    shape.push_back(d.count);
  ConstTensor y = ConstTensor::zeros(x.kind, shape);
  std::vector<int64_t> strides = stridesOf(x.shape);
  int64_t total = y.elements();
  std::vector<int64_t> counter(shape.size(), 0);
  for (int64_t e = 0; e < total; ++e) {
    int64_t src = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      src += (dims[d].start + counter[d] * dims[d].step) * strides[d];
    copyElement(x, src, y, e);
    for (int d = (int)shape.size() - 1; d >= 0; --d) {
      if (++counter[d] < shape[d])
        break;
      counter[d] = 0;
    }
  }
  return y;
}

} // namespace megatrain::onnx_import
