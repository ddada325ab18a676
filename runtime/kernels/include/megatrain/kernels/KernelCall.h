// KernelCall.h - what every backend's kernel sees: shapes, operands, attributes and the checks on them.
//
// The kernel layer is backend-neutral: it includes no protobuf, CUDA or MLIR
// header, only the plan library's plain Error.h, Bf16.h and PointwiseProgram.h (tests/layering
// checks it), so the CPU kernels, the CUDA
// launchers and the plan validator all compile against it. A backend resolves
// each Kernel step of a plan once, at prepare time, into a KernelCall (or a
// struct derived from it that adds the backend's own context), and a kernel
// only reads it: a launch allocates nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "megatrain/plan/Error.h"

namespace megatrain::kernels {

inline constexpr int kMaxRank = 8;
// Operands per side; 8 fits the masks of floatingType (bits 0-7 in, 8-15 out).
inline constexpr int kMaxOperands = 8;

// The plan's element types, numbered as plan.proto numbers them (the runtime's
// KernelBinding static_asserts the correspondence).
enum class DType : int { Unspecified = 0, F32 = 1, F64 = 2, BF16 = 3, F16 = 4, I64 = 5, I32 = 6, U8 = 7, Bool = 8 };
// Bytes per element; 0 for Unspecified.
size_t dtypeBytes(DType dtype);
// "f32", "bf16", ...; "unspecified".
const char* dtypeLabel(DType dtype);

// A static shape without heap storage.
struct Shape {
  int rank = 0;
  int64_t dims[kMaxRank] = {};

  int64_t operator[](int i) const { return dims[i]; }
  int64_t elements() const { return product(0, rank); }
  int64_t product(int from, int to) const;  // of dims [from, to)
  bool operator==(const Shape& other) const;
  bool operator!=(const Shape& other) const { return !(*this == other); }
  std::string str() const;  // "[4, 3]"
};

// One tensor a kernel reads or writes. `data` is a host address on the CPU
// backend, a device address on CUDA, and null when the plan validator checks
// a step's shapes before anything is allocated.
struct Operand {
  void* data = nullptr;
  Shape shape;
  DType dtype = DType::Unspecified;
  const char* name = "?";

  template <typename T>
  T* as() const { return static_cast<T*>(data); }
  std::byte* bytes() const { return static_cast<std::byte*>(data); }
};

// A Kernel step's attribute, copied out of the plan at prepare time.
struct Attribute {
  enum class Kind { Int, Float, String, Ints, Floats };
  std::string name;
  Kind kind = Kind::Int;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
};

// Typed access to a step's attributes; a missing required attribute or one of
// the wrong kind is an Error naming the kernel.
class Attributes {
 public:
  Attributes() = default;
  Attributes(std::vector<Attribute> list, const char* kernel) : list_(std::move(list)), kernel_(kernel) {}

  int64_t getInt(const char* name) const;
  int64_t getInt(const char* name, int64_t fallback) const;
  double getFloat(const char* name) const;  // an integer attribute is accepted too
  double getFloat(const char* name, double fallback) const;
  std::string_view getString(const char* name, std::string_view fallback) const;
  const std::vector<int64_t>& getInts(const char* name) const;  // absent: empty
  const std::vector<double>& getFloats(const char* name) const;  // absent: empty
  bool has(const char* name) const { return find(name) != nullptr; }
  const std::vector<Attribute>& list() const { return list_; }

 private:
  const Attribute* find(const char* name) const;
  [[noreturn]] void fail(const char* name, const char* what) const;

  std::vector<Attribute> list_;
  const char* kernel_ = "kernel";
};

// One Kernel step, resolved: what both backends' kernels and the shape rules read.
struct KernelCall {
  const char* kernel = "";
  int step = -1;  // the plan step, for messages; -1 outside a plan
  Operand in[kMaxOperands];
  Operand out[kMaxOperands];
  int numIn = 0;
  int numOut = 0;
  Attributes attrs;
};

// ---- checks shared by the shape rules and the backends ----

// An Error "<kernel>: <what>".
[[noreturn]] void fail(const KernelCall& call, const std::string& what);

// The element type of the floating operands: all must be F32 or all F64.
// `operands` lists which: bit i for in[i], bit (8 + i) for out[i]. `backend`
// names who computes ("the CPU backend") in the message.
DType floatingType(const KernelCall& call, unsigned operands, const char* backend);
inline constexpr unsigned inMask(int i) { return 1u << i; }
inline constexpr unsigned outMask(int i) { return 1u << (8 + i); }

void requireDType(const KernelCall& call, const Operand& operand, DType dtype, const char* role);
void requireShape(const KernelCall& call, const Operand& operand, const Shape& expected,
                  const char* role);
// One element, any rank.
void requireScalar(const KernelCall& call, const Operand& operand, const char* role);
// Equal byte sizes per element and a known dtype (shape kernels move any dtype).
void requireSameDType(const KernelCall& call);

// ---- shape arithmetic ----

// Numpy broadcasting of a and b (right-aligned, 1 stretches); false if incompatible.
bool broadcastShapes(const Shape& a, const Shape& b, Shape& result);
// True if `small` broadcasts to `large`.
bool broadcastsTo(const Shape& small, const Shape& large);
// Row-major strides of `shape`, in elements.
void contiguousStrides(const Shape& shape, int64_t* strides);
// Strides that read `from` as if broadcast to `to` (right-aligned, 0 on stretched dims).
void broadcastStrides(const Shape& from, const Shape& to, int64_t* strides);

// Calls f(float{}) or f(double{}) for a floating dtype (F64: double, else float).
template <typename F>
void dispatchFloating(DType dtype, F&& f) {
  if (dtype == DType::F64) f(double{});
  else f(float{});
}

}  // namespace megatrain::kernels
