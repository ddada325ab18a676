// CudaKernel.cpp - the CUDA kernel table and the host-side helpers every launcher shares.
#include "CudaKernel.h"

#include <cublas_v2.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace megatrain::runtime::cuda {

bool wideIndicesForced() {
  static const bool forced = [] {
    const char* value = std::getenv("MEGATRAIN_CUDA_WIDE_INDEX");
    const std::string text = value ? value : "";
    if (text.empty() || text == "0") return false;
    if (text == "1") return true;
    throw Error("MEGATRAIN_CUDA_WIDE_INDEX='" + text + "' is not 0 or 1");
  }();
  return forced;
}

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
  if (!list_) return nullptr;
  for (const Attribute& attribute : *list_)
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

// ---- the table ----

void KernelTable::add(const char* name, int inputs, int outputs, LaunchFn launch,
                      ScratchFn scratch, const char* badData) {
  entries_[name] = KernelEntry{inputs, outputs, launch, scratch, badData};
}

const KernelEntry* KernelTable::find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

const KernelTable& cudaKernels() {
  static const KernelTable table = [] {
    KernelTable t;
    addElementwiseKernels(t);
    addMatmulKernels(t);
    addShapeKernels(t);
    addReduceKernels(t);
    addSoftmaxKernels(t);
    addGatherKernels(t);
    addLayerNormKernels(t);
    addCrossEntropyKernels(t);
    addWhereKernels(t);
    addConcatSliceKernels(t);
    addCastKernels(t);
    addRmsNormKernels(t);
    addActivationKernels(t);
    addAttentionKernels(t);
    addRotaryKernels(t);
    return t;
  }();
  return table;
}

// ---- errors ----

void checkCuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  throw Error(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " +
              cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

void checkCublas(int status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const auto code = static_cast<cublasStatus_t>(status);
  throw Error(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " +
              cublasGetStatusName(code) + " (" + cublasGetStatusString(code) + ")");
}

void checkLaunch(const Launch& launch, const char* file, int line) {
  const cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) return;
  throw Error(std::string(file) + ":" + std::to_string(line) + ": " + launch.kernel + " (step " +
              std::to_string(launch.step) + "): launch failed: " + cudaGetErrorName(status) +
              " (" + cudaGetErrorString(status) + ")");
}

void fail(const Launch& launch, const std::string& what) {
  throw Error(std::string(launch.kernel) + ": " + what);
}

namespace {
std::string label(const Operand& operand) { return std::string("'") + operand.name + "'"; }
}  // namespace

DType floatingType(const Launch& launch, unsigned operands) {
  const Operand* first = nullptr;
  for (int slot = 0; slot < 16; ++slot) {
    if (!(operands & (1u << slot))) continue;
    const Operand& operand = slot < 8 ? launch.in[slot] : launch.out[slot - 8];
    if (operand.dtype != DType::F32 && operand.dtype != DType::F64)
      fail(launch, "operand " + label(operand) + " is " + dtypeLabel(operand.dtype) +
                       ", the CUDA backend computes in f32 or f64");
    if (first && operand.dtype != first->dtype)
      fail(launch, "operand " + label(operand) + " is " + dtypeLabel(operand.dtype) + " but " +
                       label(*first) + " is " + dtypeLabel(first->dtype));
    if (!first) first = &operand;
  }
  return first ? first->dtype : DType::F32;
}

void requireDType(const Launch& launch, const Operand& operand, DType dtype, const char* role) {
  if (operand.dtype != dtype)
    fail(launch, std::string(role) + " " + label(operand) + " is " + dtypeLabel(operand.dtype) +
                     ", expected " + dtypeLabel(dtype));
}

void requireShape(const Launch& launch, const Operand& operand, const Shape& expected,
                  const char* role) {
  if (operand.shape != expected)
    fail(launch, std::string(role) + " " + label(operand) + " has shape " + operand.shape.str() +
                     ", expected " + expected.str());
}

void requireSameDType(const Launch& launch) {
  requireDType(launch, launch.out[0], launch.in[0].dtype, "output");
  if (dtypeBytes(launch.in[0].dtype) == 0) fail(launch, "input dtype is unspecified");
}

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

void copyBytes(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  if (bytes == 0 || d == s) return;
  const size_t gap = d > s ? static_cast<size_t>(d - s) : static_cast<size_t>(s - d);
  if (gap >= bytes) {
    MT_CUDA_CHECK(cudaMemcpyAsync(d, s, bytes, cudaMemcpyDefault, stream));
    return;
  }
  // Moving down: copy front to back in pieces of `gap` bytes; moving up: back to front.
  for (size_t done = 0; done < bytes; done += gap) {
    const size_t piece = std::min(gap, bytes - done);
    const size_t at = d < s ? done : bytes - done - piece;
    MT_CUDA_CHECK(cudaMemcpyAsync(d + at, s + at, piece, cudaMemcpyDefault, stream));
  }
}

unsigned gridFor(const Launch& launch, int64_t n, int threads) {
  const int64_t needed = (n + threads - 1) / threads;
  const int64_t full = static_cast<int64_t>(launch.device->smCount) * 16;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(needed, full)));
}

}  // namespace megatrain::runtime::cuda
