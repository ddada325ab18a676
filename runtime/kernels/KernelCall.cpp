// KernelCall.cpp - shapes, attributes and the operand checks that every backend's kernels share.
#include "megatrain/kernels/KernelCall.h"

#include <algorithm>

namespace megatrain::kernels {

size_t dtypeBytes(DType dtype) {
  switch (dtype) {
    case DType::F32: case DType::I32: return 4;
    case DType::F64: case DType::I64: return 8;
    case DType::BF16: case DType::F16: return 2;
    case DType::U8: case DType::Bool: return 1;
    default: return 0;
  }
}

const char* dtypeLabel(DType dtype) {
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::I64: return "i64";
    case DType::I32: return "i32";
    case DType::U8: return "u8";
    case DType::Bool: return "bool";
    default: return "unspecified";
  }
}

int64_t Shape::product(int from, int to) const {
  int64_t result = 1;
  for (int i = from; i < to; ++i) result *= dims[i];
  return result;
}

bool Shape::operator==(const Shape& other) const {
  if (rank != other.rank) return false;
  for (int i = 0; i < rank; ++i)
    if (dims[i] != other.dims[i]) return false;
  return true;
}

std::string Shape::str() const {
  std::string text = "[";
  for (int i = 0; i < rank; ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

// ---- attributes ----

const Attribute* Attributes::find(const char* name) const {
  for (const Attribute& attribute : list_)
    if (attribute.name == name) return &attribute;
  return nullptr;
}

void Attributes::fail(const char* name, const char* what) const {
  throw Error(std::string(kernel_) + ": attribute '" + name + "' " + what);
}

int64_t Attributes::getInt(const char* name) const {
  const Attribute* attribute = find(name);
  if (!attribute) fail(name, "is missing");
  if (attribute->kind != Attribute::Kind::Int) fail(name, "is not an integer");
  return attribute->i;
}

int64_t Attributes::getInt(const char* name, int64_t fallback) const {
  return find(name) ? getInt(name) : fallback;
}

double Attributes::getFloat(const char* name) const {
  const Attribute* attribute = find(name);
  if (!attribute) fail(name, "is missing");
  if (attribute->kind == Attribute::Kind::Float) return attribute->f;
  if (attribute->kind == Attribute::Kind::Int) return static_cast<double>(attribute->i);
  fail(name, "is not a number");
}

double Attributes::getFloat(const char* name, double fallback) const {
  return find(name) ? getFloat(name) : fallback;
}

std::string_view Attributes::getString(const char* name, std::string_view fallback) const {
  const Attribute* attribute = find(name);
  if (!attribute) return fallback;
  if (attribute->kind != Attribute::Kind::String) fail(name, "is not a string");
  return attribute->s;
}

const std::vector<int64_t>& Attributes::getInts(const char* name) const {
  static const std::vector<int64_t> empty;
  const Attribute* attribute = find(name);
  if (!attribute) return empty;
  if (attribute->kind != Attribute::Kind::Ints) fail(name, "is not an integer list");
  return attribute->ints;
}

const std::vector<double>& Attributes::getFloats(const char* name) const {
  static const std::vector<double> empty;
  const Attribute* attribute = find(name);
  if (!attribute) return empty;
  if (attribute->kind != Attribute::Kind::Floats) fail(name, "is not a float list");
  return attribute->floats;
}

// ---- checks ----

void fail(const KernelCall& call, const std::string& what) {
  throw Error(std::string(call.kernel) + ": " + what);
}

namespace {
std::string label(const Operand& operand) { return std::string("'") + operand.name + "'"; }
}  // namespace

DType floatingType(const KernelCall& call, unsigned operands, const char* backend) {
  const Operand* first = nullptr;
  for (int slot = 0; slot < 16; ++slot) {
    if (!(operands & (1u << slot))) continue;
    const Operand& operand = slot < 8 ? call.in[slot] : call.out[slot - 8];
    if (operand.dtype != DType::F32 && operand.dtype != DType::F64)
      fail(call, "operand " + label(operand) + " is " + dtypeLabel(operand.dtype) + ", " + backend +
                     " computes in f32 or f64");
    if (first && operand.dtype != first->dtype)
      fail(call, "operand " + label(operand) + " is " + dtypeLabel(operand.dtype) + " but " +
                     label(*first) + " is " + dtypeLabel(first->dtype));
    if (!first) first = &operand;
  }
  return first ? first->dtype : DType::Unspecified;
}

void requireDType(const KernelCall& call, const Operand& operand, DType dtype, const char* role) {
  if (operand.dtype != dtype)
    fail(call, std::string(role) + " " + label(operand) + " is " + dtypeLabel(operand.dtype) +
                   ", expected " + dtypeLabel(dtype));
}

void requireShape(const KernelCall& call, const Operand& operand, const Shape& expected,
                  const char* role) {
  if (operand.shape != expected)
    fail(call, std::string(role) + " " + label(operand) + " has shape " + operand.shape.str() +
                   ", expected " + expected.str());
}

void requireScalar(const KernelCall& call, const Operand& operand, const char* role) {
  if (operand.shape.elements() != 1)
    fail(call, std::string(role) + " must hold one element, has shape " + operand.shape.str());
}

void requireSameDType(const KernelCall& call) {
  requireDType(call, call.out[0], call.in[0].dtype, "output");
  if (dtypeBytes(call.in[0].dtype) == 0) fail(call, "input dtype is unspecified");
}

// ---- shape arithmetic ----

bool broadcastShapes(const Shape& a, const Shape& b, Shape& result) {
  result.rank = std::max(a.rank, b.rank);
  for (int i = 0; i < result.rank; ++i) {
    // Right-aligned: dim i of the result pairs with dim i - (rank - x.rank) of x.
    const int ia = i - (result.rank - a.rank), ib = i - (result.rank - b.rank);
    const int64_t da = ia >= 0 ? a.dims[ia] : 1, db = ib >= 0 ? b.dims[ib] : 1;
    if (da != db && da != 1 && db != 1) return false;
    result.dims[i] = da == 1 ? db : da;
  }
  return true;
}

bool broadcastsTo(const Shape& small, const Shape& large) {
  if (small.rank > large.rank) return false;
  for (int i = 0; i < small.rank; ++i) {
    const int64_t s = small.dims[i], l = large.dims[i + large.rank - small.rank];
    if (s != l && s != 1) return false;
  }
  return true;
}

void contiguousStrides(const Shape& shape, int64_t* strides) {
  int64_t stride = 1;
  for (int i = shape.rank - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= shape.dims[i];
  }
}

void broadcastStrides(const Shape& from, const Shape& to, int64_t* strides) {
  int64_t own[kMaxRank];
  contiguousStrides(from, own);
  for (int i = 0; i < to.rank; ++i) {
    const int j = i - (to.rank - from.rank);
    strides[i] = (j < 0 || from.dims[j] == 1) ? 0 : own[j];
  }
}

}  // namespace megatrain::kernels
