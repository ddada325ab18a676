// registry.cpp - the CPU kernel registry and the helpers every kernel family shares.
#include "CpuKernel.h"

#include "megatrain/plan/DType.h"

namespace megatrain::runtime::cpu {

int64_t Shape::elements() const { return product(0, rank); }

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

void contiguousStrides(const Shape& shape, int64_t* strides) {
  int64_t stride = 1;
  for (int i = shape.rank - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= shape.dims[i];
  }
}

const plan::Attribute* Attributes::find(const char* name) const {
  if (!kernel_) return nullptr;
  for (const plan::Attribute& attribute : kernel_->attributes())
    if (attribute.name() == name) return &attribute;
  return nullptr;
}

void Attributes::fail(const char* name, const char* what) const {
  throw Error(std::string(kernel_ ? kernel_->kernel() : "kernel") + ": attribute '" + name +
              "' " + what);
}

int64_t Attributes::getInt(const char* name) const {
  const plan::Attribute* attribute = find(name);
  if (!attribute) fail(name, "is missing");
  if (attribute->value_case() != plan::Attribute::kI) fail(name, "is not an integer");
  return attribute->i();
}

int64_t Attributes::getInt(const char* name, int64_t fallback) const {
  return find(name) ? getInt(name) : fallback;
}

double Attributes::getFloat(const char* name) const {
  const plan::Attribute* attribute = find(name);
  if (!attribute) fail(name, "is missing");
  if (attribute->value_case() == plan::Attribute::kF) return attribute->f();
  if (attribute->value_case() == plan::Attribute::kI) return static_cast<double>(attribute->i());
  fail(name, "is not a number");
}

double Attributes::getFloat(const char* name, double fallback) const {
  return find(name) ? getFloat(name) : fallback;
}

std::string_view Attributes::getString(const char* name, std::string_view fallback) const {
  const plan::Attribute* attribute = find(name);
  if (!attribute) return fallback;
  if (attribute->value_case() != plan::Attribute::kS) fail(name, "is not a string");
  return attribute->s();
}

const google::protobuf::RepeatedField<int64_t>& Attributes::getInts(const char* name) const {
  const plan::Attribute* attribute = find(name);
  if (!attribute) return plan::IntList::default_instance().values();
  if (attribute->value_case() != plan::Attribute::kInts) fail(name, "is not an integer list");
  return attribute->ints().values();
}

void KernelRegistry::add(const char* name, int inputs, int outputs, KernelFn run,
                         ScratchFn scratch) {
  KernelEntry entry;
  entry.signature = {inputs, outputs};
  entry.run = run;
  entry.scratchBytes = scratch;
  entries_[name] = entry;
}

const KernelEntry* KernelRegistry::find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

const KernelRegistry& cpuKernels() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    addElementwiseKernels(r);
    addMatmulKernels(r);
    addShapeKernels(r);
    addReduceKernels(r);
    addSoftmaxKernels(r);
    addGatherKernels(r);
    addLayerNormKernels(r);
    addCrossEntropyKernels(r);
    addWhereKernels(r);
    addConcatSliceKernels(r);
    addCastKernels(r);
    addRmsNormKernels(r);
    addActivationKernels(r);
    addAttentionKernels(r);
    addRotaryKernels(r);
    return r;
  }();
  return registry;
}

void fail(const KernelArgs& args, const std::string& what) {
  throw Error(std::string(args.kernel) + ": " + what);
}

namespace {
std::string operandLabel(const KernelArgs& args, const Operand& operand) {
  return "'" + (operand.name ? *operand.name : std::string("?")) + "'";
}
}  // namespace

plan::DType floatingType(const KernelArgs& args, unsigned operands) {
  plan::DType found = plan::DTYPE_UNSPECIFIED;
  const Operand* first = nullptr;
  for (int slot = 0; slot < 16; ++slot) {
    if (!(operands & (1u << slot))) continue;
    const Operand& operand = slot < 8 ? args.in[slot] : args.out[slot - 8];
    if (operand.dtype != plan::F32 && operand.dtype != plan::F64)
      fail(args, "operand " + operandLabel(args, operand) + " is " + dtypeName(operand.dtype) +
                     ", the CPU backend computes in f32 or f64");
    if (first && operand.dtype != found)
      fail(args, "operand " + operandLabel(args, operand) + " is " + dtypeName(operand.dtype) +
                     " but " + operandLabel(args, *first) + " is " + dtypeName(found));
    if (!first) {
      first = &operand;
      found = operand.dtype;
    }
  }
  return found;
}

void requireDType(const KernelArgs& args, const Operand& operand, plan::DType dtype,
                  const char* role) {
  if (operand.dtype != dtype)
    fail(args, std::string(role) + " " + operandLabel(args, operand) + " is " +
                   dtypeName(operand.dtype) + ", expected " + dtypeName(dtype));
}

void requireShape(const KernelArgs& args, const Operand& operand, const Shape& expected,
                  const char* role) {
  if (operand.shape != expected)
    fail(args, std::string(role) + " " + operandLabel(args, operand) + " has shape " +
                   operand.shape.str() + ", expected " + expected.str());
}

bool broadcastShapes(const Shape& a, const Shape& b, Shape& result) {
  result.rank = a.rank > b.rank ? a.rank : b.rank;
  for (int i = 0; i < result.rank; ++i) {
    // Right-aligned: dim i of the result pairs with dim i - (rank - x.rank) of x.
    const int ia = i - (result.rank - a.rank), ib = i - (result.rank - b.rank);
    const int64_t da = ia >= 0 ? a.dims[ia] : 1, db = ib >= 0 ? b.dims[ib] : 1;
    if (da != db && da != 1 && db != 1) return false;
    result.dims[i] = da == 1 ? db : da;
  }
  return true;
}

void broadcastStrides(const Shape& from, const Shape& to, int64_t* strides) {
  int64_t own[kMaxRank];
  contiguousStrides(from, own);
  for (int i = 0; i < to.rank; ++i) {
    const int j = i - (to.rank - from.rank);
    strides[i] = (j < 0 || from.dims[j] == 1) ? 0 : own[j];
  }
}

}  // namespace megatrain::runtime::cpu
